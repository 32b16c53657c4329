"""Each fleet scenario's verdict, read from the replicas' traces (pure but for reading files).

The harness's own records (:class:`~.driver.Sent`) only say what was sent and when; which
replica served a request, and what it decided, comes from the traces (:mod:`.tracefacts`), the
single-stream gates (:func:`residentkv.trace.gates.check_trace`) and the fleet view
(:mod:`.judging`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from residentkv.adapters.dynamo.driver import Sent
from residentkv.adapters.dynamo.supervisor import Withdrawal
from residentkv.adapters.dynamo.tracefacts import Event, Served, served
from residentkv.fleet import FleetJudgement, FleetRequest

__all__ = ["SPLIT", "Verdict", "judge_scenarios", "latency_split", "paired_ms", "resolve"]

#: the parts of a request's latency, on one clock (CLOCK_MONOTONIC: the harness's send and
#: answer times, the serving engine's ``request_started`` and ``request_finished``)
SPLIT = ("to_engine", "in_engine", "back")


@dataclass
class Verdict:
    """One scenario: held or not, the checks behind it, and its figures."""

    scenario: str
    checks: dict[str, bool] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def held(self) -> bool:
        return bool(self.checks) and all(self.checks.values())

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "held": self.held, "checks": self.checks,
                "figures": self.figures, "notes": self.notes}


@dataclass(frozen=True)
class Resolved:
    """A sent request and what the traces say served it (``None``: not exactly one)."""

    sent: Sent
    hits: tuple[Served, ...]

    @property
    def one(self) -> Served | None:
        return self.hits[0] if len(self.hits) == 1 else None


def resolve(sent: Sequence[Sent], traces: Mapping[str, Sequence[Event]]) -> dict[str, Resolved]:
    """label -> the request(s) each sent request became, between its marks and the next's."""
    out = {}
    for i, s in enumerate(sent):
        upto = sent[i + 1].marks if i + 1 < len(sent) else None
        out[s.label] = Resolved(s, tuple(served(s.marks, upto, traces)))
    return out


def _with(res: Mapping[str, Resolved], prefix: str) -> list[Resolved]:
    return [r for label, r in res.items() if label.startswith(prefix)]


def _once(rows: Sequence[Resolved]) -> list[tuple[Sent, Served]]:
    """The rows served exactly once, with the request that served each."""
    return [(r.sent, r.one) for r in rows if r.one is not None]


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def _home(res: Mapping[str, Resolved], label: str) -> str | None:
    r = res.get(label)
    return r.one.replica if r is not None and r.one is not None else None


def latency_split(sent: Sent, s: Served) -> tuple[float, float, float] | None:
    """(to the engine, in the engine, back), in ms: the harness's send to the engine's
    ``request_started``, to its ``request_finished``, to the answer in the harness. None when a
    time is missing (nothing is estimated)."""
    start, fin = s.named("request_started"), s.named("request_finished")
    if not (start and fin and sent.t_sent_ns and sent.t_done_ns):
        return None
    t0, t1 = start[0].get("ts_ns"), fin[0].get("ts_ns")
    if not (isinstance(t0, int) and isinstance(t1, int)):
        return None
    return ((t0 - sent.t_sent_ns) / 1e6, (t1 - t0) / 1e6, (sent.t_done_ns - t1) / 1e6)


def _split_medians(rows: Sequence[tuple[Sent, Served]]) -> dict[str, float | None]:
    parts = [p for p in (latency_split(sent, s) for sent, s in rows) if p is not None]
    return {name: _median([p[i] for p in parts]) for i, name in enumerate(SPLIT)}


def paired_ms(router: Sequence[tuple[Sent, Served]],
              direct: Sequence[tuple[Sent, Served]]) -> list[tuple[float, float]]:
    """(router ms, direct ms) of each round's two reuses of one claim (labels
    ``…reuse-router-<k>-<round>`` and ``…reuse-direct-<k>-<round>``), sent one after the other
    under the same load: their ratio leaves out the load's drift between rounds, which moves the
    ratio of the two medians on a shared machine."""
    by_round = {s.label.replace("reuse-direct-", "reuse-router-"): s.ms for s, _ in direct}
    return [(s.ms, by_round[s.label]) for s, _ in router if s.label in by_round]


