"""The kvcalc release. A leaf module: records and ``--version`` read it without importing the API."""

__version__ = "0.1.0"
