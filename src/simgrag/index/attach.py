"""The files an index directory carries for the LLM side: its few-shot examples, relation aliases and
validation questions.

An index knows the examples it was built (or bootstrapped) with, so that ``ask``/``serve``/``bench``/
``mcp`` on a KG of one's own use them by default (:func:`simgrag.retrievers.simgrag.index_examples`)::

    INDEX_DIR/examples.yaml          the question → pattern few-shot examples
    INDEX_DIR/claim_examples.yaml    claim → pattern examples (optional; else the question examples serve)
    INDEX_DIR/relation_aliases.yaml  the relation aliases embedded in relation_index/
    INDEX_DIR/validation.jsonl       questions with gold answers that are never shots (learnt with the
                                     examples: ``simgrag learn``), what the pattern stage is fitted on

Each one is recorded in the manifest under ``attached`` — the file, its sha256, where it came from,
whether it was bootstrapped (``simgrag examples bootstrap``) and when — and is listed, like every data
file, in the manifest's ``files`` table, so ``simgrag check`` and the server verify it. Opening a
recorded file checks its sha256 again (the files are small): a file edited in place after the build is
an :class:`~simgrag.errors.IndexDirError` that says how to attach the edited version.

A build stages the files into its work directory before its manifest is written
(:func:`stage_attachments`); :func:`attach_file` adds or replaces one in a finished index (the file is
written first, the manifest last, each atomically).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from simgrag.errors import ConfigError, IndexDirError
from simgrag.fileio import write_bytes_atomic
from simgrag.index.swap import MANIFEST

__all__ = ["ATTACHMENT_FILES", "AttachmentKind", "attach_file", "attached_path", "attachment_record",
           "check_attachments", "install_command", "put_attachment", "read_manifest_json", "section_problem",
           "stage_attachments", "store_section", "write_manifest"]

AttachmentKind = Literal["examples", "claim_examples", "relation_aliases", "validation"]
#: kind → the file's name inside the index directory
ATTACHMENT_FILES: dict[str, str] = {"examples": "examples.yaml", "claim_examples": "claim_examples.yaml",
                                    "relation_aliases": "relation_aliases.yaml", "validation": "validation.jsonl"}
#: files larger than this are not few-shot examples, aliases or validation questions
MAX_ATTACHMENT_BYTES = 16 * 1024 * 1024


def _kind_file(kind: str) -> str:
    if kind not in ATTACHMENT_FILES:
        raise ConfigError(f"unknown index attachment {kind!r}; known: {', '.join(ATTACHMENT_FILES)}")
    return ATTACHMENT_FILES[kind]


def _read_source(source: Path) -> bytes:
    try:
        size = source.stat().st_size
        if size > MAX_ATTACHMENT_BYTES:
            raise ConfigError(f"{source} holds {size:,} bytes; an examples, aliases or validation file is at "
                              f"most {MAX_ATTACHMENT_BYTES:,}")
        return source.read_bytes()
    except OSError as exc:
        raise ConfigError(f"Cannot read {source}: {exc}") from exc


def _record(kind: str, data: bytes, source: str, info: Mapping[str, Any] | None) -> dict[str, Any]:
    return {"file": _kind_file(kind), "sha256": hashlib.sha256(data).hexdigest(), "source": source,
            "bootstrapped": False, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **dict(info or {})}


def stage_attachments(work: Path, sources: Mapping[str, Path]) -> dict[str, dict[str, Any]]:
    """Copy each ``kind → file`` into a directory being built; the records for its manifest's ``attached``."""
    records: dict[str, dict[str, Any]] = {}
    for kind, source in sources.items():
        data = _read_source(Path(source))
        write_bytes_atomic(work / _kind_file(kind), data)
        records[kind] = _record(kind, data, str(source), None)
    return records


