"""The observation and failure chains of SPEC §4 / §4.1, one restore cycle at a time.

Each function takes one :class:`~residentkv.trace.semantics.stream.Cycle` and returns the seqs
of the deciding event(s) of one requirement, or None when the cycle does not meet it. A gate
passes only when one and the same cycle meets every requirement of its chain.
"""

from __future__ import annotations

from collections.abc import Callable

from residentkv.model.automaton import failed_load
from residentkv.model.vocabulary import Requirement as R
from residentkv.trace.requirements import Seqs
from residentkv.trace.semantics.stream import (
    ClaimView,
    Cycle,
    Event,
    first,
    injected_load_failure,
    seq_of,
)

Found = list[int] | None


def _first_offload(claim: ClaimView, before: int) -> Event | None:
    return first(claim.named("claim_offloaded"), lambda e: e.seq < before)


# ------------------------------------------------------------------------------ observation
def materialized(cy: Cycle) -> Found:
    """SPEC §2/§4.1: the accepted predicate held (evaluated on the event's numbers) before the
    restore this cycle serves."""
    m = cy.claim.materialized
    return [m.seq] if m is not None and m.seq < cy.seq else None


def offloaded(cy: Cycle) -> Found:
    """SPEC §4 observation: the claim was offloaded before its restore was required."""
    o = _first_offload(cy.claim, cy.seq)
    return None if o is None else [o.seq]


def store_succeeded(cy: Cycle) -> Found:
    """SPEC §4: "store to the host tier succeeded" — the claim's first successful
    ``kv_store_finished`` precedes its offload (when there is one) and this restore."""
    s = first(cy.claim.named("kv_store_finished"), lambda e: bool(e.success))
    o = _first_offload(cy.claim, cy.seq)
    if s is None or s.seq >= min(seq_of(o), cy.seq):
        return None
    return [s.seq]


def lookup_hit(cy: Cycle) -> Found:
    """SPEC §4: "lookup hit requiring a load" — a hit of its own for this restore: after the
    offload and the previous restore of the claim, before this one, and (SPEC §4.1: one and
    the same chain of the affected request) by the restoring request."""
    o = _first_offload(cy.claim, cy.seq)
    after = max(cy.prev, -1 if o is None else o.seq)
    hits = [e for e in cy.claim.named("kv_lookup") if e.hit_tokens > 0
            and after < e.seq < cy.seq and e.request_id == cy.request_id]
    return [hits[-1].seq] if hits else None


def restore_required(cy: Cycle) -> Found:
    """SPEC §3 lifecycle: the cycle's own ``claim_restore_required``."""
    return [cy.seq]


def load_success(cy: Cycle) -> Event | None:
    """The cycle's first successful load, while the claim was live, that the same job does not
    report invalid in the cycle (issue 10: a load reported successful whose blocks the same
    job then reports invalid is no successful load)."""
    # SPEC §4.2: kv_load_failed voids the job it names; without job_id, every successful load
    # of that request for the claim; one naming no claim, on the cycle's request, too; and a
    # job reported failed by its kv_load_finished did not succeed either
    failures = [f for f in (*cy.within("kv_load_failed"), *cy.unclaimed("kv_load_failed"))
                if f.invalid_block_ids]
    failures += [f for f in (*cy.within("kv_load_finished"), *cy.unclaimed("kv_load_finished"))
                 if not f.success]

    # and a failed load anywhere in the cycle voids the job its job_id names, whichever claim
    # and request it names
    jobs = {f.job_id for f in cy.claim.stream.events
            if cy.seq < f.seq < cy.stop and failed_load(f) and f.job_id is not None}

    def voided(load: Event) -> bool:
        return load.job_id in jobs or any(
            f.job_id == load.job_id or (f.job_id is None and f.request_id == cy.request_id)
            for f in failures)

    return first(cy.members("kv_load_finished"),
                 lambda e: bool(e.success) and e.seq < cy.claim.end and not voided(e))


def load_succeeded(cy: Cycle) -> Found:
    """SPEC §4 observation: "load succeeded"."""
    load = load_success(cy)
    return None if load is None else [load.seq]


def _restores(cy: Cycle) -> list[Event]:
    return [e for e in cy.members("claim_restored") if e.seq < cy.claim.end]


def restored_from_offload(cy: Cycle) -> Found:
    """SPEC §4: ``claim_restored(source=offload_tier)`` after the load, while the claim is
    live (SPEC §4.1: nothing is restored after the claim ended)."""
    load = load_success(cy)
    after = -1 if load is None else load.seq
    r = first(_restores(cy), lambda e: e.source == "offload_tier" and e.seq > after)
    return None if r is None else [r.seq]