def _claim_scoped(s: Served, claim_id: str) -> bool:
    """Restored from the host tier, or a rejection of the claim (naming it, or -- a reference
    never names a claim, SPEC §9.1 -- naming none): never a silent recompute."""
    return s.restored_from_host or s.rejection_of(claim_id) is not None


def owner_restore(res: Mapping[str, Resolved], claims: Mapping[str, dict[str, Any]],
                  traces: Mapping[str, Path], observation: Any) -> Verdict:
    v = Verdict("owner_restore")
    own = sorted(c for c in claims if c.startswith("fleet-own-"))
    homes = {c: _home(res, f"owner_restore/register-{c.rsplit('-', 1)[1]}") for c in own}
    v.figures["homes"] = homes
    regs = {c: res.get(f"owner_restore/register-{c.rsplit('-', 1)[1]}") for c in own}
    v.checks["every claim registered on one replica, offloaded there"] = bool(own) and all(
        r is not None and r.one is not None and bool(r.one.named("claim_offloaded", c))
        for c, r in regs.items())
    routed = _with(res, "owner_restore/reuse-router-")
    direct = _once(_with(res, "owner_restore/reuse-direct-"))
    at_home = [(s, x) for s, x in _once(routed) if x.replica == homes.get(s.claim_id or "")]
    v.figures["routed_to_owner"] = f"{len(at_home)}/{len(routed)}"
    v.figures["routed_to_owner_rate"] = round(len(at_home) / len(routed), 3) if routed else None
    v.checks["every routed reuse served by the claim's home"] = bool(routed) and len(
        at_home) == len(routed)
    v.checks["every routed reuse restored from the home's host tier"] = bool(at_home) and all(
        x.restored_from_host for _, x in at_home)
    v.checks["every direct reuse restored from the host tier"] = bool(direct) and all(
        x.restored_from_host for _, x in direct)
    for c, home in homes.items():
        ok = home is not None and observation(traces[home], c)
        v.checks[f"observation gate passes for {c} on replica {home}'s stream"] = ok
    kv_only = _with(res, "owner_restore/reuse-kv-only-")
    kv_once = _once(kv_only)
    kv_home = [1 for s, x in kv_once if x.replica == homes.get(s.claim_id or "")]
    v.figures["routed_to_owner_kv_only"] = f"{len(kv_home)}/{len(kv_only)}"
    v.checks["every KV-only reuse got a claim-scoped outcome"] = bool(kv_only) and len(
        kv_once) == len(kv_only) and all(_claim_scoped(x, s.claim_id or "") for s, x in kv_once)
    router_rows = [(s, x) for s, x in at_home if x.restored_from_host]
    direct_rows = [(s, x) for s, x in direct if x.restored_from_host]
    router_ms, direct_ms = [s.ms for s, _ in router_rows], [s.ms for s, _ in direct_rows]
    v.figures["claimed_reuse_split_ms_router"] = _split_medians(router_rows)
    v.figures["claimed_reuse_split_ms_direct"] = _split_medians(direct_rows)
    v.figures["claimed_reuse_ms_router_median"] = _median(router_ms)
    v.figures["claimed_reuse_ms_direct_median"] = _median(direct_ms)
    if router_ms and direct_ms:
        v.figures["router_over_direct_ratio"] = round(
            statistics.median(router_ms) / statistics.median(direct_ms), 3)
    pairs = paired_ms(router_rows, direct_rows)
    v.figures["router_direct_pairs"] = len(pairs)
    if pairs:
        v.figures["router_over_direct_paired"] = round(
            statistics.median(r / d for r, d in pairs), 3)
        v.figures["router_minus_direct_ms_paired"] = _median([r - d for r, d in pairs])
    return v


