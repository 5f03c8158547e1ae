"""Passes: transformations registered by name in the pass manager."""
