"""MicroRuntime: a deterministic paged-KV block-pool simulator with resident claims (SPEC §10).

Modules, one job each: :mod:`~.pool` (blocks, free list, O(1) LRU), :mod:`~.policies` (what a
runtime accepts and does on conflict), :mod:`~.runtime` (the simulator, emitting v1 events),
:mod:`~.scenario` (the reference scenario), :mod:`~.facts` (reading a trace back),
:mod:`~.litmus` (L1-L7), :mod:`~.lowering_c1` (C1), :mod:`~.sweep` (the capacity sweep).
Nothing here imports matplotlib at import time.
"""

from residentkv.microruntime.policies import POLICIES, Conflict, Decision, Policy, make_policy
from residentkv.microruntime.pool import BlockPool
from residentkv.microruntime.runtime import MicroRuntime, RequestState

__all__ = [
    "POLICIES",
    "BlockPool",
    "Conflict",
    "Decision",
    "MicroRuntime",
    "Policy",
    "RequestState",
    "make_policy",
]
