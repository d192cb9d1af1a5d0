"""Per-KG few-shot examples for the question → pattern prompt, in a YAML (or JSON) file.

The user writes one file for their KG::

    relations:            # optional: the KG's relation names (or "name: description"), shown to the LLM
      - directed by
      - written by
    instructions: |       # optional: extra notes appended to the prompt's rules
      Movies are the hub of this KG.
    examples:             # question → triples; the first ones are the prompt's static shots
      - question: who directed Titanic
        triples:
          - [Titanic, directed by, UNKNOWN director 1]
      - question: ...
        triples: [...]
        divided: [...]    # optional: the question's segments, one per triple (paper §4.1)

Order matters: the first ``n_static_shots`` examples form the fixed, cached part of the prompt; the
others are candidates for the dynamic shots chosen per question. Each example's triples are checked
with :meth:`Pattern.from_triples`; errors name the file and the example.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from simgrag.errors import ConfigError, PatternError
from simgrag.fileio import load_yaml
from simgrag.pattern.graph import Pattern

__all__ = ["Example", "ExampleSet", "builtin_examples", "load_examples", "parse_examples"]


@dataclass(frozen=True)
class Example:
    question: str
    triples: tuple[tuple[str, str, str], ...]
    divided: tuple[str, ...] | None = None

    def output(self, *, with_divided: bool = False) -> dict[str, Any]:
        """The JSON object this example teaches the LLM to write."""
        out: dict[str, Any] = {}
        if with_divided:
            out["divided"] = list(self.divided or (" ".join(t) for t in self.triples))
        out["triples"] = [list(t) for t in self.triples]
        return out

    def known_texts(self) -> list[str]:
        """Node texts that are not ``UNKNOWN …`` (the entities the question names)."""
        pattern = Pattern.from_triples(self.triples)
        return [n.text for n in pattern.nodes if not n.unknown]


@dataclass(frozen=True)
class ExampleSet:
    examples: tuple[Example, ...]
    relations: tuple[str, ...] = ()
    instructions: str | None = None
    source: str = "<memory>"
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.examples)


def load_examples(path: str | Path) -> ExampleSet:
    """Read an examples file (YAML or JSON); raises :class:`ConfigError` naming the file and example."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"Cannot read the examples file {path}: {exc}") from exc
    return parse_examples(text, source=str(path))


def builtin_examples(name: str = "metaqa") -> ExampleSet:
    """An examples file shipped with simgrag (``src/simgrag/data/examples/<name>.yaml``)."""
    ref = resources.files("simgrag").joinpath("data", "examples", f"{name}.yaml")
    if not ref.is_file():
        raise ConfigError(f"No built-in examples named {name!r}; pass the path of your own examples file")
    return parse_examples(ref.read_text(encoding="utf-8"), source=f"builtin:{name}")


def parse_examples(text: str, *, source: str = "<string>") -> ExampleSet:
    """Parse the contents of an examples file."""
    data = _load_document(text, source)
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the examples file must be a mapping with an 'examples:' list")
    unknown = set(data) - {"relations", "instructions", "examples", "name", "description"}
    if unknown:
        raise ConfigError(f"{source}: unknown top-level keys {sorted(unknown)}; "
                          "allowed: relations, instructions, examples (name, description)")
    raw_examples = data.get("examples")
    if not isinstance(raw_examples, list) or not raw_examples:
        raise ConfigError(f"{source}: 'examples:' must be a non-empty list of {{question, triples}}")
    examples = tuple(_parse_example(item, i, source) for i, item in enumerate(raw_examples))
    return ExampleSet(
        examples=examples,
        relations=_parse_relations(data.get("relations"), source),
        instructions=_parse_instructions(data.get("instructions"), source),
        source=source,
        extra={k: data[k] for k in ("name", "description") if k in data},
    )


def _load_document(text: str, source: str) -> Any:
    if source.endswith(".json"):
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{source}: not valid JSON: {exc}") from exc
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from exc


def _parse_relations(value: Any, source: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(r, (str, dict)) for r in value):
        raise ConfigError(f"{source}: 'relations:' must be a list of names or 'name: description' items")
    out: list[str] = []
    for item in value:
        if isinstance(item, dict):
            out.extend(f"{k}: {v}" for k, v in item.items())
        elif item.strip():
            out.append(item.strip())
    return tuple(out)


def _parse_instructions(value: Any, source: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{source}: 'instructions:' must be text")
    return value.strip() or None


def _parse_example(item: Any, i: int, source: str) -> Example:
    where = f"{source}: example {i + 1}"
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: expected a mapping with 'question' and 'triples', got {item!r}")
    question = item.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ConfigError(f"{where}: 'question' must be non-empty text")
    where = f"{where} ({question.strip()!r})"
    extra = set(item) - {"question", "triples", "divided"}
    if extra:
        raise ConfigError(f"{where}: unknown keys {sorted(extra)}; allowed: question, triples, divided")
    triples = item.get("triples")
    try:
        pattern = Pattern.from_triples(triples)  # type: ignore[arg-type]
    except PatternError as exc:
        raise ConfigError(f"{where}: bad triples: {exc}") from exc
    divided = item.get("divided")
    if divided is not None and not (isinstance(divided, list) and all(isinstance(s, str) for s in divided)):
        raise ConfigError(f"{where}: 'divided' must be a list of strings")
    return Example(
        question=" ".join(question.split()),
        triples=tuple(pattern.triples()),
        divided=tuple(divided) if divided is not None else None,
    )
