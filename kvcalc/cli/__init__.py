"""The command-line interface (typer). Parsing and rendering only."""
