"""Question → pattern graph (SimGRAG §4.1): examples file, prompt, parsing, validation, generation."""

from __future__ import annotations

from simgrag.pattern.examples import Example, ExampleSet, builtin_examples, load_examples, parse_examples
from simgrag.pattern.generate import PatternGenerator, PatternResult
from simgrag.pattern.graph import Pattern, PatternEdge, PatternNode, is_unknown, type_hint
from simgrag.pattern.parse import ParsedOutput, parse_pattern_text
from simgrag.pattern.prompt import PromptBuilder, pattern_json_schema
from simgrag.pattern.validate import validate_pattern, validate_triples

__all__ = [
    "Example",
    "ExampleSet",
    "ParsedOutput",
    "Pattern",
    "PatternEdge",
    "PatternGenerator",
    "PatternNode",
    "PatternResult",
    "PromptBuilder",
    "builtin_examples",
    "is_unknown",
    "load_examples",
    "parse_examples",
    "parse_pattern_text",
    "pattern_json_schema",
    "type_hint",
    "validate_pattern",
    "validate_triples",
]
