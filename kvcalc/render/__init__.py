"""Rendering of result objects: rich tables for people, JSON for machines. No arithmetic here.

This layer owns the stdout/stderr consoles with secrets scrubbed from everything written
(:mod:`~kvcalc.render.console`), number formatting (:mod:`~kvcalc.render.fmt`), the stable JSON
writer (:mod:`~kvcalc.render.to_json`) and one ``*_view`` module per report. It reads result
objects from the layers below and never computes a figure or imports the CLI.
"""
