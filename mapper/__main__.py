"""`python -m mapper` is the same program as the `gkmap` console script."""
from mapper.cli import main_cli

main_cli()
