"""The command line, `dtr-landscape`: the top of the engine, over engine.sim and
engine.landscape. The dashboard adds its own commands (serve, bench-dashboard) through the
entry point group `dtr_landscape.commands`, so nothing here imports app/."""
