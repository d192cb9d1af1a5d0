"""Synthetic DBpedia-shaped KGs, for testing and benchmarking at FactKG's scale without DBpedia.

DBpedia as used by FactKG has 9.9M entities, 42.9M edges, 467 entity types and 522 relations
(~4.3 edges per entity). :func:`generate_dbpedia_like` writes a KG of that shape at any size,
seeded and streaming (numpy chunks, never a Python object per triple):

- types in a shallow hierarchy with heavy-tailed sizes (``rdf:type`` for a class and its ancestors);
- relations with a domain and a range class, or a literal range (dates, years, numbers);
- log-normal out-degrees (mean 4.33) and popularity-skewed in-degrees (hubs);
- readable, unique names from word lists shipped in ``simgrag/data/synthetic_dbpedia``,
  disambiguated like DBpedia (``John Smith (soccer player)``);
- optionally *planted* subgraphs with noisy queries and known answers, to measure retrieval.

    from simgrag.eval.synthetic_dbpedia import generate_dbpedia_like
    report = generate_dbpedia_like("kg.nt", entities=1_000_000, seed=0, planted=1000)

:class:`SyntheticKG` is the same KG before any output: its ``edge_chunks()`` stream numpy arrays and
``to_store()`` builds a :class:`~simgrag.kg.store.KGStore` directly (no file, no parsing; equal to
loading the written file). ``check`` verifies planted queries against a store.

Command line: ``simgrag synth-kg --entities 1000000 -o kg.nt --planted 1000``.
"""

from simgrag.eval.synthetic_dbpedia.check import exact_matches, planted_triples_present
from simgrag.eval.synthetic_dbpedia.edges import EdgeChunk, EdgeModel
from simgrag.eval.synthetic_dbpedia.generate import (
    FACTKG_SHAPE,
    SyntheticKG,
    SynthReport,
    generate_dbpedia_like,
    report_dict,
)
from simgrag.eval.synthetic_dbpedia.paraphrase import EDIT_KINDS, drop_qualifier, paraphrase_name, typo
from simgrag.eval.synthetic_dbpedia.planted import SHAPES, PlantedQuery
from simgrag.eval.synthetic_dbpedia.schema import LITERAL_KINDS, Schema, class_label, load_schema
from simgrag.eval.synthetic_dbpedia.writer import OUTPUT_FORMATS

__all__ = [
    "EDIT_KINDS",
    "FACTKG_SHAPE",
    "LITERAL_KINDS",
    "OUTPUT_FORMATS",
    "SHAPES",
    "EdgeChunk",
    "EdgeModel",
    "PlantedQuery",
    "Schema",
    "SynthReport",
    "SyntheticKG",
    "class_label",
    "drop_qualifier",
    "exact_matches",
    "generate_dbpedia_like",
    "load_schema",
    "paraphrase_name",
    "planted_triples_present",
    "report_dict",
    "typo",
]
