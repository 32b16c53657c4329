"""The bad-lowering suite: data-driven cases, and mutants generated from passing evidence."""