def reused_after_restore(cy: Cycle) -> Found:
    """SPEC §4: ``claim_restored`` before ``claim_reused``, the reuse holding.

    Issue 10: no reuse of the cycle precedes the offload-tier restore (a reuse after a fallback
    restore and before the real one is no reuse after restore); no reuse after the claim ended;
    a reuse by a request of another ``owner_scope`` than the claim's is never a reuse of it.
    """
    restores = _restores(cy)
    if not restores:
        return None
    offload = first(restores, lambda e: e.source == "offload_tier")
    gate = (offload or restores[0]).seq
    reuses = cy.members("claim_reused")
    if any(e.seq < gate for e in reuses) or any(_foreign(cy.claim, e) for e in reuses):
        return None
    ok = first(reuses, lambda e: bool(e.holds) and restores[0].seq < e.seq < cy.claim.end)
    return None if ok is None else [ok.seq]


def _foreign(claim: ClaimView, reuse: Event) -> bool:
    """A reuse by a request whose declared owner scope is not the claim's."""
    accepted = claim.accepted
    mine = None if accepted is None or accepted.seq > reuse.seq else claim.scope
    theirs = claim.stream.owner_scope(reuse.request_id, reuse.seq)
    return mine is not None and theirs is not None and mine != theirs


def restore_content_verified(cy: Cycle) -> Found:
    """SPEC §4.2 (schema v1): when the store the restored copy came from (the claim's last
    successful ``kv_store_finished`` before the cycle) recorded a ``content_digest``, the
    offload-tier restore that counts carries ``content_verified: true``."""
    restored = restored_from_offload(cy)
    store = [e for e in cy.claim.named("kv_store_finished") if e.success and e.seq < cy.seq]
    digest = store[-1].content_digest if store else None
    if digest is None:
        return [] if restored is None else restored
    r = None if restored is None else first(cy.claim.own, lambda e: e.seq == restored[0])
    return restored if r is not None and r.content_verified is True else None


OBSERVATION_RULES: dict[R, Callable[[Cycle], Found]] = {
    R.MATERIALIZED: materialized,
    R.STORE_SUCCEEDED: store_succeeded,
    R.OFFLOADED: offloaded,
    R.LOOKUP_HIT: lookup_hit,
    R.RESTORE_REQUIRED: restore_required,
    R.LOAD_SUCCEEDED: load_succeeded,
    R.RESTORED_FROM_OFFLOAD: restored_from_offload,
    R.REUSED_AFTER_RESTORE: reused_after_restore,
    R.RESTORE_CONTENT_VERIFIED: restore_content_verified,
}


def observation_chain(cy: Cycle) -> Seqs:
    """The observation requirements this cycle meets."""
    return _met(OBSERVATION_RULES, cy)


def _met(rules: dict[R, Callable[[Cycle], Found]], cy: Cycle) -> Seqs:
    met: Seqs = {}
    for requirement, rule in rules.items():
        found = rule(cy)
        if found is not None:
            met[requirement] = found
    return met


# --------------------------------------------------------------------------------- failure
def load_failure(cy: Cycle) -> Event | None:
    """The cycle's first failure on the cycle's own request (SPEC §4.1: the affected request
    of a failure is the request whose restore of this claim failed): a failed load of the
    claim before the request's finish, else the runtime's failure branch (policy ``fail``)
    naming it or no claim: SPEC §4.3 lets the failed job's ``kv_load_failed`` be a late record
    after the finish (vLLM reports invalid blocks after it), so the branch can be the first
    sign of the failure."""
    if cy.request_id is None:
        return None
    load = first(cy.members("kv_load_finished", "kv_load_failed"),
                 lambda e: failed_load(e) and e.request_id == cy.request_id)
    branch = first(cy.claim.stream.events, lambda e: e.event == "scheduler_load_failure"
                   and cy.seq < e.seq < cy.stop and e.policy == "fail"
                   and e.request_id == cy.request_id and e.claim_id in (cy.claim.id, None))
    fin = cy.claim.stream.first_finish(cy.request_id)
    if load is not None and (fin is None or load.seq < fin.seq):
        return load  # the branch answers the failed load, so it follows it
    return branch or load


def failure_cycle(claim: ClaimView) -> Cycle | None:
    """The cycle of the claim's first failed load: the failure a failure_outcome judges.

    A later failure never makes up for an earlier one that did not become a claim-scoped
    outcome.
    """
    return next((cy for cy in claim.cycles if load_failure(cy) is not None), None)


