"""The generator: every client's requests, planned from the seed before the run starts.

Tenants hold sessions; each session belongs to one client (so its requests go in order: the
registration before its reuses) and owns one claim at a time on its own prompt. A client's plan
interleaves its sessions' requests -- reuses by reference and by full claim, streamed or not --
with unclaimed traffic (fresh prompts, which also push claimed prefixes out of the small
device cache so reuses restore from the host tier) and foreign requests (another tenant's claim
id, by reference or as a full claim, under the sender's own owner scope and with the owner's
very prompt). Which claim *version* a request names is decided while the run goes (a session
registers a new claim after its claim ended); everything else is fixed by the seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from residentkv.adapters.vllm.chaos.model import Op, OpKind
from residentkv.adapters.vllm.witness import make_claim

__all__ = ["MIX", "Workload", "claim_body", "claim_id", "plan_ops", "prompt_tokens",
           "session_names"]

#: the share of each request kind after a session's registration
MIX: tuple[tuple[OpKind, float], ...] = (
    (OpKind.REUSE_REF, 0.40),
    (OpKind.REUSE_FULL, 0.15),
    (OpKind.UNCLAIMED, 0.25),
    (OpKind.FOREIGN_REF, 0.12),
    (OpKind.FOREIGN_FULL, 0.08),
)
#: token ids are drawn from this range (every vocabulary of 1024 or more holds them)
TOKEN_RANGE = (3, 1024)


@dataclass(frozen=True)
class Workload:
    """The load: how many clients, tenants, sessions and requests, how fast, how streamed."""

    seed: int
    clients: int
    tenants: int
    sessions_per_tenant: int
    ops: int
    rate_per_client: float
    stream_share: float


def session_names(tenants: int, sessions_per_tenant: int) -> list[str]:
    """Every session's owner scope, ``tenant:T/session:S``."""
    return [f"tenant:{t}/session:{s}" for t in range(tenants) for s in range(sessions_per_tenant)]


def _tenant(session: str) -> str:
    return session.split("/", 1)[0]


def claim_id(seed: int, session: str, version: int) -> str:
    """The id of a session's *version*-th claim (a fresh id after each ending: an id, once
    decided, is never registered again)."""
    tenant, sess = session.split("/", 1)
    return f"chaos{seed}-{tenant.split(':', 1)[1]}-{sess.split(':', 1)[1]}-v{version}"


def prompt_tokens(seed: int, key: str, length: int) -> list[int]:
    """The prompt of *key* (a session, or an unclaimed request), deterministic from the seed."""
    rng = random.Random(f"{seed}/{key}")
    return [rng.randrange(*TOKEN_RANGE) for _ in range(length)]


def claim_body(cid: str, owner_scope: str, object_id: str, *, model: str,
               block_size: int) -> dict[str, Any]:
    """The witness's claim (``offloadable``, the first two blocks of the prompt) for the
    engine's block size."""
    claim = make_claim(cid, owner_scope, model, object_id)
    claim["cache_identity"]["block_size"] = block_size
    return claim


def _pick(rng: random.Random, mix: tuple[tuple[OpKind, float], ...]) -> OpKind:
    kinds = [k for k, _ in mix]
    chosen: OpKind = rng.choices(kinds, weights=[w for _, w in mix])[0]
    return chosen


def plan_ops(w: Workload) -> list[list[Op]]:
    """Each client's requests, in order (``op_id`` unique over the run)."""
    sessions = session_names(w.tenants, w.sessions_per_tenant)
    owned: list[list[str]] = [[] for _ in range(w.clients)]
    for i, s in enumerate(sessions):
        owned[i % w.clients].append(s)
    per_client = [w.ops // w.clients + (1 if c < w.ops % w.clients else 0)
                  for c in range(w.clients)]
    plans: list[list[Op]] = [[] for _ in range(w.clients)]
    next_id = 0
    for client in range(w.clients):
        rng = random.Random(f"{w.seed}/client/{client}")
        registered: set[str] = set()
        for _ in range(per_client[client]):
            op = _next_op(rng, w, client, next_id, owned[client], sessions, registered)
            plans[client].append(op)
            next_id += 1
    return plans


def _next_op(rng: random.Random, w: Workload, client: int, op_id: int, mine: list[str],
             sessions: list[str], registered: set[str]) -> Op:
    think = rng.expovariate(w.rate_per_client) if w.rate_per_client > 0 else 0.0
    stream = rng.random() < w.stream_share
    if not mine:
        return Op(op_id=op_id, client=client, kind=OpKind.UNCLAIMED, session=None,
                  stream=stream, prompt=f"u{op_id}", think_s=think)
    session = rng.choice(mine)
    if session not in registered:
        registered.add(session)
        return Op(op_id=op_id, client=client, kind=OpKind.REGISTER, session=session,
                  stream=stream, prompt=session, think_s=think)
    kind = _pick(rng, MIX)
    others = [s for s in sessions if _tenant(s) != _tenant(session)]
    if kind in (OpKind.FOREIGN_REF, OpKind.FOREIGN_FULL) and others:
        target = rng.choice(others)
        return Op(op_id=op_id, client=client, kind=kind, session=session,
                  target_session=target, stream=stream, prompt=target, think_s=think)
    if kind in (OpKind.UNCLAIMED, OpKind.FOREIGN_REF, OpKind.FOREIGN_FULL):
        return Op(op_id=op_id, client=client, kind=OpKind.UNCLAIMED, session=None,
                  stream=stream, prompt=f"u{op_id}", think_s=think)
    return Op(op_id=op_id, client=client, kind=kind, session=session, stream=stream,
              prompt=session, think_s=think)
