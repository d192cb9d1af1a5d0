"""One JSON POST for the HTTP embedders, with every failure turned into a helpful EmbedderError."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from simgrag.errors import EmbedderError

__all__ = ["make_client", "post_json"]


def make_client(
    timeout: float, headers: Mapping[str, str] | None = None, transport: httpx.BaseTransport | None = None
) -> httpx.Client:
    """An ``httpx.Client`` with a short connect timeout and ``timeout`` for the rest."""
    return httpx.Client(
        timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
        headers=dict(headers or {}),
        transport=transport,
    )


def post_json(
    client: httpx.Client,
    url: str,
    payload: Mapping[str, Any],
    *,
    service: str,
    unreachable_hint: str,
    status_hints: Mapping[int, str] | None = None,
) -> Any:
    """POST ``payload`` as JSON and return the decoded JSON answer."""
    try:
        response = client.post(url, json=dict(payload))
    except httpx.TimeoutException as exc:
        raise EmbedderError(
            f"{service} at {url} did not answer in time ({type(exc).__name__}); "
            "pass a larger timeout= or a smaller batch_size."
        ) from exc
    except (httpx.ConnectError, httpx.RemoteProtocolError) as exc:
        raise EmbedderError(f"Cannot reach {service} at {url} ({exc}). {unreachable_hint}") from exc
    except httpx.HTTPError as exc:
        raise EmbedderError(f"Request to {service} at {url} failed: {exc}") from exc
    if response.status_code >= 400:
        hint = (status_hints or {}).get(response.status_code, "")
        body = response.text.strip()
        body = body if len(body) <= 300 else body[:300] + "…"
        raise EmbedderError(f"{service} answered HTTP {response.status_code} at {url}: {body} {hint}".strip())
    try:
        return response.json()
    except ValueError as exc:
        raise EmbedderError(f"{service} at {url} sent a non-JSON answer: {response.text[:200]!r}") from exc
