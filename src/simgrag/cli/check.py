"""``simgrag check INDEX_DIR``: verify an index directory completely (structure, hashes, vectors)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from simgrag.cli._common import AsJson, Quiet, Verbose, _setup_logging, app, console, out


@app.command("check")
def check_index(
    index_dir: Annotated[Path, typer.Argument(help="index directory from `simgrag index`")],
    embedder: Annotated[str | None, typer.Option("--embedder", help="embedder to open it with (default: the "
                                                                    "manifest's)")] = None,
    as_json: AsJson = False,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    """Check an index: manifest, store structure, vectors, KG content hash and every file's sha256.
    Exit code 0 when it passes, 2 when it does not (each problem is listed)."""
    _setup_logging(verbose, quiet)
    from simgrag.index.verify import verify_index

    report = verify_index(index_dir, embedder=embedder)
    if as_json:
        out.print_json(data=report.to_dict())
    else:
        for name, seconds in report.checks.items():
            out.print(f"  {name.removesuffix('_s'):<16} {seconds * 1000:8.1f} ms", highlight=False)
        for note in report.notes:
            out.print(f"  note: {note}", highlight=False, markup=False)
        if report.ok:
            out.print(f"{index_dir}: OK", highlight=False, markup=False)
        for problem in report.problems:
            console.print(f"[bold red]problem:[/] {problem}", markup=True, highlight=False)
    if not report.ok:
        raise typer.Exit(code=2)