def attach_file(root: str | Path, kind: str, source: str | Path | bytes, *, source_name: str | None = None,
                info: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Copy ``source`` (a file, or the bytes of one) into the finished index directory ``root`` as its
    ``kind`` file and record it in the manifest (``attached`` and ``files``); returns the record.
    ``info`` adds fields to the record (``bootstrapped``, the bootstrap's settings …)."""
    root = Path(root)
    manifest = read_manifest_json(root)
    record = put_attachment(root, manifest, kind, source, source_name=source_name, info=info)
    write_manifest(root, manifest)
    return record


def put_attachment(root: Path, manifest: dict[str, Any], kind: str, source: str | Path | bytes, *,
                   source_name: str | None = None, info: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """:func:`attach_file` without writing the manifest: the file is written, ``manifest`` updated."""
    data = source if isinstance(source, bytes) else _read_source(Path(source))
    name = source_name or ("<bytes>" if isinstance(source, bytes) else str(source))
    record = _record(kind, data, name, info)
    write_bytes_atomic(Path(root) / record["file"], data)
    manifest.setdefault("attached", {})[kind] = record
    if isinstance(manifest.get("files"), dict):  # an index from before file hashes has no table to extend
        manifest["files"][record["file"]] = record["sha256"]
    return record


def write_manifest(root: Path, manifest: Mapping[str, Any]) -> None:
    """Write ``root/manifest.json`` atomically, as the build does."""
    write_bytes_atomic(root / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())


def store_section(root: str | Path, key: str, data: Mapping[str, Any] | None) -> None:
    """Set the manifest section ``key`` of the index directory ``root`` to ``data`` (``None`` removes it),
    atomically: what a fit stores with the index (the pattern stage, the answer mode, the thresholds)."""
    manifest = read_manifest_json(Path(root))
    if data is None:
        manifest.pop(key, None)
    else:
        manifest[key] = dict(data)
    write_manifest(Path(root), manifest)


def section_problem(manifest: Mapping[str, Any], key: str, problem: Callable[[Any], str | None]) -> str | None:
    """``"key: what is wrong"`` with the manifest section ``key`` as ``problem`` reads it; ``None`` when it is
    sound or absent."""
    if key not in manifest:
        return None
    found = problem(manifest[key])
    return None if found is None else f"{key}: {found}"


def read_manifest_json(root: str | Path) -> dict[str, Any]:
    """The manifest of the index directory ``root`` as it is on disk."""
    root = Path(root)
    try:
        manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise IndexDirError(f"{root} is not a readable simgrag index directory ({exc}); build it with "
                            f"simgrag index KG_FILE -o {root}") from exc
    if not isinstance(manifest, dict):
        raise IndexDirError(f"{root}/{MANIFEST} is corrupt; rebuild the index.")
    return manifest


def attachment_record(manifest: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """The manifest's record of its ``kind`` attachment, ``None`` when it has none; a malformed ``attached`` section
    (:func:`check_attachments`) is an :class:`~simgrag.errors.IndexDirError`."""
    problem = check_attachments(manifest)
    if problem is not None:
        raise IndexDirError(f"the index's {MANIFEST} is corrupt: {problem}; rebuild the index.")
    record: Mapping[str, Any] | None = (manifest.get("attached") or {}).get(kind)
    return record


def attached_path(root: Path, manifest: Mapping[str, Any], kind: str) -> Path | None:
    """The index's ``kind`` file when its manifest records one (checked against its sha256), else ``None``."""
    record = attachment_record(manifest, kind)
    if record is None:
        return None
    path = Path(root) / record["file"]
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise IndexDirError(f"{path} is recorded in the index's manifest but cannot be read ({exc}); attach "
                            f"it again: {install_command(root, kind)}") from exc
    if digest != record["sha256"]:
        raise IndexDirError(f"{path} was changed after it was attached (sha256 {digest[:12]}… instead of "
                            f"{record['sha256'][:12]}…). Attach the edited file so the index records it: "
                            f"{install_command(root, kind)}")
    return path


def install_command(root: str | Path, kind: str) -> str:
    """The command that attaches a ``kind`` file to the index ``root`` (for messages)."""
    commands = {"claim_examples": f"simgrag examples install {root} FILE --claims",
                "relation_aliases": f"simgrag aliases install {root} FILE", "validation": f"simgrag learn {root}"}
    return commands.get(kind, f"simgrag examples install {root} FILE")


def check_attachments(manifest: Mapping[str, Any]) -> str | None:
    """What is wrong with the manifest's ``attached`` section (``None``: nothing, or no section)."""
    attached = manifest.get("attached")
    if attached is None:
        return None
    if not isinstance(attached, dict):
        return "'attached' is not an object"
    for kind, record in attached.items():
        if kind not in ATTACHMENT_FILES:
            return f"'attached' names an unknown kind {kind!r}"
        if not isinstance(record, dict) or record.get("file") != ATTACHMENT_FILES[kind] or not isinstance(
                record.get("sha256"), str):
            return f"attached.{kind} is not a record with its file ({ATTACHMENT_FILES[kind]}) and sha256"
    return None
