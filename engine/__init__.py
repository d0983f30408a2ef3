"""The DTR simulation engine: traces in, run records out. Imports neither dash nor duckdb."""
