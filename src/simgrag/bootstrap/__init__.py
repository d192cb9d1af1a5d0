"""Few-shot examples and relation aliases for a KG that has none, written by the LLM and checked by the KG.

- :func:`bootstrap_examples` (:mod:`~simgrag.bootstrap.examples`): sampled subgraphs → natural
  questions → kept when the engine's own pattern for the question finds the subgraph's answer → an
  editable examples YAML;
- :func:`bootstrap_aliases` (:mod:`~simgrag.bootstrap.aliases`): LLM paraphrases of each relation, kept
  when they embed near it and farther from the others → an editable aliases YAML;
- :func:`install_examples`, :func:`install_aliases` (:mod:`~simgrag.bootstrap.install`): attach a file to
  an index, so ``ask``/``serve``/``bench`` on it use it by default.

Command line: ``simgrag examples bootstrap|install``, ``simgrag aliases bootstrap|install``,
``simgrag index … --bootstrap-aliases --bootstrap-examples``.
"""

from __future__ import annotations

from simgrag.bootstrap.aliases import AliasesReport, AliasesSettings, bootstrap_aliases
from simgrag.bootstrap.examples import ExamplesReport, ExamplesSettings, bootstrap_examples
from simgrag.bootstrap.install import install_aliases, install_examples
from simgrag.bootstrap.sample import SHAPES, Sample, sample_subgraphs

__all__ = ["SHAPES", "AliasesReport", "AliasesSettings", "ExamplesReport", "ExamplesSettings", "Sample",
           "bootstrap_aliases", "bootstrap_examples", "install_aliases", "install_examples", "sample_subgraphs"]
