"""An OpenAI-compatible chat front-end: ``POST /v1/chat/completions`` (plain and streaming) and
``GET /v1/models``, so chat UIs and OpenAI clients can talk to the KG.

The last ``user`` message is the question (model ``simgrag``) or the claim to check (model
``simgrag-verify``); earlier turns are not used. The reply's ``content`` is the answer followed by a
compact evidence block (the retrieved triples with their IRIs; ``"evidence": false`` in the request
leaves it out), and the full result — pattern, every subgraph with distances, timings — rides along
as the extra top-level field ``simgrag`` (on the last chunk when streaming)::

    client = OpenAI(base_url="http://127.0.0.1:8000/v1", api_key=KEY)
    reply = client.chat.completions.create(model="simgrag", messages=[{"role": "user", "content": "…"}])
    reply.choices[0].message.content, reply.model_extra["simgrag"]["evidence"]

The answer is computed before the first byte is sent (through the server's LLM queue, deadline and
API key like /v1/ask), so errors keep their HTTP status; a streamed reply then comes as server-sent
events: the role, the content line by line, a final chunk with ``finish_reason`` and ``simgrag``,
and ``data: [DONE]``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, params
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from simgrag.errors import SimGRAGError
from simgrag.pipeline import SimGRAG
from simgrag.retrievers.base import AdjustableRetriever
from simgrag.serve.evidence_text import reply_text
from simgrag.serve.schemas import MAX_TEXT_CHARS, ErrorResponse

__all__ = ["MODELS", "ChatRequest", "chat_router"]

MODELS = {"simgrag": "answer the last user message from the KG",
          "simgrag-verify": "check the last user message as a claim against the KG"}
RunLLM = Callable[[Callable[[], Any]], Awaitable[Any]]
ErrorMapper = Callable[[Exception], JSONResponse]


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str = Field(max_length=40)
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        parts = self.content or []
        return "\n".join(str(p.get("text", "")) for p in parts if p.get("type") in ("text", "input_text"))


class ChatRequest(BaseModel):
    """The OpenAI chat request; sampling options (temperature, max_tokens, …) are accepted and unused."""

    model_config = ConfigDict(extra="allow")

    model: str = "simgrag"
    messages: list[ChatMessageIn] = Field(min_length=1, max_length=200)
    stream: bool = False
    evidence: bool = Field(True, description="append the evidence block to the reply text")
    k: Annotated[int, Field(ge=1, le=50)] = 3


def _bad_request(detail: str, status: int = 400, code: str = "bad_request") -> JSONResponse:
    return _openai_error(JSONResponse(ErrorResponse(error=code, detail=detail).model_dump(), status_code=status))


def _openai_error(response: JSONResponse) -> JSONResponse:
    """The server's error body in OpenAI's shape (``{"error": {"message", "type", "code"}}``), so chat
    clients show the message; ``detail`` stays for simgrag's own clients."""
    body = json.loads(bytes(response.body))
    code, detail = str(body.get("error", "error")), str(body.get("detail", ""))
    headers = {k: v for k, v in response.headers.items() if k.lower() == "retry-after"}
    return JSONResponse({"error": {"message": detail, "type": code, "code": code}, "detail": detail},
                        status_code=response.status_code, headers=headers)


def _question(body: ChatRequest) -> str | JSONResponse:
    if body.model not in MODELS:
        return _bad_request(f"unknown model {body.model!r}; this server offers {', '.join(MODELS)}", 404,
                            "model_not_found")
    user = [m for m in body.messages if m.role == "user"]
    text = user[-1].text().strip() if user else ""
    if not text:
        return _bad_request("no user message with text to answer")
    if len(text) > MAX_TEXT_CHARS:
        return _bad_request(f"the last user message is over {MAX_TEXT_CHARS} characters")
    return text


def _completion(completion_id: str, model: str, content: str, result: dict[str, Any]) -> dict[str, Any]:
    return {"id": completion_id, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": _usage(result), "simgrag": result}


def _usage(result: dict[str, Any]) -> dict[str, int]:
    prompt, completion = int(result.get("prompt_tokens") or 0), int(result.get("completion_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _chunks(completion_id: str, model: str, content: str, result: dict[str, Any]) -> Iterator[str]:
    base = {"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()), "model": model}

    def event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        body = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

    yield event({"role": "assistant", "content": ""})
    for line in content.splitlines(keepends=True):
        yield event({"content": line})
    yield event({}, "stop", usage=_usage(result), simgrag=result)
    yield "data: [DONE]\n\n"


def chat_router(require_engine: Callable[[], SimGRAG], run_llm: RunLLM, error_response: ErrorMapper, *,
                dependencies: Sequence[params.Depends] = (), timeout_s: float = 120.0) -> APIRouter:
    """The chat routes over the server's engine; ``run_llm`` queues LLM-bound work (the LLM queue),
    ``error_response`` maps an error to the server's status and body (re-shaped the OpenAI way)."""
    router = APIRouter(dependencies=list(dependencies), tags=["OpenAI-compatible chat"])

    @router.get("/v1/models")
    async def models() -> dict[str, Any]:
        """The models a chat client may name: ``simgrag`` (questions) and ``simgrag-verify`` (claims)."""
        return {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "simgrag",
                                            "description": text} for name, text in MODELS.items()]}

    @router.post("/v1/chat/completions", response_model=None)
    async def chat_completions(body: ChatRequest) -> JSONResponse | StreamingResponse:
        """Answer (or verify) the last user message from the KG, evidence attached."""
        text = _question(body)
        if isinstance(text, JSONResponse):
            return text
        verify = body.model == "simgrag-verify"
        try:
            engine = require_engine()
            k = body.k if isinstance(engine.retriever, AdjustableRetriever) else None

            def work() -> dict[str, Any]:
                run = engine.verify if verify else engine.ask
                return run(text, k=k, deadline_s=timeout_s).to_dict()

            result = await run_llm(work)
        except SimGRAGError as exc:
            return _openai_error(error_response(exc))
        content = reply_text(result, verify=verify, with_evidence=body.evidence)
        completion_id = "chatcmpl-" + uuid.uuid4().hex[:24]
        if body.stream:
            return StreamingResponse(_chunks(completion_id, body.model, content, result),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        return JSONResponse(_completion(completion_id, body.model, content, result))

    return router
