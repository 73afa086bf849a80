"""gkmap's version, in a module of its own: the SAM @PG line, the index's metadata and the CLI read it
without importing the package's public API (mapper/__init__.py), which sits above them all."""
__version__ = "0.1.0"
