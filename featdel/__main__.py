"""`python -m featdel`: the command line."""

from featdel.cli.main import app

app()
