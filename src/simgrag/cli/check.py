"""``simgrag check INDEX_DIR``: verify an index directory completely (structure, hashes, vectors)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

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
    _check_fits(index_dir, report)
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


def _check_fits(index_dir: Path, report: Any) -> None:
    """The pattern stage's fit and the abstention thresholds recorded with the index, as notes (a malformed
    record is a problem): what `ask` will run on this KG."""
    from simgrag.answer.calibration import MANIFEST_KEY, Calibration
    from simgrag.answer.mode_fit import check_answer_mode, read_answer_mode
    from simgrag.errors import SimGRAGError
    from simgrag.grounding.fit import UNFITTED, check_fit, read_fit
    from simgrag.index.attach import read_manifest_json

    try:
        manifest = read_manifest_json(index_dir)
    except SimGRAGError:
        return  # verify_index has said what is wrong with it
    sections: list[tuple[str, Any, Any, str]] = [
        ("pattern stage", check_fit, read_fit, UNFITTED),
        ("answer mode", check_answer_mode, read_answer_mode, "not fitted (auto: exact bindings, else the LLM)"),
    ]
    for label, check, read, unfitted in sections:
        problem = check(manifest)
        if problem is not None:
            report.problems.append(problem)
        else:
            found = read(manifest)
            report.notes.append(f"{label}: " + (found.describe() if found is not None else unfitted))
    if MANIFEST_KEY in manifest:
        try:
            found = Calibration.from_dict(manifest[MANIFEST_KEY], f"manifest {MANIFEST_KEY!r}")
            shown = {k: v for k, v in found.to_dict().items() if k not in ("info", "format_version") and v}
            report.notes.append(f"abstention thresholds fitted on {found.info.get('questions')} of this KG's "
                                f"questions: {shown}")
        except (SimGRAGError, TypeError, AttributeError) as exc:
            report.problems.append(f"{MANIFEST_KEY}: {exc}")
