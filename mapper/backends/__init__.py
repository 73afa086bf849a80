"""Backends run the pipeline's heavy stages; see base.py for the interface."""
from mapper.backends.base import get_backend

__all__ = ["get_backend"]
