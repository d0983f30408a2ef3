"""The DTR simulation engine: traces in, run records out. Imports neither dash nor duckdb."""

__version__ = "0.1.0"
