"""The engine: the simulator (engine.sim), stored runs and landscapes (engine.landscape) and
the command line (engine.cli), each layer importing only those before it, and none of them
the dashboard (tests/test_layers.py)."""

__version__ = "0.1.0"
