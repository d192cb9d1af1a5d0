"""MkDocs hook: BENCHMARKS.md and CHANGELOG.md, which live at the repository root (where GitHub shows them),
become the site's ``results.md`` and ``changelog.md``. Their links are written for the repository root
(``docs/benchmarks/x.md``); here they are rewritten for the site root (``benchmarks/x.md``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
PAGES = {"BENCHMARKS.md": "results.md", "CHANGELOG.md": "changelog.md"}
_LINK = re.compile(r"\]\((?!https?:|#)([^)\s]+)\)")


def site_link(target: str) -> str:
    """A link of a root-level Markdown file, as the site's root-level page needs it."""
    path, _, anchor = target.partition("#")
    if path.startswith("docs/"):
        path = path[len("docs/"):]
    elif path in PAGES:
        path = PAGES[path]
    elif path == "README.md":
        path = "index.md"
    return path + (f"#{anchor}" if anchor else "")


def on_files(files: Files, config: Any) -> Files:
    for source, page in PAGES.items():
        text = (ROOT / source).read_text(encoding="utf-8")
        text = _LINK.sub(lambda m: f"]({site_link(m.group(1))})", text)
        files.append(File.generated(config, page, content=text))
    return files
