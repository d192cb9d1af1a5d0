"""Knowledge graphs: file readers (pipe, TSV, CSV, N-Triples, RDF), other sources (a SPARQL endpoint,
a Kùzu database), the integer-id store, persistence."""

from simgrag.kg.graphdb import KuzuSource
from simgrag.kg.iris import TermIRIs
from simgrag.kg.loader import LoadReport, load_kg
from simgrag.kg.names import NameTable
from simgrag.kg.rdf import RDFOptions, load_rdf
from simgrag.kg.readers import FORMATS, CsvColumns, detect_format, iter_triples
from simgrag.kg.sources import KGSource, RDFFile, open_source
from simgrag.kg.sparql import SparqlSource
from simgrag.kg.store import KGStore, Triple, build_csr

__all__ = [
    "FORMATS",
    "CsvColumns",
    "KGSource",
    "KGStore",
    "KuzuSource",
    "LoadReport",
    "NameTable",
    "RDFFile",
    "RDFOptions",
    "SparqlSource",
    "TermIRIs",
    "Triple",
    "build_csr",
    "detect_format",
    "iter_triples",
    "load_kg",
    "load_rdf",
    "open_source",
]
