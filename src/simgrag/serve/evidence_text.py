"""Answers and their evidence as short plain text, for front-ends that show text only (chat UIs,
MCP hosts). Works on the JSON views (``AskResult.to_dict()``, ``VerifyResult.to_dict()``,
``Retrieval.to_dict()``), so it holds no logic of the pipeline::

    Christopher Nolan

    Evidence from the knowledge graph:
    1. (Inception, directed_by, Christopher Nolan)  GSD 0.000
       <http://example.org/Inception> <http://example.org/directed_by> <http://example.org/Nolan>
"""

from __future__ import annotations

from typing import Any

__all__ = ["answer_line", "evidence_block", "reply_text"]

NOT_FOUND = "Not found in the knowledge graph."


def answer_line(result: dict[str, Any], *, verify: bool = False) -> str:
    """The answer (or verdict) in one line."""
    if verify:
        reason = str(result.get("reason") or "").strip()
        return f"{result.get('label', '?')}" + (f": {reason}" if reason and not result.get("abstained") else "")
    said = "".join(f"{sub['text']}. " for sub in result.get("substitutions") or [] if sub.get("text"))
    if result.get("abstained"):
        return NOT_FOUND + (f" ({said.strip()})" if said else "")
    entities = [str(e) for e in result.get("entities") or []]
    if entities:
        return said + ", ".join(entities)
    return said + str(result.get("short_answer") or result.get("text") or NOT_FOUND).strip()


def evidence_block(evidence: dict[str, Any], *, max_triples: int = 12, iris: bool = True) -> str:
    """The retrieved triples, best subgraph first, each once; their IRIs below them when known."""
    lines: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for match in evidence.get("matches") or []:
        for edge in match.get("edges") or []:
            triple = tuple(str(x) for x in edge.get("triple") or ())
            if triple in seen or len(seen) >= max_triples:
                continue
            seen.add(triple)
            gsd = match.get("gsd")
            score = f"  GSD {float(gsd):.3f}" if isinstance(gsd, (int, float)) else ""
            lines.append(f"{len(seen)}. ({', '.join(triple)}){score}")
            known = [i for i in edge.get("iris") or [] if i]
            if iris and known:
                lines.append("   " + " ".join(f"<{i}>" for i in known))
    if not lines:
        return "No matching evidence in the knowledge graph."
    return "Evidence from the knowledge graph:\n" + "\n".join(lines)


def reply_text(result: dict[str, Any], *, verify: bool = False, with_evidence: bool = True) -> str:
    """The answer line, then (optionally) the evidence block."""
    head = answer_line(result, verify=verify)
    if not with_evidence:
        return head
    return f"{head}\n\n{evidence_block(result.get('evidence') or {})}"
