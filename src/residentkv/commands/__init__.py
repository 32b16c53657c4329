"""Click commands, one module per command group. Each parses, calls one function, renders."""
