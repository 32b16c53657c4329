"""toyrt."""
