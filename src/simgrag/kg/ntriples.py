"""N-Triples statements → term keys, and term keys → readable names.

A *term key* identifies an RDF term inside one load: ``<iri`` (the IRI, escapes resolved), ``_:label``
(a blank node, kept as is) or ``"value`` (a literal's lexical value; language tag and datatype
dropped, so ``"Paris"@en`` and ``"Paris"@fr`` are one node). Keys keep distinct IRIs apart even when
their readable names coincide; :func:`term_name` gives the name shown to people and models:

- an IRI → its last fragment or path segment, percent-decoded, ``_`` → space
  (``<http://ex.org/Douglas_Adams>`` → ``Douglas Adams``);
- a blank node → ``_:label``;
- a literal → its lexical value.

Special predicates: ``rdf:type`` statements give entity types, ``rdfs:label`` literals name their
subject (see :mod:`simgrag.kg.loader`).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = [
    "RDFS_LABEL",
    "RDF_TYPE",
    "LineError",
    "Statement",
    "iri_label",
    "parse_ntriples_line",
    "term_fallback",
    "term_name",
]

RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"

# (subject key, predicate IRI, object key, language tag or "")
Statement = tuple[str, str, str, str]


class LineError(ValueError):
    """One input line is malformed; the message is the reason (no file or line number)."""


_UCHAR = r"\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}"
_IRI = rf"<((?:[^<>\"{{}}|^`\\\x00-\x20]|{_UCHAR})*)>"
_BNODE = r"(_:[^\s<>\".]+(?:\.+[^\s<>\".]+)*)"
_LITERAL = r'"((?:[^"\\\r\n]|\\.)*)"(?:\^\^<([^<>\s]*)>|@([A-Za-z]+(?:-[A-Za-z0-9]+)*))?'
_STATEMENT = re.compile(
    rf"\s*(?:{_IRI}|{_BNODE})\s*{_IRI}\s*(?:{_IRI}|{_BNODE}|{_LITERAL})\s*\.\s*(?:#.*)?", re.S
)
_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))", re.S)
_SIMPLE_ESCAPES = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}


def _escape_char(match: re.Match[str]) -> str:
    if match.group(3) is not None:
        char = _SIMPLE_ESCAPES.get(match.group(3))
        if char is None:
            raise LineError(f"invalid escape '\\{match.group(3)}'")
        return char
    code = int(match.group(1) or match.group(2), 16)
    if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        raise LineError(f"escape for an invalid or NUL character (U+{code:04X})")
    return chr(code)


def _unescape(text: str) -> str:
    return _ESCAPE.sub(_escape_char, text) if "\\" in text else text


def parse_ntriples_line(line: str) -> Statement:
    """Parse one N-Triples statement into term keys; raise :class:`LineError` when malformed."""
    match = _STATEMENT.fullmatch(line)
    if match is None:
        if not line.rstrip().endswith("."):
            raise LineError("N-Triples statement does not end with '.'")
        raise LineError("not an N-Triples statement (expected '<subject> <predicate> <object> .')")
    s_iri, s_bnode, p_iri, o_iri, o_bnode, o_lit, _datatype, lang = match.groups()
    subject = _iri_key(s_iri) if s_iri is not None else s_bnode
    predicate = _unescape(p_iri)
    if not predicate:
        raise LineError("empty predicate IRI")
    if o_iri is not None:
        obj = _iri_key(o_iri)
    elif o_bnode is not None:
        obj = o_bnode
    else:
        value = _unescape(o_lit).strip()
        if not value:
            raise LineError("empty literal")
        obj = '"' + value
    return subject, predicate, obj, lang or ""


def _iri_key(iri: str) -> str:
    iri = _unescape(iri)
    if not iri:
        raise LineError("empty IRI '<>'")
    return "<" + iri


def iri_label(iri: str) -> str:
    """A readable name for ``iri``: last fragment/path segment, percent-decoded, ``_`` → space."""
    body = iri.rstrip("/#")
    cut = max(body.rfind("/"), body.rfind("#"))
    segment = body[cut + 1 :] if cut >= 0 else body.rsplit(":", 1)[-1]
    name = " ".join(unquote(segment).replace("_", " ").split())
    return name if name and "\x00" not in name else iri


def term_name(key: str) -> str:
    """The readable name of a term key (see the module docstring)."""
    if key.startswith("<"):
        return iri_label(key[1:])
    if key.startswith('"'):
        return key[1:]
    return key


def term_fallback(key: str) -> str:
    """A longer, still readable name used when two terms would get the same :func:`term_name`."""
    if key.startswith("<"):
        return key[1:]
    if key.startswith('"'):
        return key + '"'
    return key
