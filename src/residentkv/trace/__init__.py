"""Reading, writing and gating event traces."""
