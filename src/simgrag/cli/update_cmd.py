"""``simgrag update INDEX_DIR --add FILE --remove FILE``: change an index's KG without a rebuild."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from simgrag.cli._common import (
    AsJson,
    IndexArg,
    KGFormat,
    Quiet,
    SkipBadLines,
    Verbose,
    _fail,
    _setup_logging,
    app,
    out,
)
from simgrag.errors import ConfigError, SimGRAGError


@app.command()
def update(
    index_dir: IndexArg,
    add: Annotated[list[Path] | None, typer.Option("--add", help="KG file of triples to add (any format `simgrag "
                                                               "index` reads); repeatable")] = None,
    remove: Annotated[list[Path] | None, typer.Option("--remove", help="KG file of triples to remove; repeatable")]
    = None,
    format: KGFormat = None,
    skip_bad_lines: SkipBadLines = False,
    embedder: Annotated[str | None, typer.Option("--embedder", help="embedder to open it with (default: the "
                                                                    "manifest's)")] = None,
    verify_index: Annotated[bool, typer.Option("--verify/--no-verify", help="check every file's sha256 before "
                                                                        "updating (as `simgrag check`)")] = False,
    as_json: AsJson = False,
    verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """Add and remove triples in an index directory without a rebuild, as one atomic step: removals
    first, then additions; new entities are embedded and appended to the vector index. A process that
    has the index open (`simgrag serve`) keeps the old version until it is restarted."""
    _setup_logging(verbose, quiet)
    from simgrag.index.update import load_batches, update_index_dir

    try:
        if not add and not remove:
            raise ConfigError("give --add FILE and/or --remove FILE")
        show = False if quiet else None
        add_batch, _ = load_batches(add or [], what="--add", format=format, skip_bad_lines=skip_bad_lines,
                                    show_progress=show)
        remove_batch, _ = load_batches(remove or [], what="--remove", format=format, skip_bad_lines=skip_bad_lines,
                                       show_progress=show)
        result = update_index_dir(index_dir, add=add_batch, remove=remove_batch, embedder=embedder, verify=verify_index,
                                  show_progress=show, sources={"add": ", ".join(map(str, add or [])),
                                                               "remove": ", ".join(map(str, remove or []))})
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print_json(data=result.to_dict())
        return
    r = result.report
    if not r.changed:
        out.print(f"{index_dir}: nothing to change ({r.already_present:,} triples already there, "
                  f"{r.not_found:,} to remove not found)", highlight=False, markup=False)
        return
    out.print(f"{index_dir}: update {result.updates} in {result.timings.get('total_s', 0.0):.2f} s: "
              f"+{r.triples_added:,} triples ({r.already_present:,} already there), -{r.triples_removed:,} "
              f"({r.not_found:,} not found); entities +{r.entities_added:,} new, {r.entities_revived:,} revived, "
              f"{r.entities_retired:,} retired; relations +{r.relations_added:,} -{r.relations_dropped:,}",
              highlight=False, markup=False)
