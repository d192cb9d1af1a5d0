"""The ``simgrag`` command line. Thin: parse options, call the library, print.

    simgrag index KG_FILE -o INDEX_DIR          build an index directory (--bootstrap-examples/-aliases)
    simgrag examples bootstrap INDEX_DIR -o F   an editable examples file for the index's KG (--install)
    simgrag examples install INDEX_DIR FILE     attach an examples file: the index's default
    simgrag aliases bootstrap|install …         the same for relation aliases
    simgrag check INDEX_DIR                     verify an index (structure, content hashes)
    simgrag update INDEX_DIR --add F --remove F add/remove triples without a rebuild (atomic)
    simgrag retrieve INDEX_DIR --pattern JSON   top-k subgraphs for a pattern
    simgrag ask INDEX_DIR "question"            answer from the KG (see `simgrag ask --help`)
    simgrag verify INDEX_DIR "claim"            Supported / Refuted with evidence
    simgrag bench factscore --metaqa-dir DIR …  open answers scored claim by claim against the KG
    simgrag serve [INDEX_DIR]                   HTTP API + evidence web page (+ OpenAI-compatible chat)
    simgrag mcp [INDEX_DIR]                     MCP server (stdio or streamable HTTP) for AI assistants
    simgrag perturb KG_FILE --method rs -o OUT  a perturbed copy of a KG (robustness lab)
    simgrag ls                                  registered embedders, indexes, LLMs
    simgrag models pull                         assemble the embedded LLM offline
"""

from __future__ import annotations

from simgrag.cli import (  # noqa: F401  (each registers its commands on ``app``)
    bench,
    bootstrap,
    check,
    kg,
    mcp_cmd,
    qa,
    update_cmd,
)
from simgrag.cli._common import app
from simgrag.cli.kg import _index_params, format_retrieval
from simgrag.cli.qa import format_answer, format_context

__all__ = ["_index_params", "app", "format_answer", "format_context", "format_retrieval", "main"]


def main() -> None:
    app()


if __name__ == "__main__":
    main()
