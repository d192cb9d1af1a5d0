"""Request and response bodies of the HTTP API (pydantic models; they also make the OpenAPI docs)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from simgrag.pattern.validate import MAX_TRIPLES

__all__ = [
    "AskRequest",
    "AskResponse",
    "ErrorResponse",
    "HealthResponse",
    "KGStatsResponse",
    "RetrieveRequest",
    "RetrieveResponse",
    "VerifyRequest",
    "VerifyResponse",
]

MAX_TEXT_CHARS = 2000


def _valid_unicode(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"invalid Unicode (a lone surrogate at character {exc.start})") from None
    return text


Text = Annotated[str, AfterValidator(_valid_unicode)]
Name = Annotated[Text, StringConstraints(min_length=1, max_length=300)]
PatternTriple = Annotated[list[Name], Field(min_length=3, max_length=3)]
K = Annotated[int, Field(ge=1, le=50, description="subgraphs to retrieve (top-k by GSD)")]
CallK = Annotated[int | None, Field(ge=1, le=50, description=(
    "subgraphs to retrieve (top-k by GSD), for retrievers that can change it per request (simgrag); "
    "default: the server's setting"))]
Stream = Annotated[bool, Field(description=(
    "true: answer with NDJSON, one JSON object a line: the stages as they happen ({\"event\": \"stage\", "
    "\"stage\", \"label\", \"elapsed_s\"}), then {\"event\": \"result\", \"result\": <the usual body>} "
    "or {\"event\": \"error\", \"status\", \"error\"}"))]
RetrieverName = Annotated[str | None, Field(max_length=40, description=(
    "retriever for this request (simgrag, kaping, pcst, triplets, paths, subgraphrag, gsr, none), one the "
    "server offers (see /v1/health); default: the server's"))]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RetrieveRequest(_Request):
    """A pattern graph: triples whose nodes are entity names or ``UNKNOWN <type> <n>``."""

    pattern: list[PatternTriple] = Field(min_length=1, max_length=MAX_TRIPLES, examples=[
        [["Inception", "directed by", "UNKNOWN director 1"]]])
    k: K = 3
    k_n: int | None = Field(None, ge=1, le=4096, description="candidates per pattern node")
    k_r: int | None = Field(None, ge=1, le=4096, description="candidates per pattern relation")


class AskRequest(_Request):
    question: Text = Field(min_length=1, max_length=MAX_TEXT_CHARS, examples=["Who directed Inception?"])
    k: CallK = None
    retriever: RetrieverName = None
    stream: Stream = False


class VerifyRequest(_Request):
    claim: Text = Field(min_length=1, max_length=MAX_TEXT_CHARS,
                       examples=["Inception was directed by Christopher Nolan."])
    k: CallK = None
    retriever: RetrieverName = None
    stream: Stream = False


class NodeOut(BaseModel):
    pattern_node: str
    entity: str
    entity_id: int
    distance: float
    unknown: bool
    iri: str | None = Field(None, description="the entity's IRI (KGs read from RDF or a SPARQL endpoint)")


class EdgeOut(BaseModel):
    pattern: list[str] = Field(description="the pattern triple")
    triple: list[str] = Field(description="the KG triple it matched, in the KG's orientation")
    triple_id: int
    distance: float
    score: float | None = Field(None, description="a relevance score, when the evidence has one")
    iris: list[str | None] | None = Field(None, description="IRIs of head, relation and tail (RDF KGs)")


class MatchOut(BaseModel):
    rank: int
    gsd: float = Field(description="Graph Semantic Distance: sum of node and edge distances")
    nodes: list[NodeOut]
    edges: list[EdgeOut]


class AnswerOut(BaseModel):
    entity: str
    entity_id: int
    gsd: float = Field(description="GSD of the best match binding this answer")
    matches: int = Field(description="matches of the answer set binding it")
    group: int = Field(description="index of its best match's path shape in groups")
    iri: str | None = None
    triples: list[list[str]] = Field(description="its best match's KG triples (the witness)")


class AnswerGroupOut(BaseModel):
    relations: list[str] = Field(description="per pattern edge, the KG relation of this path shape")
    gsd: float
    matches: int
    triples: list[list[str]] = Field(description="the shape as pattern triples in the KG's orientation")
    nodes: dict[str, list[str]] = Field(description="per pattern node, the entities bound in this shape")
    line: str = Field(description="the shape in one line, several entities of a node as {a; b; …}")


class AnswerSetOut(BaseModel):
    """Every entity bound to the asked-for node in a match within ``tolerance`` of the best GSD."""

    asked_node: str
    tolerance: float
    best_gsd: float
    size: int
    matches: int
    complete: bool = Field(description="false when the search stopped at its deadline or the cap was reached")
    capped: bool = Field(description="more matches exist than the cap: the answers of those kept are listed")
    turned_out: int = Field(0, description="matches as good as the best left out for turning more pattern edges "
                                           "round than others (the KG triple runs against the pattern's edge)")
    names: list[str] = Field(description="every answer, best GSD first")
    answers: list[AnswerOut] = Field(description="the first answers with their witness triples")
    groups: list[AnswerGroupOut] = Field(description="one per distinct path shape, best first")


class RetrieveResponse(BaseModel):
    pattern: list[list[str]]
    complete: bool = Field(description="false when the search stopped at its deadline (best so far)")
    deadline_s: float | None = Field(None, description="the search's deadline in seconds (none: no deadline)")
    lower_bound: float | None
    algorithm: str
    combination: str
    timings: dict[str, float]
    candidate_counts: dict[str, int]
    steps: int
    matches: list[MatchOut]
    answer_set: AnswerSetOut | None = Field(None, description="every answer as good as the best match")


class _Generated(BaseModel):
    """What every retriever's answer or verdict carries: the pattern (``[]`` for a retriever that writes
    none), the matched subgraphs as ``evidence`` (``null`` for a retriever that returns none) and the
    retrieved ``context`` (triples, paths, topic entities, scores)."""

    retriever: str = Field(description="the retriever that found the evidence")
    pattern: list[list[str]]
    pattern_attempts: int
    pattern_kg_repairs: list[str] = Field(default_factory=list,
                                          description="changes made to the LLM's pattern with the KG's help")
    timings: dict[str, float]
    text: str
    abstained: bool
    reason: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool
    llm_used: bool = Field(False, description="whether an LLM wrote the answer or verdict (false: read from the KG)")
    evidence: RetrieveResponse | None = Field(description="the matched subgraphs (pattern retrievers)")
    context: dict[str, Any] = Field(description="the retrieved context (RetrievedContext.to_dict)")


class SubstitutionOut(BaseModel):
    pattern_node: str = Field(description="the name the pattern (the question) asked for")
    entity: str = Field(description="the KG entity it was bound to instead")
    distance: float
    text: str = Field(description="e.g. \"nearest match for 'Doom': Doomsday\"")
    kg_has_name: bool = Field(False, description=(
        "the KG has an entity of that name, but no match of the question's pattern goes through it"))
    why: str = Field("", description="e.g. \"the KG has no entity named 'Doom'\"")


class AskResponse(_Generated):
    question: str
    entities: list[str]
    substitutions: list[SubstitutionOut] = Field(default_factory=list, description=(
        "named pattern nodes bound to an entity of another name (the nearest the KG has)"))
    evidence_features: dict[str, float] | None = Field(None, description=(
        "what the abstention rule read: named / relation / relation_excess distances, gsd, answers, missing "
        "(asked relations the named entity lacks), unworded (pattern triples the question has no words for)"))
    candidates: list[str]
    short_answer: str | None
    asked_node: str | None
    style: str = Field(description="the prompt the context was read with")
    reason_details: str | None = Field(None, description="the numbers behind ``reason`` (thresholds, distances)")
    exact_match: bool = Field(False, description=(
        "the KG holds the pattern exactly *and* the pattern reads the whole question"))
    pattern_reading: dict[str, Any] | None = Field(None, description=(
        "how much of the question the pattern reads: whole, unread_words, relation_words, missing_hops, "
        "uncertainty (plain words)"))


class VerifyResponse(_Generated):
    claim: str
    label: str
    label_binary: str | None
    evidence_items: int = Field(description="graphs, paths or triples shown to the LLM")
    contradictions: list[dict[str, Any]] = Field(default_factory=list, description=(
        "KG facts that contradict the claim: the claim's triple and the triple the KG holds instead"))


class HealthResponse(BaseModel):
    status: Literal["loading", "ready", "failed"]
    ready: bool
    index: str
    llm: str | None
    llm_status: Literal["pending", "loading", "ready", "failed"] = Field(
        "ready", description="an in-process LLM loads after the server is ready: a request that needs it "
                             "meanwhile waits for the load ('pending': not started yet)")
    error: str | None = None
    uptime_s: float
    llm_queue: dict[str, int]
    retrievals: dict[str, int] = Field(default_factory=dict, description="the retrieval workers: running, "
                                                                          "waiting, limits, rejected, timed out")
    retriever: str = Field("", description="the default retriever of /v1/ask and /v1/verify")
    retrievers: list[str] = Field(default_factory=list, description="retrievers a request may name")
    per_request: dict[str, list[str]] = Field(default_factory=dict, description=(
        "per retriever, the settings a request may change (k)"))


class KGStatsResponse(BaseModel):
    entities: int
    relations: int
    triples: int
    relation_counts: dict[str, int]
    index_kind: str
    embedder: str
    dim: int


class ErrorResponse(BaseModel):
    error: str
    detail: str
