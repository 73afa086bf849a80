"""Subcommands of the `gkmap` CLI, one module each (see mapper.cli)."""
