"""Data files shipped with residentkv, read with importlib.resources."""
