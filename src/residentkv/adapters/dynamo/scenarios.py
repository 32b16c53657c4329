"""The fleet scenarios, as requests (:func:`run_scenarios`); their verdicts are in
:mod:`.verdicts`, read from the replicas' traces.

Order matters: the hard kill comes last, after every scenario that needs both replicas.

- ``owner_restore``: claims registered through the router (each owner's session id in
  ``x-dynamo-session-id``; the frontend runs with session affinity), every device prefix cache
  flushed, then each claim reused by reference through the router (-> its home, restored from
  the host tier) and straight to its home worker (the latency baseline), in pairs whose order
  alternates, each reuse after a flush of every replica. A control set reuses
  without the session header: the router then has only its KV view, which no longer shows the
  flushed prefix anywhere.
- ``not_held_elsewhere``: a reuse reference sent straight to the replica that is not the
  claim's home (Dynamo 1.6.1 cannot steer a ``/inference/v1/generate`` request to a chosen
  worker, see docs/fleet.md).
- ``cross_tenant``: two tenants claim the same prefix; tenant b then quotes tenant a's claim by
  reference, through the router and straight to each replica; last, tenant a's own reuse (the
  pair's other half: it must restore, or "no restore for b" would hold with caching off).
- ``home_killed``: the home of an offloaded claim is SIGKILLed; the owner's next reuse goes
  through the router, again every :data:`RETRY_S` until a replica answers. The harness's
  supervisor (:mod:`.supervisor`), which watches every worker's process, withdraws the dead
  worker's discovery records when the process is gone; the scenario does not wait for it.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

from residentkv.adapters.dynamo.driver import Driver, Sent, claim_ref
from residentkv.adapters.dynamo.layout import SERVED_MODEL_NAME
from residentkv.adapters.dynamo.tracefacts import read_events, served
from residentkv.adapters.vllm.backends import ClaimRef, transfer_params

__all__ = ["PROMPT_TOKENS", "RunLog", "pair_order", "prompt", "run_scenarios"]

PROMPT_TOKENS = 297  # two full 128-token blocks restorable + a tail vLLM always computes
OWNER_CLAIMS = 3
#: rounds of (routed, direct) claimed reuses per claim: 60 pairs, so that the medians of
#: ≈ 20 ms requests on a shared machine are not decided by a few outliers
REPEATS = 20
KILL_WAIT_S = 120.0
#: how often the owner asks again while no replica answers after the kill
RETRY_S = 0.2


@dataclass
class RunLog:
    """What the harness did, for the verdicts: the claims it made and when it killed whom."""

    claims: dict[str, dict[str, Any]] = field(default_factory=dict)
    killed: dict[str, int] = field(default_factory=dict)  # replica -> monotonic ns
    notes: list[str] = field(default_factory=list)


def prompt(tag: str, n: int) -> list[int]:
    """A deterministic token-id prompt (ids 3..1023: no bos/eos/unk)."""
    rng = random.Random(f"{tag}/{n}")
    return [rng.randrange(3, 1024) for _ in range(PROMPT_TOKENS)]


def make_claim(claim_id: str, owner: str, object_id: str) -> dict[str, Any]:
    from residentkv.adapters.vllm.witness import make_claim as witness_claim

    return witness_claim(claim_id, owner, SERVED_MODEL_NAME, object_id)


def home_of(driver: Driver, sent: Sent) -> str | None:
    """The replica whose trace shows the request *sent* (the registration) started."""
    traces = {r.name: read_events(r.trace) for r in driver.layout.replicas()}
    i = driver.sent.index(sent)
    upto = driver.sent[i + 1].marks if i + 1 < len(driver.sent) else None
    hits = served(sent.marks, upto, traces)
    return hits[0].replica if len(hits) == 1 else None


async def run_scenarios(driver: Driver) -> RunLog:
    log = RunLog()
    await owner_restore(driver, log)
    await not_held_elsewhere(driver, log)
    await cross_tenant(driver, log)
    await claimed_load_failure(driver, log)
    await home_killed(driver, log)
    return log


async def owner_restore(d: Driver, log: RunLog) -> None:
    sc = "owner_restore"
    homes = {}
    for k in range(OWNER_CLAIMS):
        claim = make_claim(f"fleet-own-{k}", f"tenant:a/session:{k}", f"obj-own-{k}")
        log.claims[claim["claim_id"]] = claim
        reg = await d.router(f"{sc}/register-{k}", sc, prompt(sc, k),
                             kv=transfer_params(claim), session=f"session-a{k}")
        homes[k] = home_of(d, reg)
    for rep in range(REPEATS):
        for k in range(OWNER_CLAIMS):
            for path in pair_order(rep, k):
                await _owner_reuse(d, log, path, k, rep, homes[k])
    for k in range(OWNER_CLAIMS):  # control: the router's KV view alone
        await d.flush_all()
        await d.router(f"{sc}/reuse-kv-only-{k}", f"{sc}.kv_only", prompt(sc, k),
                       kv=claim_ref(log.claims[f"fleet-own-{k}"]))


def pair_order(rep: int, k: int) -> tuple[str, str]:
    """The order of round *rep*'s pair of reuses of claim *k*: it alternates, so that neither
    path always runs first (after the same flush, under the same load)."""
    return ("router", "direct") if (rep + k) % 2 == 0 else ("direct", "router")


async def _owner_reuse(d: Driver, log: RunLog, path: str, k: int, rep: int,
                       home: str | None) -> None:
    """One claimed reuse of claim *k* after a flush of every replica: through the router
    with the owner's session, or straight to the claim's home (skipped when it has none)."""
    sc = "owner_restore"
    ref = claim_ref(log.claims[f"fleet-own-{k}"])
    if path == "router":
        await d.flush_all()
        await d.router(f"{sc}/reuse-router-{k}-{rep}", sc, prompt(sc, k), kv=ref,
                       session=f"session-a{k}")
    elif home is not None:
        await d.flush_all()
        await d.direct(f"{sc}/reuse-direct-{k}-{rep}", sc, home, prompt(sc, k), kv=ref)


async def not_held_elsewhere(d: Driver, log: RunLog) -> None:
    sc = "not_held_elsewhere"
    claim = log.claims["fleet-own-0"]
    reg = next(s for s in d.sent if s.label == "owner_restore/register-0")
    home = home_of(d, reg)
    other = next((r.name for r in d.layout.replicas() if r.name != home), None)
    if home is None or other is None:
        log.notes.append(f"{sc}: no home found for {claim['claim_id']}")
        return
    await d.flush_all()
    await d.direct(f"{sc}/reuse-on-{other}", sc, other, prompt("owner_restore", 0),
                   kv=claim_ref(claim))


async def cross_tenant(d: Driver, log: RunLog) -> None:
    sc = "cross_tenant"
    shared = prompt(sc, 0)
    a = make_claim("fleet-tenant-a", "tenant:a/session:77", "obj-shared")
    b = make_claim("fleet-tenant-b", "tenant:b/session:9", "obj-shared")
    log.claims.update({a["claim_id"]: a, b["claim_id"]: b})
    await d.router(f"{sc}/register-a", sc, shared, kv=transfer_params(a), session="session-ta")
    await d.flush_all()
    await d.router(f"{sc}/register-b", sc, shared, kv=transfer_params(b), session="session-tb")
    forged = transfer_params(ClaimRef(a["claim_id"], b["owner_scope"]))
    await d.flush_all()
    await d.router(f"{sc}/b-quotes-a-router", sc, shared, kv=forged, session="session-tb")
    for r in d.layout.replicas():
        await d.flush_all()
        await d.direct(f"{sc}/b-quotes-a-on-{r.name}", sc, r.name, shared, kv=forged)
    await d.flush_all()
    await d.router(f"{sc}/b-reuses-own", sc, shared, kv=claim_ref(b), session="session-tb")
    # The pair's other half, in the same run: the owner's reuse restores from its home's host
    # tier, so caching and the tier are live and "no restore for tenant b" means something.
    await d.flush_all()
    await d.router(f"{sc}/a-reuses-own", sc, shared, kv=claim_ref(a), session="session-ta")


async def claimed_load_failure(d: Driver, log: RunLog) -> None:
    """A claim whose host-tier load fails on its home (injected through the home's control
    socket): the owner's reuse through the router must end in the claim-scoped refusal."""
    sc = "claimed_load_failure"
    claim = make_claim("fleet-fail-0", "tenant:c/session:0", "obj-fail-0")
    log.claims[claim["claim_id"]] = claim
    reg = await d.router(f"{sc}/register", sc, prompt(sc, 0), kv=transfer_params(claim),
                         session="session-c0")
    home = home_of(d, reg)
    if home is None:
        log.notes.append(f"{sc}: no home found for {claim['claim_id']}")
        return
    await d.inject_load_failure(home, claim["claim_id"])
    await d.flush_all()
    await d.router(f"{sc}/reuse", sc, prompt(sc, 0), kv=claim_ref(claim), session="session-c0")


