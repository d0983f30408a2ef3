"""Landscapes: the store of runs (the only DuckDB module is store.py), sweeps, exact walks,
edges, holes, imports and exports. Built on engine.sim; imports nothing from engine.cli or app.
"""
