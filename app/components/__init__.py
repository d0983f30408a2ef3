"""Pure layout and figure builders: data in, Dash components out; no callbacks, no storage."""
