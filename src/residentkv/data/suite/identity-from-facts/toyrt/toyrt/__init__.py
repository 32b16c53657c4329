"""toyrt: a toy serving runtime used by the residentkv suite (test data)."""