def not_held_elsewhere(res: Mapping[str, Resolved], fleet: FleetJudgement) -> Verdict:
    v = Verdict("not_held_elsewhere")
    rows = _with(res, "not_held_elsewhere/")
    v.checks["the reuse was sent to the non-home replica"] = bool(rows)
    for r in rows:
        s = r.one
        rej = s.rejection_of(r.sent.claim_id) if s is not None else None
        v.checks["served once, by the replica it was sent to"] = (
            s is not None and r.sent.via == f"direct:{s.replica}")
        v.checks["claim_rejected of the claim, reason 'not held'"] = (
            rej is not None and str(rej.get("reason", "")).startswith("not held"))
        v.checks["no host-tier read (no silent stand-in for the claim)"] = (
            s is not None and not s.read_host_tier)
        if rej is not None:
            v.figures["reason"] = rej.get("reason")
        if s is not None:
            row = fleet_request(fleet, s.request_id)
            v.checks["fleet view: one decision naming the claim (rejected)"] = (
                row is not None and row.passed and row.decision == "rejected")
    return v


def cross_tenant(res: Mapping[str, Resolved], claims: Mapping[str, dict[str, Any]],
                 all_served: Sequence[Served], fleet: FleetJudgement) -> Verdict:
    v = Verdict("cross_tenant")
    owner = {c: body["owner_scope"] for c, body in claims.items()}
    foreign = [s for s in all_served if s.read_host_tier
               and any(e.get("claim_id") in owner and owner[e["claim_id"]] != _owner(s)
                       for e in s.events)]
    v.checks["no cross-tenant restore on any replica"] = not foreign
    quotes = _with(res, "cross_tenant/b-quotes-a-")
    v.checks["tenant b quoted tenant a's claim on every path"] = len(quotes) >= 3
    v.checks["each quote rejected, no host-tier read"] = all(
        r.one is not None and r.one.rejection() is not None and not r.one.read_host_tier
        for r in quotes)
    v.figures["quote_reasons"] = {r.sent.label: (r.one.rejection() or {}).get("reason")
                                  for r in quotes if r.one is not None}
    v.checks["fleet view: no_cross_tenant met"] = "no_cross_tenant" not in fleet.missing
    # the pair's other half: without it every check above also holds with caching off
    own = _once(_with(res, "cross_tenant/a-reuses-own"))
    v.checks["tenant a's own reuse restored from the host tier in the same run"] = bool(
        own) and all(x.restored_from_host for _, x in own)
    return v


def home_killed(res: Mapping[str, Resolved], killed: Mapping[str, int],
                fleet: FleetJudgement, withdrawals: Sequence[Withdrawal] = ()) -> Verdict:
    v = Verdict("home_killed")
    v.checks["the claim's home was SIGKILLed"] = bool(killed)
    rows = _with(res, "home_killed/reuse-after-kill-")
    answered = _once(rows)
    v.figures["attempts"] = len(rows)
    v.figures["statuses"] = [r.sent.status for r in rows]
    v.figures["errors_before_outcome"] = sorted({(r.sent.error or "")[:120] for r in rows
                                                 if r.sent.status != 200})
    first = answered[0] if answered else None
    rej = first[1].rejection_of(first[0].claim_id) if first is not None else None
    v.checks["the next claim-carrying request got a claim-scoped outcome"] = rej is not None
    v.checks["... on a surviving replica, 'not held'"] = (
        rej is not None and first is not None and first[1].replica not in killed
        and str(rej.get("reason", "")).startswith("not held"))
    if rej is not None and killed:
        v.figures["death_to_claim_outcome_ms"] = round(
            (int(rej.get("ts_ns", 0)) - min(killed.values())) / 1e6, 1)
    v.figures.update(death_timeline(killed, withdrawals))
    others = _with(res, "home_killed/others-after-kill-")
    others_once = _once(others)
    v.checks["every other claim of the dead home: 'not held' on a survivor"] = len(
        others_once) == len(others) and all(
        x.replica not in killed
        and str((x.rejection_of(s.claim_id) or {}).get("reason", "")).startswith("not held")
        for s, x in others_once)
    asked = {s.claim_id for s, _ in (*answered[:1], *others_once)}
    lost = {c.claim_id for c in fleet.harm}
    v.figures["lost_in_fleet_view"] = sorted(lost)
    v.checks["fleet view records every asked-for claim of the dead home as lost"] = (
        bool(asked) and asked <= lost)
    return v


