"""Issue 42 part 5: messages a person can act on — CLI flags, not Python keywords; a missing path "does
not exist"; empty input refused before anything loads; quiet logging by default."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simgrag.cli import app
from simgrag.errors import KGFormatError, SimGRAGError
from simgrag.kg.loader import load_kg

runner = CliRunner()


def test_bad_lines_hint_is_a_flag_on_the_cli_and_a_keyword_in_python(tmp_path: Path) -> None:
    kg = tmp_path / "bad.txt"
    kg.write_text("a|r|b\nbroken line\nc|r|d\n", encoding="utf-8")
    with pytest.raises(KGFormatError, match="skip_bad_lines=True") as caught:
        load_kg(kg)
    assert "--skip-bad-lines" in caught.value.for_cli() and "skip_bad_lines=True" not in caught.value.for_cli()
    out = runner.invoke(app, ["index", str(kg), "-o", str(tmp_path / "bad.idx"), "--no-learn", "-q"])
    assert out.exit_code == 2 and "--skip-bad-lines" in out.output and "skip_bad_lines=True" not in out.output


def test_missing_examples_hint_names_the_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from simgrag.index.directory import build_index_dir
    from simgrag.testing import FakeLLM, HashEmbedder

    kg = tmp_path / "team.txt"
    kg.write_text("Ada|leads|Platform\nBob|member_of|Platform\n", encoding="utf-8")
    build_index_dir(kg, tmp_path / "team.idx", embedder=HashEmbedder(dim=32))
    monkeypatch.setattr("simgrag.cli._common.llm_for", lambda choice: FakeLLM([]))
    out = runner.invoke(app, ["ask", str(tmp_path / "team.idx"), "Who leads Platform?", "--no-learn"])
    assert out.exit_code == 2, out.output
    assert "--examples FILE" in out.output and "examples=" not in out.output


def test_existing_index_overwrite_hint_is_a_flag(tmp_path: Path) -> None:
    kg = tmp_path / "kg.txt"
    kg.write_text("a|r|b\n", encoding="utf-8")
    (tmp_path / "kg.idx").mkdir()
    out = runner.invoke(app, ["index", str(kg), "-o", str(tmp_path / "kg.idx"), "--no-learn", "-q",
                              "--embedder", "hash"])
    assert out.exit_code == 2 and "--overwrite" in out.output and "overwrite=True" not in out.output


def test_a_mistyped_index_path_does_not_exist(tmp_path: Path) -> None:
    out = runner.invoke(app, ["ask", str(tmp_path / "no-such.idx"), "Who directed Heat?", "--llm", "none"])
    assert out.exit_code == 2 and "does not exist" in out.output and "manifest.json" not in out.output


@pytest.mark.parametrize("command", ["ask", "verify"])
def test_empty_input_is_refused_before_anything_loads(command: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def no_engine(*args: object, **kwargs: object) -> None:
        raise AssertionError("an engine was built for an empty input")

    monkeypatch.setattr("simgrag.cli.qa.make_engine", no_engine)
    out = runner.invoke(app, [command, str(tmp_path / "no-such.idx"), "   "])
    assert out.exit_code == 2 and "is empty" in out.output


def test_error_without_options_reads_the_same() -> None:
    assert SimGRAGError("plain").for_cli() == "plain"


_LOGGING = """
import logging, sys
from simgrag.cli._common import _setup_logging
from simgrag.progress import progress_on
_setup_logging(int(sys.argv[1]), sys.argv[2] == "q")
log = logging.getLogger("simgrag.test")
log.debug("a debug line"); log.info("an info line"); log.warning("a warning line")
print("bars" if progress_on() else "no bars")
"""


@pytest.mark.parametrize(("verbose", "quiet", "shown", "bars"), [
    (0, "", {"a warning line"}, True),
    (1, "", {"an info line", "a warning line"}, True),
    (2, "", {"a debug line", "an info line", "a warning line"}, True),
    (0, "q", {"a warning line"}, False),
])
def test_cli_logging_is_quiet_by_default(verbose: int, quiet: str, shown: set[str], bars: bool) -> None:
    done = subprocess.run([sys.executable, "-c", _LOGGING, str(verbose), quiet or "-"], capture_output=True,
                          text=True, check=True)
    lines = {"a debug line", "an info line", "a warning line"}
    assert {line for line in lines if line in done.stderr} == shown
    assert done.stdout.strip() == ("bars" if bars else "no bars")


def test_models_pull_warms_the_prompts_and_compiles_the_search_unless_told_not_to(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import simgrag.embed.bundled
    import simgrag.index.lexical
    import simgrag.llm.models
    import simgrag.pipeline
    import simgrag.serve.warm

    class Engine:  # what pull asks of the engine: its prompts warmed, then the search compiled (no LLM load)
        def __init__(self, index: Path, llm: str) -> None:
            self.made = (index, llm)
            self.searched: list[bool] = []

        def warmup(self, *, load_llm: bool = True) -> dict[str, float]:
            self.searched.append(load_llm)
            return {"search_s": 2.0}

    warmed: list[Engine] = []
    monkeypatch.setattr(simgrag.embed.bundled, "bundled_model_dir", lambda cache_dir=None: tmp_path / "minilm")
    monkeypatch.setattr(simgrag.llm.models, "pull_default_model", lambda cache_dir=None: tmp_path / "qwen.gguf")
    monkeypatch.setattr(simgrag.pipeline, "sample_index", lambda: tmp_path / "sample.idx")
    monkeypatch.setattr(simgrag.pipeline, "SimGRAG", Engine)
    monkeypatch.setattr(simgrag.serve.warm, "warm_prompts", lambda engine: warmed.append(engine) or {"pattern": 1.5})
    names: list[int] = []  # the name look-up's kernels (KGs above 100,000 entities) are compiled too
    monkeypatch.setattr(simgrag.index.lexical, "compile_kernels", lambda: names.append(1))
    result = CliRunner().invoke(app, ["models", "pull"])
    assert result.exit_code == 0, result.output
    assert "prompt prefixes warmed: pattern 1.5 s; graph search compiled: 2.0 s" in result.output
    assert [e.made for e in warmed] == [(tmp_path / "sample.idx", "llamacpp")] and warmed[0].searched == [False]
    assert names == [1]
    assert CliRunner().invoke(app, ["models", "pull", "--no-warm"]).exit_code == 0 and len(warmed) == 1
    assert names == [1]
