"""The streaming judges of the trace gates: each gate's answer from one pass's facts.

:class:`ClaimFacts` computes once what a claim's gates share (the common requirements, the
negative controls, the first illegal step); each gate's judge (one function per gate, named by
its :class:`~residentkv.trace.registry.Gate` record) adds what the gate itself asks. They are
the streaming form of :mod:`residentkv.trace.semantics.judges` and must agree with it.
"""

from __future__ import annotations

from residentkv.model.vocabulary import Control as C
from residentkv.model.vocabulary import Requirement as R
from residentkv.trace.requirements import (
    ATTRIBUTION_GATE,
    COMMON,
    CONFORMANCE_GATE,
    CONFORMANCE_SHARED,
    CONFORMANCE_UNACCEPTED,
    DEMOTABLE_PATH,
    EXPIRING_PATH,
    FAILURE,
    FAILURE_GATE,
    GENERATIONS_PATH,
    HARD_PROTECTED_PATH,
    OBSERVATION_GATE,
    Met,
    Seqs,
)
from residentkv.trace.results import IllegalStep, control_values, illegal_step
from residentkv.trace.tracker import ClaimTrack, StreamFacts


class ClaimFacts:
    """What the gates of one claim share, computed once."""

    __slots__ = ("claim_id", "common", "controls", "facts", "illegal", "settled", "t")

    def __init__(self, facts: StreamFacts, claim_id: str, well_formed: bool) -> None:
        self.facts = facts
        self.claim_id = claim_id
        self.t = t = facts.claims.get(claim_id) or ClaimTrack(claim_id)
        self.common: Seqs = _common(facts, t, well_formed) if t.claim_events else {}
        #: plain names; each result takes its own copy
        self.controls: dict[str, bool] = control_values(_controls(t))
        self.illegal: IllegalStep | None = illegal_step(t.run.violation)
        #: the first illegal step but those only the reading's stop made (conformance)
        self.settled: IllegalStep | None = illegal_step(t.run.settled)


def _common(facts: StreamFacts, t: ClaimTrack, well_formed: bool) -> Seqs:
    """SPEC §4 common requirements (see :mod:`residentkv.trace.semantics.rules`)."""
    identity = t.identity
    ok: Seqs = {R.CLAIM_EVENTS_PRESENT: [t.first_seq or 0]}
    if well_formed and facts.duplicate_finish is None and not facts.best_effort:
        ok[R.TRACE_WELL_FORMED] = []
    if identity.head_accepted and identity.accepted_seq is not None:
        ok[R.CLAIM_ACCEPTED_BEFORE_LIFECYCLE] = [identity.accepted_seq]
    if not identity.missing:
        ok[R.IDENTITY_COMPLETE] = []
    if not t.unstable():
        ok[R.STABLE_IDENTITY] = []
    p = identity.predicate
    if (p is not None and identity.first_predicate_id == p[0]
            and identity.required_values <= {p[2]}):
        ok[R.PREDICATE_FIXED] = [identity.accepted_seq or 0]
    if t.run.violation is None and not t.unpromised_loss():
        ok[R.LEGAL_TRANSITIONS] = []
    if facts.gap is None:
        ok[R.NO_OBSERVATION_GAP] = []
    if not t.failures.open_failure():
        ok[R.NO_OPEN_FAILURE] = []
    if not t.conflicts.smear:
        ok[R.NO_BLOCKING_SMEAR] = []
    return ok


def _controls(t: ClaimTrack) -> dict[C, bool]:
    """The negative controls, each from the events that concern the claim: they name it, or
    are on a request carrying it (see :mod:`residentkv.trace.semantics.rules`)."""
    identity, conflicts = t.identity, t.conflicts
    return {
        C.GENERIC_COUNTER_ONLY: conflicts.counter and not t.evidence,
        C.WRONG_CLAIM_FAILURE: conflicts.other_named,
        C.UNCLAIMED_FAILURE: conflicts.unnamed,
        C.FALLBACK_RECOMPUTE: t.failures.fallback,
        C.ORDINARY_OFFLOAD_WITHOUT_CLAIM: conflicts.unclaimed_store,
        # a claim its first decision rejected was named by that decision, not after the fact
        C.POST_HOC_NAMING: t.claim_events > 0 and not identity.head_rejected and not (
            identity.head_accepted and identity.accepted_seq is not None),
        C.RESTORE_AFTER_REUSE: t.life.restore_after_reuse,
        C.BLOCKING_CLAIM_SMEAR: conflicts.smear,
        C.AMBIGUOUS_IDENTITY: t.claim_events > 0 and t.unstable(),
        C.ADMISSION_REFUSAL: conflicts.admission,
    }


# ------------------------------------------------------------------------------- the gates
def observation(j: ClaimFacts) -> Met:
    """SPEC §4 observation: the claim's best restore cycle."""
    return {**j.common, **j.t.life.best}, OBSERVATION_GATE


def failure_outcome(j: ClaimFacts) -> Met:
    """SPEC §4 failure_outcome: the claim's failure cycle."""
    return {**j.common, **j.t.failure_requirements()}, FAILURE_GATE


def lifecycle(j: ClaimFacts) -> Met:
    """SPEC §4 lifecycle: the paths the claim's protection mode promises."""
    t = j.t
    found, path = _lifecycle(t)
    return {**j.common, **found}, (*COMMON, *path)


def attribution(j: ClaimFacts) -> Met:
    """SPEC §4 attribution: the failure outcome named only the target."""
    return {**j.common, **_attribution(j.facts, j.t, j.common)}, ATTRIBUTION_GATE