def death_timeline(killed: Mapping[str, int],
                   withdrawals: Sequence[Withdrawal]) -> dict[str, Any]:
    """When, after the kill, the supervisor saw the killed worker's process gone and had its
    discovery records withdrawn (ms; absent when it saw nothing: the router then learns of
    the death from the discovery store's TTL alone)."""
    out: dict[str, Any] = {}
    for replica, t_kill in killed.items():
        w = next((w for w in withdrawals if w.replica == replica), None)
        if w is not None:
            out["death_seen_ms"] = round((w.exited_ns - t_kill) / 1e6, 1)
            out["discovery_withdrawn_ms"] = round((w.withdrawn_ns - t_kill) / 1e6, 1)
            out["records_withdrawn"] = len(w.records)
    return out


def fleet_gate(fleet: FleetJudgement) -> Verdict:
    v = Verdict("fleet_outcome gate")
    v.checks["fleet_outcome passed"] = bool(fleet.passed)
    v.figures["missing"] = list(fleet.missing)
    v.figures["claims"] = {c.claim_id: {"home": c.home, "status": c.status}
                           for c in fleet.claims}
    v.notes = [p.render() for p in fleet.problems[:8]]
    return v


def fleet_request(fleet: FleetJudgement, request_id: str) -> FleetRequest | None:
    return next((r for r in fleet.requests if r.request_id == request_id), None)


def _owner(s: Served) -> str | None:
    start = s.named("request_started")
    return start[0].get("owner_scope") if start else None


def judge_scenarios(sent: Sequence[Sent], traces: Mapping[str, Sequence[Event]],
                    paths: Mapping[str, Path], claims: Mapping[str, dict[str, Any]],
                    killed: Mapping[str, int], fleet: FleetJudgement,
                    observation: Any, failure: Any,
                    withdrawals: Sequence[Withdrawal] = ()) -> list[Verdict]:
    res = resolve(sent, traces)
    everything = served({}, None, traces)
    return [owner_restore(res, claims, paths, observation),
            not_held_elsewhere(res, fleet),
            cross_tenant(res, claims, everything, fleet),
            home_killed(res, killed, fleet, withdrawals),
            claimed_load_failure(res, paths, failure, fleet),
            fleet_gate(fleet)]


def claimed_load_failure(res: Mapping[str, Resolved], traces: Mapping[str, Path], failure: Any,
                         fleet: FleetJudgement) -> Verdict:
    """The routed reuse of a claim whose load fails on its home: refused, naming the claim."""
    v = Verdict("claimed_load_failure")
    reg, reuse = res.get("claimed_load_failure/register"), res.get("claimed_load_failure/reuse")
    home = _home(res, "claimed_load_failure/register")
    claim = reg.sent.claim_id if reg is not None else None
    v.checks["the claim was registered and offloaded on one replica"] = (
        reg is not None and reg.one is not None and claim is not None
        and bool(reg.one.named("claim_offloaded", claim)))
    s = reuse.one if reuse is not None else None
    v.checks["the routed reuse was served by the claim's home"] = (
        s is not None and home is not None and s.replica == home)
    v.checks[f"failure_outcome gate passes for {claim} on replica {home}'s stream"] = (
        home is not None and claim is not None and bool(failure(traces[home], claim)))
    row = fleet_request(fleet, s.request_id) if s is not None else None
    v.checks["fleet view: one decision naming the claim (refused)"] = (
        row is not None and row.passed and row.decision == "refused")
    if row is not None:
        v.figures["decision"] = row.decision
    return v
