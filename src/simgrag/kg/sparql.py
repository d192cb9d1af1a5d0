"""A SPARQL endpoint as a KG source: the triples paged out with bounded, resumable queries.

Every page is one ``CONSTRUCT`` query with ``LIMIT page_size OFFSET n``, POSTed as a form (SPARQL 1.1
Protocol) and answered as N-Triples (or any RDF syntax the endpoint prefers, by its Content-Type)::

    CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o } LIMIT 10000 OFFSET 20000
    CONSTRUCT { ?s ?p ?o } WHERE { GRAPH <g> { ?s ?p ?o } } LIMIT …              (graph=)
    CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o } ORDER BY ?s ?p ?o LIMIT …          (order=True)
    <your CONSTRUCT query> LIMIT 10000 OFFSET 20000                              (construct=)

The pages partition the triples when the endpoint scans an unchanged store in a stable order, as
triple stores do (Oxigraph walks its index); ``order=True`` adds ``ORDER BY`` for an endpoint that
does not, at a price (Oxigraph sorts the whole store for every page: ~20–30× slower on MetaQA, see
BENCHMARKS.md §8). The number of triples (``COUNT(*)``) is asked first: the progress bar's total, a
check that the pages added up to it (a warning otherwise), and the guard of resuming — saved pages are
reused only while the endpoint still counts the same. The paging ends at the first empty page.

Each page is written to a checkpoint directory as it arrives (atomically, with a ``state.json``
naming the endpoint, query and page size). A failed request is retried with exponential backoff
(connection errors, timeouts, HTTP 429/5xx); when the retries run out the load fails with
:class:`~simgrag.errors.KGError`, no store is built and no index written (an existing index at the
output stays as it was), and the same command later resumes after the last saved page. The pages
are parsed by pyoxigraph into the same :class:`~simgrag.kg.rdf.RDFCollector` as RDF files (labels,
types, literals, IRIs alike). Blank nodes are joined across pages by the label the endpoint gives
them (Oxigraph's are stable; an endpoint that relabels them per response splits them).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from tqdm.auto import tqdm

from simgrag.config import cache_dir
from simgrag.errors import ConfigError, EmptyKGError, KGError, KGFormatError
from simgrag.fileio import write_bytes_atomic
from simgrag.kg.rdf import RDF_FORMATS, RDFCollector, RDFOptions, _pyoxigraph
from simgrag.kg.store import KGStore

if TYPE_CHECKING:
    from simgrag.kg.loader import LoadReport

__all__ = ["SparqlSource"]

logger = logging.getLogger(__name__)

_RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_ACCEPT = "application/n-triples, text/turtle;q=0.9, application/rdf+xml;q=0.5"
_EXT = {media: name for name, media in RDF_FORMATS.items()} | {"text/plain": "ntriples"}
_SOLUTION_MODIFIER = re.compile(r"\b(LIMIT|OFFSET)\b", re.I)


def _without_userinfo(url: str) -> str:
    """``url`` without ``user:password@`` (descriptions go into logs and manifests)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


@dataclass
class _Checkpoint:
    """Pages saved so far in ``directory`` for one fingerprint (endpoint, query, page size)."""

    directory: Path
    fingerprint: dict[str, Any]
    count: int | None = None
    pages: list[str] = field(default_factory=list)
    triples: int = 0
    complete: bool = False

    @classmethod
    def open(cls, directory: Path, fingerprint: dict[str, Any], count: int | None) -> _Checkpoint:
        state_file = directory / "state.json"
        if state_file.is_file():
            try:
                state = json.loads(state_file.read_text(encoding="utf-8"))
            except ValueError:
                state = {}
            same_query = state.get("fingerprint") == fingerprint and all(
                (directory / p).is_file() for p in state.get("pages", []))
            same_data = count is None or state.get("count") in (None, count)
            if same_query and same_data:
                return cls(directory, fingerprint, count, list(state["pages"]), int(state["triples"]),
                           bool(state["complete"]))
            logger.info("%s holds pages of %s; starting over", directory,
                        "another query" if not same_query else
                        f"{state.get('count')} triples, the endpoint now counts {count}")
        if directory.exists():
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        checkpoint = cls(directory, fingerprint, count)
        checkpoint._write_state()
        return checkpoint

    def _write_state(self) -> None:
        state = {"fingerprint": self.fingerprint, "count": self.count, "pages": self.pages, "triples": self.triples,
                 "complete": self.complete}
        write_bytes_atomic(self.directory / "state.json", json.dumps(state, indent=1).encode())

    def add(self, body: bytes, fmt: str, triples: int) -> None:
        name = f"page-{len(self.pages):06d}.{fmt}"
        write_bytes_atomic(self.directory / name, body)
        self.pages.append(name)
        self.triples += triples
        self._write_state()

    def finish(self) -> None:
        self.complete = True
        self._write_state()


