"""``KEY=VALUE`` command-line settings (``--source-param``, ``--index-param``, ``--pattern-option``): split and
checked once, their values read one way."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence

from simgrag.errors import ConfigError

__all__ = ["key_values", "scalar_value"]


def key_values(pairs: Sequence[str], *, flag: str, allowed: Collection[str], where: str) -> Iterator[tuple[str, str]]:
    """``(key, value text)`` of each ``KEY=VALUE`` pair; a pair without ``=`` or a key outside ``allowed``
    raises :class:`~simgrag.errors.ConfigError` naming ``flag`` and, for the key, ``where`` it does not apply
    ("a Kùzu database", "the pattern stage") with the keys that do."""
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"{flag} wants KEY=VALUE; got {pair!r}")
        if key not in allowed:
            raise ConfigError(f"{flag} {key!r} does not apply to {where}; use {', '.join(sorted(allowed))}")
        yield key, text


def scalar_value(text: str) -> bool | int | float | str:
    """A ``VALUE`` as the settings take it: ``true/false/yes/no`` (any case) a bool, then an int, a float, or
    the text itself (``rerank=sq8``)."""
    if text.strip().lower() in ("true", "false", "yes", "no"):
        return text.strip().lower() in ("true", "yes")
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            continue
    return text