def conformance(j: ClaimFacts) -> Met:
    """SPEC §9.1 conformance: the claim's history is a legal run, decided once, every failure
    answered, every loss announced, nothing vanished, nothing in an unseen window; what is
    open where the reading stops is live, not failed."""
    t = j.t
    run, life = t.run, t.life
    found: Seqs = {r: j.common[r] for r in CONFORMANCE_SHARED if r in j.common}
    if run.settled is None and not t.unpromised_loss():
        found[R.LEGAL_TRANSITIONS] = []
    if not t.failures.settled_open_failure():
        found[R.NO_OPEN_FAILURE] = []
    if not run.decided_again:
        found[R.DECIDED_ONCE] = []
    if not run.vanished:
        found[R.NOT_VANISHED] = []
    if not t.unreported_loss(life.first_harm):
        found[R.LOSSES_ANNOUNCED] = []
    if not life.unseen:
        found[R.NO_UNSEEN_WINDOW] = []
    accepted = t.identity.accepted_seq is not None
    return found, CONFORMANCE_GATE if accepted else CONFORMANCE_UNACCEPTED


def _lifecycle(t: ClaimTrack) -> Met:
    """The lifecycle paths a claim's protection mode promises (SPEC §2, §4, §4.1).

    expiring / demotable: the release precedes every loss, no harm. hard_protected: resident,
    unharmed, and a conflicting active request refused or deferred naming exactly this live
    claim before that request's first finish. offloadable, soft_priority and the rest: a success
    cycle, then the failure cycle, no harm (SPEC §4: "both paths for one claim in one stream"
    for every mode but expiring and demotable; hard_protected keeps its conflict path).
    """
    life, identity = t.life, t.identity
    ok: Seqs = {}
    if life.first_harm is None and not t.unreported_loss():
        ok[R.NO_HARM] = []
    if life.materialized_seq is not None:
        ok[R.MATERIALIZED] = [life.materialized_seq]
    if identity.mode == "hard_protected":
        _conflict_attributed(t, ok)
        return ok, HARD_PROTECTED_PATH
    if identity.mode in ("expiring", "demotable"):
        key, event, path = ((R.EXPIRY_BEFORE_LOSS, "claim_expired", EXPIRING_PATH)
                            if identity.mode == "expiring"
                            else (R.DEMOTION_BEFORE_LOSS, "claim_demoted", DEMOTABLE_PATH))
        release = life.release_of.get(event)
        # no vacuous path (SPEC §4.2): the path starts with a materialization that holds
        held, lost = life.materialized_seq, life.first_loss
        if release is not None and held is not None and held < release and (
                lost is None or release < lost):
            ok[key] = [release]
        # the holding materialization is evidence of the path (B2 rests on it)
        return ok, path
    _generations(t, ok)
    return ok, GENERATIONS_PATH


def _conflict_attributed(t: ClaimTrack, ok: Seqs) -> None:
    conflicts = t.conflicts
    fin = conflicts.conflict_finish
    if conflicts.conflict is None or fin is None or conflicts.conflict_early:
        return
    if not (conflicts.conflict_refused and fin[1] == "served"):
        ok[R.CONFLICT_ATTRIBUTED] = [conflicts.conflict, fin[0]]


def _generations(t: ClaimTrack, ok: Seqs) -> None:
    life = t.life
    if life.full:
        ok[R.SUCCESS_GENERATION] = [life.full[0][0]]
    f = t.failures.failure
    if f is None or not f.requirements(f.cycle.before).keys() >= _FAIL_SET:
        return
    ok[R.FAILURE_GENERATION] = [f.cycle.seq]
    before = [s for s, label in f.prior_full if label != f.cycle.label]
    if before:
        ok[R.GENERATIONS_ORDERED] = [before[0], f.cycle.seq]


_FAIL_SET = frozenset(FAILURE) - {R.NO_BLOCKING_SMEAR}


class _Roster:
    """Stream-wide claim facts the attribution gate needs, computed once per stream."""

    def __init__(self, facts: StreamFacts) -> None:
        accepted = [c for c in facts.claims.values() if c.identity.accepted_seq is not None]
        self.count = len(accepted)
        self.first_seqs = sorted((c.identity.accepted_seq or 0, c.claim_id) for c in accepted)[:17]
        self.first_two = [s for s, _ in self.first_seqs[:2]]
        self.unserved = {c.claim_id for c in accepted if not c.served()}
        # SPEC §4.2: any other claim of the stream, accepted or not, needs a legal history
        self.unserved |= {cid for cid, t in facts.claims.items() if t.run.violation is not None}
        self.accepted = {c.claim_id for c in accepted}


def _roster(facts: StreamFacts) -> _Roster:
    # computed once per stream, after collection: facts no longer change
    if not isinstance(facts.derived.get("roster"), _Roster):
        facts.derived["roster"] = _Roster(facts)
    roster: _Roster = facts.derived["roster"]
    return roster


def _attribution(facts: StreamFacts, t: ClaimTrack, common: Seqs) -> Seqs:
    ok: Seqs = {}
    roster = _roster(facts)
    if roster.count >= 2:
        ok[R.MULTIPLE_CLAIMS] = roster.first_two
    failure = {**common, **t.failure_requirements()}
    if all(r in failure for r in FAILURE_GATE):
        ok[R.TARGET_FAILURE_OUTCOME] = sorted({s for v in failure.values() for s in v})
    if facts.failure_names == {t.claim_id} and not facts.failure_named_more:
        ok[R.FAILURES_NAME_ONLY_TARGET] = []
    others = roster.count - (t.claim_id in roster.accepted)
    unserved = roster.unserved  # whether any *other* claim is unserved, without a set copy
    if others and len(unserved) == (t.claim_id in unserved):
        # evidence: the acceptance seqs of (at most 16 of) the served non-targets
        ok[R.NON_TARGETS_SERVED] = [s for s, c in roster.first_seqs if c != t.claim_id][:16]
    return ok
