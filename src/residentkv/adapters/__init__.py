"""Emitters at the edge: runtime adapters that produce ``residentkv.event/v1`` traces.

Adapters import the core, never the other way round; each adapter's heavy dependencies
(torch, vLLM) are imported only when that adapter is used.
"""
