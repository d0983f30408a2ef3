"""Trace generators of our own: the shipped synthetic trace and random test traces."""
