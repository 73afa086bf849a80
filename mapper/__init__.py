"""gkmap: report every location where a short DNA read aligns within edit distance e.

The public API is small: build or load an index, map reads. Everything else is internal and may change.
"""
__version__ = "0.1.0"

__all__ = ["__version__"]