async def home_killed(d: Driver, log: RunLog) -> None:
    sc = "home_killed"
    claim = log.claims["fleet-own-0"]
    reg = next(s for s in d.sent if s.label == "owner_restore/register-0")
    home = home_of(d, reg)
    if home is None:
        log.notes.append(f"{sc}: no home found for {claim['claim_id']}")
        return
    log.killed[home] = d.kill(home)
    deadline = time.monotonic() + KILL_WAIT_S
    attempt = 0
    while time.monotonic() < deadline:
        s = await d.router(f"{sc}/reuse-after-kill-{attempt}", sc, prompt("owner_restore", 0),
                           kv=claim_ref(claim), session="session-a0", timeout=30.0)
        attempt += 1
        if s.status == 200:
            await others_lost(d, log, home)
            return
        await asyncio.sleep(RETRY_S)
    log.notes.append(f"{sc}: no answer within {KILL_WAIT_S:.0f}s of the kill "
                     f"({attempt} attempts)")


async def others_lost(d: Driver, log: RunLog, home: str) -> None:
    """Each other owner claim homed on the killed replica, asked for once more."""
    for k in range(1, OWNER_CLAIMS):
        reg = next(s for s in d.sent if s.label == f"owner_restore/register-{k}")
        if home_of(d, reg) == home:
            await d.router(f"home_killed/others-after-kill-{k}", "home_killed.others",
                           prompt("owner_restore", k), kv=claim_ref(log.claims[f"fleet-own-{k}"]),
                           session=f"session-a{k}", timeout=30.0)
