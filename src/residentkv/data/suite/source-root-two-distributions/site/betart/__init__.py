"""betart."""
