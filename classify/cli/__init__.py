"""The `classify` command line: one module per command group; each command parses, calls one
library function and prints."""

from classify.cli.main import app, main

__all__ = ["app", "main"]
