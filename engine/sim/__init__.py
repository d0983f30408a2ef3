"""The simulator: DTR traces in, run records out.

The bottom layer. It imports nothing from engine.landscape, engine.cli or app, and neither
dash nor duckdb (tests/test_layers.py checks it).
"""
