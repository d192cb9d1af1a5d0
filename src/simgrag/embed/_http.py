"""What the HTTP embedders share: one JSON POST per batch, every failure turned into a helpful
EmbedderError, and the client's life cycle (:class:`HTTPEmbedder`)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import Any

import httpx
import numpy as np

from simgrag.embed.batched import BatchedEmbedder
from simgrag.errors import EmbedderError

__all__ = ["HTTPEmbedder", "make_client", "post_json"]


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


class HTTPEmbedder(BatchedEmbedder):
    """An embedding model behind an HTTP server: each batch is one POST of :meth:`_payload` to
    :meth:`_url`; the answer's ``rows_key`` list (one item per text) is read by :meth:`_vectors`; an
    unknown width is probed with one text. Subclasses set ``model`` and ``base_url``, and for error
    messages ``service``, ``unreachable_hint``, ``no_rows`` (formatted with ``expected`` and ``got``)
    and ``bad_rows`` (formatted with ``exc``)."""

    model: str
    base_url: str
    service: str
    unreachable_hint: str
    rows_key: str
    no_rows: str
    bad_rows: str

    def _open(self, timeout: float, headers: Mapping[str, str] | None, transport: httpx.BaseTransport | None) -> None:
        self._client = make_client(timeout, headers=headers, transport=transport)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, base_url={self.base_url!r})"

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        answer = post_json(self._client, self._url(), self._payload(texts), service=self.service,
                           unreachable_hint=self.unreachable_hint, status_hints=self._status_hints())
        rows = answer.get(self.rows_key) if isinstance(answer, dict) else None
        if not isinstance(rows, list) or len(rows) != len(texts):
            raise EmbedderError(self.no_rows.format(expected=len(texts), got=repr(str(answer)[:200])))
        try:
            return self._vectors(rows)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise EmbedderError(self.bad_rows.format(exc=exc)) from exc

    def _detect_dim(self) -> int:
        return int(self._encode_batch(["dimension probe"]).shape[1])

    def close(self) -> None:
        self._client.close()

    @abstractmethod
    def _url(self) -> str:
        """Where a batch is posted."""

    @abstractmethod
    def _payload(self, texts: list[str]) -> dict[str, Any]:
        """The request body for ``texts``."""

    @abstractmethod
    def _status_hints(self) -> Mapping[int, str]:
        """What to do about an HTTP error status, by status."""

    @abstractmethod
    def _vectors(self, rows: list[Any]) -> np.ndarray:
        """The ``(len(rows), dim)`` float32 vectors of the answer's rows."""
