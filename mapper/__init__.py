"""gkmap: report every location where a short DNA read aligns within edit distance e.

The public API (mapper/api.py) is small: build or load an index, map reads into files (`map_reads`) or
into `Record`s (`map_records`). Everything else is internal and may change. The names load on first use,
so that `gkmap --help` and the modules that only need `__version__` do not import the whole mapper.
"""
from mapper.version import __version__

__all__ = ["__version__", "Record", "MapOptions", "build_index", "open_index", "map_reads", "map_records"]


def __getattr__(name):
    if name in __all__:
        from mapper import api
        return getattr(api, name)
    raise AttributeError(f"module 'mapper' has no attribute {name!r}")