def claim_load_failed(cy: Cycle) -> Found:
    """SPEC §4: "the load of *this claim* failed (``injected``)" on the affected request."""
    lf = load_failure(cy)
    if lf is None or cy.request_id is None:
        return None
    hit = first(cy.members("kv_load_finished", "kv_load_failed"),
                lambda e: injected_load_failure(e) and e.request_id == cy.request_id)
    return None if hit is None else [hit.seq]


def scheduler_failure_branch(cy: Cycle) -> Found:
    """SPEC §4: "the runtime's failure branch fired (``scheduler_load_failure``, policy
    ``fail``)" for the affected request, naming this claim or no claim."""
    lf = load_failure(cy)
    if lf is None:
        return None
    hit = first(cy.claim.stream.events, lambda e: e.event == "scheduler_load_failure"
                and e.seq >= lf.seq and e.policy == "fail" and e.request_id == cy.request_id
                and e.claim_id in (cy.claim.id, None))
    return None if hit is None else [hit.seq]


def restore_failed_scoped(cy: Cycle) -> Found:
    """SPEC §4: ``claim_restore_failed(outcome_claim_id == claim)`` — of this cycle's label and
    request, and the claim's first ending (nothing ended the claim before it failed closed)."""
    lf = load_failure(cy)
    if lf is None:
        return None
    f = first(cy.claim.named("claim_restore_failed"), lambda e: e.seq > lf.seq)
    if f is None or f.seq != cy.claim.end or f.outcome_claim_id != cy.claim.id:
        return None
    if f.generation != cy.label or f.request_id != cy.request_id:
        return None
    return [f.seq]


def attributed_refusal(cy: Cycle) -> Event | None:
    """SPEC §4 B4 / §4.1: the refusal of *the affected request*: ``outcome_claim_id == claim``,
    ``blocking_claim_ids == [claim]``, ``arbiter == scheduler_boundary``; an envelope that names
    another claim contradicts it. The first such refusal after the failed load is the one every
    later requirement is judged on."""
    lf = load_failure(cy)
    if lf is None:
        return None
    c = cy.claim.id
    return first(cy.claim.stream.events, lambda e: e.event == "active_request_refused"
                 and e.seq > lf.seq and e.request_id == cy.request_id
                 and e.outcome_claim_id == c and list(e.blocking_claim_ids) == [c]
                 and e.arbiter == "scheduler_boundary" and e.claim_id in (c, None))


def refusal_attributed(cy: Cycle) -> Found:
    """See :func:`attributed_refusal`."""
    ref = attributed_refusal(cy)
    return None if ref is None else [ref.seq]


def outcome_before_finish(cy: Cycle) -> Found:
    """SPEC §4.1: the attributed refusal (the same event) comes before the affected request's
    *first* ``request_finished``; a request that then finishes ``served`` contradicts it."""
    ref = attributed_refusal(cy)
    fin = cy.claim.stream.first_finish(cy.request_id)
    # a null status (imported traces) cannot show the request was not served
    if ref is None or fin is None or fin.seq < ref.seq or fin.status in ("served", None):
        return None
    return [ref.seq, fin.seq]


def no_restore_after_failure(cy: Cycle) -> Found:
    """SPEC §4: no ``claim_restored`` of the claim after the failure (fallback recompute is
    never satisfaction)."""
    lf = load_failure(cy)
    if lf is None or any(e.seq > lf.seq for e in cy.claim.named("claim_restored")):
        return None
    return []


FAILURE_RULES: dict[R, Callable[[Cycle], Found]] = {
    R.STORE_SUCCEEDED: store_succeeded,
    R.RESTORE_REQUIRED: restore_required,
    R.CLAIM_LOAD_FAILED: claim_load_failed,
    R.SCHEDULER_FAILURE_BRANCH: scheduler_failure_branch,
    R.RESTORE_FAILED_SCOPED: restore_failed_scoped,
    R.REFUSAL_ATTRIBUTED: refusal_attributed,
    R.OUTCOME_BEFORE_FINISH: outcome_before_finish,
    R.NO_RESTORE_AFTER_FAILURE: no_restore_after_failure,
}


def failure_chain(claim: ClaimView) -> Seqs:
    """The failure requirements met by the claim's failure cycle.

    Without any failed load, the best a cycle can show is its restore and an earlier store:
    the first cycle after the claim's first successful store (else the first cycle).
    """
    cy = failure_cycle(claim) or first(claim.cycles, lambda c: store_succeeded(c) is not None)
    cy = cy or first(claim.cycles)
    return {} if cy is None else _met(FAILURE_RULES, cy)


def best(chains: list[Seqs]) -> Seqs:
    """The chain meeting the most requirements (the first, on ties)."""
    chosen: Seqs = {}
    for chain in chains:
        if len(chain) > len(chosen):
            chosen = chain
    return chosen
