"""``simgrag update INDEX_DIR --add FILE --remove FILE``: change an index's KG without a rebuild."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

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

if TYPE_CHECKING:
    from simgrag.index.update import UpdateResult


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
    compact: Annotated[bool, typer.Option("--compact", help="then drop retired entities (left without triples) "
                                                            "for good: renumbers entity ids and rebuilds the "
                                                            "entity vector index from the stored vectors")] = False,
    as_json: AsJson = False,
    verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """Add and remove triples in an index directory without a rebuild, as one atomic step: removals
    first, then additions; new entities are embedded and appended to the vector index. A process that
    has the index open (`simgrag serve`) keeps the old version until it is restarted."""
    _setup_logging(verbose, quiet)
    from simgrag.index.compact import compact_index_dir
    from simgrag.index.update import load_batches, update_index_dir

    try:
        if not add and not remove and not compact:
            raise ConfigError("give --add FILE and/or --remove FILE (or --compact)")
        show = False if quiet else None
        add_batch, _ = load_batches(add or [], what="--add", format=format, skip_bad_lines=skip_bad_lines,
                                    show_progress=show)
        remove_batch, _ = load_batches(remove or [], what="--remove", format=format, skip_bad_lines=skip_bad_lines,
                                       show_progress=show)
        results = []
        if add_batch is not None or remove_batch is not None:
            results.append(update_index_dir(index_dir, add=add_batch, remove=remove_batch, embedder=embedder,
                                            verify=verify_index, show_progress=show,
                                            sources={"add": ", ".join(map(str, add or [])),
                                                     "remove": ", ".join(map(str, remove or []))}))
        if compact:
            results.append(compact_index_dir(index_dir, embedder=embedder, show_progress=show))
    except SimGRAGError as exc:
        raise _fail(exc) from exc
    if as_json:
        out.print_json(data=results[0].to_dict() if len(results) == 1 else [r.to_dict() for r in results])
        return
    for result in results:
        out.print(_summary(index_dir, result), highlight=False, markup=False)


def _summary(index_dir: Path, result: UpdateResult) -> str:
    r = result.report
    if not r.changed:
        return (f"{index_dir}: nothing to change ({r.already_present:,} triples already there, "
                f"{r.not_found:,} to remove not found, no retired entity to drop)")
    took = result.timings.get("total_s", 0.0)
    if r.entities_dropped:
        return f"{index_dir}: update {result.updates} in {took:.2f} s: {r.entities_dropped:,} retired entities dropped"
    return (f"{index_dir}: update {result.updates} in {took:.2f} s: +{r.triples_added:,} triples "
            f"({r.already_present:,} already there), -{r.triples_removed:,} ({r.not_found:,} not found); entities "
            f"+{r.entities_added:,} new, {r.entities_revived:,} revived, {r.entities_retired:,} retired; relations "
            f"+{r.relations_added:,} -{r.relations_dropped:,}")