@dataclass
class SparqlSource:
    """The triples of a SPARQL endpoint (see the module docstring).

    ``graph``: only this named graph; ``construct``: your own ``CONSTRUCT`` query (a filter or a
    mapping; without LIMIT/OFFSET, which paging adds; put an ORDER BY in it if the endpoint's scan
    order is not stable); ``page_size``: solutions per request; ``order``: add ``ORDER BY ?s ?p ?o``;
    ``retries``/``backoff_s``: attempts after a failed request, waiting ``backoff_s·2^i`` (at most
    30 s) in between; ``timeout_s``: per request; ``checkpoint_dir``: where pages are kept until the
    index is built (default: under the simgrag cache, by fingerprint); ``headers``: sent with every
    request (e.g. ``Authorization``); ``rdf``: how statements become the KG (labels, literals);
    ``on_page(page, triples)``: called after each page is saved (page numbers from 0).
    """

    endpoint: str
    graph: str | None = None
    construct: str | None = None
    page_size: int = 10_000
    order: bool = False
    retries: int = 5
    backoff_s: float = 1.0
    timeout_s: float = 120.0
    checkpoint_dir: Path | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    rdf: RDFOptions = field(default_factory=RDFOptions)
    on_page: Callable[[int, int], None] | None = field(default=None, repr=False)
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    def __post_init__(self) -> None:
        if self.page_size < 1 or self.retries < 0 or self.backoff_s < 0 or self.timeout_s <= 0:
            raise ConfigError("page_size must be ≥ 1, retries and backoff_s ≥ 0, timeout_s > 0")
        if self.graph is not None and self.construct is not None:
            raise ConfigError("give graph= or construct=, not both (put the GRAPH clause into your query)")
        if self.construct is not None:
            if not re.match(r"\s*(PREFIX\s+\S*\s*<[^>]*>\s*|BASE\s*<[^>]*>\s*)*CONSTRUCT\b", self.construct, re.I):
                raise ConfigError(f"construct= must be a SPARQL CONSTRUCT query, got {self.construct[:80]!r}")
            if _SOLUTION_MODIFIER.search(self.construct.rsplit("}", 1)[-1]):
                raise ConfigError("construct= must not end with LIMIT/OFFSET: the paging adds them")

    # ------------------------------------------------------------------ description
    @property
    def description(self) -> str:
        return "sparql+" + _without_userinfo(self.endpoint)

    def _where(self) -> str:
        return f"GRAPH <{self.graph}> {{ ?s ?p ?o }}" if self.graph else "?s ?p ?o"

    def page_query(self, page: int) -> str:
        """The query of page ``page`` (0-based)."""
        bound = f"LIMIT {self.page_size} OFFSET {page * self.page_size}"
        if self.construct is not None:
            return f"{self.construct.rstrip()}\n{bound}"
        order = " ORDER BY ?s ?p ?o" if self.order else ""
        return f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ {self._where()} }}{order} {bound}"

    def fingerprint(self) -> dict[str, Any]:
        return {"endpoint": self.endpoint, "query": self.page_query(0), "page_size": self.page_size}

    def _checkpoint_dir(self) -> Path:
        if self.checkpoint_dir is not None:
            return Path(self.checkpoint_dir)
        key = hashlib.sha256(json.dumps(self.fingerprint(), sort_keys=True).encode()).hexdigest()[:20]
        return cache_dir() / "sparql-pages" / key

    # ------------------------------------------------------------------ HTTP
    def _post(self, client: httpx.Client, query: str, accept: str, what: str) -> httpx.Response:
        """POST ``query``, retrying transient failures; raise KGError when they run out."""
        last = ""
        for attempt in range(self.retries + 1):
            try:
                response = client.post(self.endpoint, data={"query": query}, headers={"Accept": accept})
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code == 200:
                    return response
                detail = response.text[:300].strip()
                if response.status_code not in _RETRY_STATUS:
                    raise KGError(f"{self.description}: the endpoint answered HTTP {response.status_code} to "
                                  f"{what}: {detail} (query: {query[:300]})")
                last = f"HTTP {response.status_code}: {detail}"
            if attempt < self.retries:
                wait = min(self.backoff_s * 2**attempt, 30.0)
                logger.warning("%s: %s failed (%s); retry %d/%d in %.1f s", self.description, what, last,
                               attempt + 1, self.retries, wait)
                self.sleep(wait)
        raise KGError(f"{self.description}: {what} failed after {self.retries + 1} attempt(s) ({last})")

    def count(self, client: httpx.Client) -> int | None:
        """The number of triples to page (None with construct=, or when the endpoint cannot say)."""
        if self.construct is not None:
            return None
        query = f"SELECT (COUNT(*) AS ?n) WHERE {{ {self._where()} }}"
        try:
            response = client.post(self.endpoint, data={"query": query},
                                   headers={"Accept": "application/sparql-results+json"})
            response.raise_for_status()
            return int(response.json()["results"]["bindings"][0]["n"]["value"])
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
            logger.info("%s: cannot count the triples (%s); paging without a total", self.description, exc)
            return None

    # ------------------------------------------------------------------ paging
    def _parse(self, body: bytes, fmt: str, collector: RDFCollector, where: str) -> int:
        ox = _pyoxigraph()
        before = collector.statements
        try:
            collector.add_all(ox.parse(body, ox.RdfFormat.from_media_type(RDF_FORMATS[fmt])))
        except SyntaxError as exc:
            raise KGFormatError(f"{where}: the endpoint sent malformed {fmt}: {exc}",
                                [(where, exc.lineno or 0, str(exc))], bad_lines=1) from None
        return collector.statements - before

    def _fetch_page(self, client: httpx.Client, page: int) -> tuple[bytes, str]:
        response = self._post(client, self.page_query(page), _ACCEPT, f"page {page + 1}")
        media = response.headers.get("content-type", "application/n-triples").split(";")[0].strip().lower()
        fmt = _EXT.get(media)
        if fmt is None:
            raise KGError(f"{self.description}: page {page + 1} came as {media!r}, not an RDF syntax "
                          f"simgrag reads ({', '.join(sorted(_EXT))})")
        return response.content, fmt

    def _page_all(self, client: httpx.Client, checkpoint: _Checkpoint, collector: RDFCollector,
                  show_progress: bool | None) -> None:
        total = checkpoint.count
        show = (total is None or total > self.page_size) if show_progress is None else show_progress
        with tqdm(total=total, initial=checkpoint.triples, unit="triple", unit_scale=True, disable=not show,
                  desc=f"Paging {self.description}") as bar:
            while not checkpoint.complete:
                page = len(checkpoint.pages)
                body, fmt = self._fetch_page(client, page)
                got = self._parse(body, fmt, collector, f"{self.description} page {page + 1}")
                if got == 0:
                    checkpoint.finish()
                    break
                checkpoint.add(body, fmt, got)
                bar.update(got)
                if self.on_page is not None:
                    self.on_page(page, checkpoint.triples)
        if total is not None and checkpoint.triples != total:
            logger.warning("%s: the pages hold %d triples but the endpoint counted %d: its data changed while "
                           "paging, or its scan order is not stable (then use order=True)", self.description,
                           checkpoint.triples, total)

    def load(self, *, show_progress: bool | None = None) -> tuple[KGStore, LoadReport]:
        """Page every triple out (resuming saved pages), then build the store."""
        from simgrag.kg.loader import LoadReport

        start = time.perf_counter()
        collector = RDFCollector(self.rdf)
        try:
            with httpx.Client(timeout=self.timeout_s, headers=dict(self.headers)) as client:
                checkpoint = _Checkpoint.open(self._checkpoint_dir(), self.fingerprint(), self.count(client))
                for name in checkpoint.pages:
                    self._parse((checkpoint.directory / name).read_bytes(), name.rsplit(".", 1)[1], collector,
                                str(checkpoint.directory / name))
                if checkpoint.pages:
                    logger.info("%s: resuming after %d saved page(s) (%d triples) in %s", self.description,
                                len(checkpoint.pages), checkpoint.triples, checkpoint.directory)
                self._page_all(client, checkpoint, collector, show_progress)
        except OSError as exc:
            raise KGError(f"{self.description}: cannot keep the pages in {self._checkpoint_dir()}: {exc}") from exc
        try:
            store = collector.build()
        except EmptyKGError as exc:
            raise EmptyKGError(f"{self.description}: {exc} (is the query or graph IRI right?)") from exc
        report = LoadReport(
            path=self.description, format="sparql", lines_read=collector.statements,
            triples_read=collector.triples, duplicates_removed=store.duplicates_removed, skipped_lines=0,
            skipped_reasons=dict(collector.skipped), examples=[], comment_or_blank_lines=0,
            entities=store.num_entities, relations=store.num_relations, types=store.num_types,
            seconds=time.perf_counter() - start,
        )
        logger.info("Loaded %s (%d pages)", report.summary(), len(checkpoint.pages))
        return store, report

    def finished(self) -> None:
        shutil.rmtree(self._checkpoint_dir(), ignore_errors=True)
