"""MicroRuntime: a deterministic paged-KV block-pool simulator with resident claims (SPEC §10).

Modules, one job each. The runtime: :mod:`~.pool` (blocks, free list, O(1) LRU),
:mod:`~.chains` (prefix chains over the pool), :mod:`~.ledger` (claims, protection, the harm
rule), :mod:`~.scheduler` (active requests), :mod:`~.emitter` (every v1 event),
:mod:`~.policies` (what a runtime accepts and does on conflict) and :mod:`~.runtime` (the
:class:`MicroRuntime` facade over them). Around it: :mod:`~.scenario` (the reference scenario),
:mod:`~.facts` (reading a trace back), :mod:`~.results` (litmus items and verdicts),
:mod:`~.litmus` (L1-L7), :mod:`~.lowering_c1` (C1), :mod:`~.sweep` (the capacity sweep).
Nothing here imports matplotlib or the report layer.
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
