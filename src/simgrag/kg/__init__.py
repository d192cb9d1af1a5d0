"""Knowledge graphs: file readers (pipe, TSV, CSV, N-Triples), the integer-id store, persistence."""

from simgrag.kg.loader import LoadReport, load_kg
from simgrag.kg.names import NameTable
from simgrag.kg.readers import FORMATS, CsvColumns, detect_format, iter_triples
from simgrag.kg.store import KGStore, Triple, build_csr

__all__ = [
    "FORMATS",
    "CsvColumns",
    "KGStore",
    "LoadReport",
    "NameTable",
    "Triple",
    "build_csr",
    "detect_format",
    "iter_triples",
    "load_kg",
]
