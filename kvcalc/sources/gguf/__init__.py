"""GGUF model files: the header reader, the keys → model shape, local and Hub files.

``import kvcalc.sources.gguf`` imports nothing heavy; the ``gguf`` package (and numpy with it) is
imported by the functions that read a file.
"""
