"""The requirements every gate shares, lifecycle, attribution and the negative controls.

Each rule is a predicate over one claim's view of the whole stream; its docstring cites the
SPEC sentence (or the issue 10 decision) it implements.
"""

from __future__ import annotations

from collections.abc import Callable

from residentkv.model.automaton import (
    DECIDED_AGAIN,
    LIVE,
    OUTCOME_ENDINGS,
    PRE,
    RELEASES,
    Violation,
    failed_load,
    substrate_failure,
)
from residentkv.model.claim import OUTCOME_BEFORE_LOSS
from residentkv.model.event_record import claim_names
from residentkv.model.events import IDENTITY_FIELDS
from residentkv.model.vocabulary import Arbiter, StopCause
from residentkv.model.vocabulary import Control as C
from residentkv.model.vocabulary import Requirement as R
from residentkv.trace.acceptor import ACCEPTED_FIELDS
from residentkv.trace.requirements import (
    CONFORMANCE_GATE,
    CONFORMANCE_SHARED,
    CONFORMANCE_UNACCEPTED,
    DEMOTABLE_PATH,
    EXPIRING_PATH,
    GENERATIONS_PATH,
    HARD_PROTECTED_PATH,
    Met,
    Seqs,
)
from residentkv.trace.semantics import legal
from residentkv.trace.semantics.chains import (
    FAILURE_RULES,
    OBSERVATION_RULES,
    Found,
    failure_chain,
    failure_cycle,
    observation_chain,
)
from residentkv.trace.semantics.stream import (
    NEVER,
    ClaimView,
    Cycle,
    Event,
    first,
    seq_of,
)


# ----------------------------------------------------------------------------------- common
def trace_well_formed(c: ClaimView) -> Found:
    """SPEC §3/§4.1: every line a valid v1 event; a second ``request_finished`` of one request
    is a well-formedness problem."""
    best_effort = any(e.event == "claim_accepted" and str(e.protection_mode) == "best_effort"
                      for e in c.stream.events)  # SPEC §4.2: a problem of that line
    return [] if c.stream.well_formed and c.stream.duplicate_finish is None and not (
        best_effort) else None


def claim_events_present(c: ClaimView) -> Found:
    """SPEC §4: "a trace with zero events of the claim fails every gate"."""
    return [c.claim_events[0].seq] if c.claim_events else None


def claim_accepted_before_lifecycle(c: ClaimView) -> Found:
    """SPEC §4: "accepted, pre-registered, before any other event of the claim"; §4.1: "no
    event of the claim (store included) precedes ``claim_accepted``" (an optional
    ``claim_submitted`` may)."""
    # SPEC §4.2: the carrying request's request_started may name the claim before acceptance
    # (the automaton checks that it is the carrier)
    head = first(c.own, lambda e: e.event not in ("claim_submitted", "request_started"))
    if head is None or head is not c.accepted or str(head.registration) != "pre_registered":
        return None
    return [head.seq]


def identity_complete(c: ClaimView) -> Found:
    """SPEC §3: claim events repeat the identity tuple; every claim event carries all four."""
    complete = all(getattr(e, f, None) is not None for e in c.claim_events
                   for f in IDENTITY_FIELDS)
    return [] if complete and c.claim_events else None


def stable_identity(c: ClaimView) -> Found:
    """SPEC §4: "each identity field takes exactly one value across the claim's events";
    §4.1: a second ``claim_accepted`` that changes any identity or predicate field is
    ``ambiguous_identity``."""
    for f in IDENTITY_FIELDS:
        if len({getattr(e, f, None) for e in c.claim_events} - {None}) > 1:
            return None
    accepts = c.named("claim_accepted")
    if any(_defining(a) != _defining(accepts[0]) for a in accepts[1:]):
        return None
    # SPEC §4.2: the claim's owner scope is on claim_accepted, else on claim_submitted; the
    # two differing is ambiguous_identity
    declared = {e.owner_scope for e in c.named("claim_submitted")} - {None}
    mine = accepts[0].owner_scope if accepts else None
    if (mine is not None and declared - {mine}) or (mine is None and len(declared) > 1):
        return None
    return []


def _defining(accepted: Event) -> tuple[object, ...]:
    fields = [getattr(accepted, f, None) for f in ACCEPTED_FIELDS]
    return tuple(_plain(v) for v in (*fields, accepted.predicate))


def _plain(value: object) -> object:
    """A comparable form of a field value (a nested predicate becomes its field tuple)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return tuple(str(getattr(value, k, None)) for k in ("id", "kind", "blocks", "start"))


def legal_transitions(c: ClaimView) -> Found:
    """SPEC §4.2: the claim's events, and the events of every request that names it, are a
    legal run of the automaton (:mod:`residentkv.model.automaton`, read over the whole list by
    :mod:`.legal`)."""
    illegal = legal.claim_violation(c.stream, c.id) is not None or unpromised_loss(c)
    return None if illegal else []


def no_observation_gap(c: ClaimView) -> Found:
    """Schema v1 ``observation_gap``: what the emitter did not see is unknown, and unknown is
    never a pass. Any gap in the stream leaves every claim's history possibly incomplete."""
    return None if any(e.event == "observation_gap" for e in c.stream.events) else []


def no_open_failure(c: ClaimView) -> Found:
    """SPEC §4.2–§4.3: every failure of the claim (a failed store or load, or a scheduler
    failure branch naming it) is answered by an outcome before its request's first finish (a
    refusal of that request naming the claim, or the mode's demotion, expiry or harm of it)
    and closed by its record (a ``claim_restore_failed`` of that request naming the claim) or
    by that ending; a later proper failure never makes up for an open one. A record of an
    answered failure opens none. SPEC §9.1: on a request its incarnation's death cut off, the
    claim's ending at the next stream's head answers it."""
    return None if any(True for _ in _open_failures(c)) else []


def _open_failures(c: ClaimView) -> list[tuple[Event, bool | None]]:
    """Each unanswered or unclosed failure of the claim, with whether the next stream's head
    answers it (None: the reading stopped in that head with the claim still open)."""
    found: list[tuple[Event, bool | None]] = []
    for lf in c.own:
        if not substrate_failure(lf) or _record(c, lf) or _closed(c, lf):
            continue
        answered = legal.head_answered(c.stream, c.id, lf.seq)
        if answered is not True:
            found.append((lf, answered))
    return found


def _record(c: ClaimView, failure: Event) -> bool:
    """SPEC §4.3: a ``kv_load_failed`` of the claim after an outcome answering it on its
    request (a refusal of the request naming the claim, or the mode's demotion, expiry or
    harm) that followed an earlier failure of the claim there: a record of the failure that
    outcome answered (it opens none)."""
    r = failure.request_id
    if failure.event != "kv_load_failed" or r is None:
        return False
    return any(_answers(c, o, r) and o.seq < failure.seq
               and any(substrate_failure(f) and f.request_id == r and f.seq < o.seq
                       for f in c.own)
               for o in c.stream.events)


def _ending_of(c: ClaimView, e: Event, r: str) -> bool:
    """The mode's demotion, expiry or harm of the claim, naming request *r* or none."""
    return e.event in OUTCOME_ENDINGS and e.claim_id == c.id and e.request_id in (r, None)


def _answers(c: ClaimView, e: Event, r: str) -> bool:
    """SPEC §4.3: an outcome that answers a failure of the claim on *r*: a refusal of *r*
    naming the claim, or the mode's demotion, expiry or harm of the claim."""
    if e.event == "active_request_refused":  # arbiter=harness never satisfies anything
        return e.request_id == r and e.outcome_claim_id == c.id and e.arbiter != Arbiter.HARNESS
    return _ending_of(c, e, r)


def _answer_deadline(c: ClaimView, failure: Event) -> int:
    """Where the failure's answer is due: its request's first finish, when that follows the
    failure (a store completion after the finish has none), else its stream's end."""
    fin = c.stream.first_finish(failure.request_id)
    if fin is not None and fin.seq > failure.seq:
        return fin.seq
    return c.stream.stream_stop(failure.seq)


def _answered(c: ClaimView, failure: Event) -> bool:
    r, deadline = failure.request_id, _answer_deadline(c, failure)
    return r is not None and any(failure.seq < e.seq < deadline and _answers(c, e, r)
                                 for e in c.stream.events)


def _closed(c: ClaimView, failure: Event) -> bool:
    """Answered in time, and followed by its record or by the claim's ending (in its
    stream)."""
    r, stream = failure.request_id, c.stream
    if r is None or not _answered(c, failure):
        return False
    stop = stream.stream_stop(failure.seq)
    return any(failure.seq < e.seq < stop and (_ending_of(c, e, r) or (
        e.event == "claim_restore_failed" and e.claim_id == c.id
        and e.outcome_claim_id == c.id and e.request_id == r)) for e in stream.events)


def _missed(c: ClaimView, failure: Event) -> bool:
    """Its request finished (after it) with no outcome answering it, or it names none: it
    can never be closed."""
    if failure.request_id is None:
        return True
    fin = c.stream.first_finish(failure.request_id)
    return fin is not None and fin.seq > failure.seq and not _answered(c, failure)


def settled_open_failure(c: ClaimView) -> bool:
    """SPEC §9.1: an unanswered failure that stays so whatever follows the reading's stop. One
    may still be answered or closed while the claim is open (accepted, not ended) and, in the
    stream the reading stopped in, its request has not finished without answering it (SPEC
    §4.3: the record of an answered failure may come after the finish), or the reading
    stopped in the head where the claim's ending would answer it."""
    stream = c.stream
    live = legal.phase_at(stream, c.id, NEVER) in LIVE
    for lf, answered in _open_failures(c):
        if answered is None and live:
            continue
        last = stream.stream_of(lf.seq) == len(stream.spans) - 1
        if live and last and stream.last_open and not _missed(c, lf):
            continue
        return True
    return False


def no_blocking_smear(c: ClaimView) -> Found:
    """SPEC §4 control ``blocking_claim_smear``: a refusal (or a blaming deferral) that names
    this claim blocks exactly it; a smeared one leaves the claim's outcome unexplained."""
    return None if any(_smears(c, e) for e in c.stream.events) else []


def predicate_fixed(c: ClaimView) -> Found:
    """SPEC §4 ``predicate_fixed``: the accepted predicate is the claim's ``predicate_id`` and
    every materialization is judged against its size."""
    a = c.accepted
    if a is None:
        return None
    ids = [e.predicate_id for e in c.claim_events if getattr(e, "predicate_id", None) is not None]
    if not ids or ids[0] != a.predicate.id:
        return None
    if any(e.required != a.predicate.blocks for e in c.named("claim_materialized")):
        return None
    return [a.seq]


COMMON_RULES: dict[R, Callable[[ClaimView], Found]] = {
    R.TRACE_WELL_FORMED: trace_well_formed,
    R.CLAIM_EVENTS_PRESENT: claim_events_present,
    R.CLAIM_ACCEPTED_BEFORE_LIFECYCLE: claim_accepted_before_lifecycle,
    R.IDENTITY_COMPLETE: identity_complete,
    R.STABLE_IDENTITY: stable_identity,
    R.PREDICATE_FIXED: predicate_fixed,
    R.LEGAL_TRANSITIONS: legal_transitions,
    R.NO_OBSERVATION_GAP: no_observation_gap,
    R.NO_OPEN_FAILURE: no_open_failure,
    R.NO_BLOCKING_SMEAR: no_blocking_smear,
}


def met(rules: dict[R, Callable[[ClaimView], Found]], c: ClaimView) -> Seqs:
    found: Seqs = {}
    for requirement, rule in rules.items():
        seqs = rule(c)
        if seqs is not None:
            found[requirement] = seqs
    return found


# ------------------------------------------------------------------------- chains as gates
def observation(c: ClaimView) -> Seqs:
    """SPEC §4 observation: the cycle meeting most of the chain (the first, on ties)."""
    chosen: Seqs = {}
    for cy in c.cycles:
        chain = observation_chain(cy)
        if len(chain) > len(chosen):
            chosen = chain
    return chosen


def failure(c: ClaimView) -> Seqs:
    """SPEC §4 failure_outcome, judged on the claim's failure cycle."""
    return failure_chain(c)


# ------------------------------------------------------------------------------- lifecycle
def _unreported_loss(c: ClaimView, reports: tuple[str, ...]) -> Event | None:
    """The first loss not preceded by one of *reports* or a release of the claim."""
    told = seq_of(first(c.claim_events, lambda e: e.event in reports or e.event in RELEASES))
    return first(c.losses, lambda e: e.seq < told)


def no_harm(c: ClaimView) -> Found:
    """SPEC §2: loss of an accepted, materialized, unreleased claim is harm — reported
    (``claim_harmed``) or observed (§4.1: an eviction of a needed position, an evaluation
    that no longer holds) before any release."""
    if c.named("claim_harmed") or _unreported_loss(c, ()):
        return None
    return []


def lifecycle_materialized(c: ClaimView) -> Found:
    """SPEC §2: the claim materialized (the predicate evaluated on real positions)."""
    return None if c.materialized is None else [c.materialized.seq]


def release_before_loss(c: ClaimView, event: str) -> Found:
    """SPEC §2: ``expiring``/``demotable`` — the expiry/demotion precedes every loss."""
    release = first(c.named(event))
    if release is None or any(e.seq < release.seq for e in c.losses):
        return None
    # no vacuous path (SPEC §4.2): the path starts with a materialization that holds
    if c.materialized is None or c.materialized.seq > release.seq:
        return None
    return [release.seq]


def conflict_attributed(c: ClaimView) -> Found:
    """SPEC §2 ``hard_protected`` / §4.1: an active request that does not fit is refused or
    deferred naming exactly this claim (``outcome_claim_id`` and ``blocking_claim_ids``),
    while the claim is resident and live (materialized, not harmed, not ended), before that
    request's first finish (a refused request that then finishes ``served`` contradicts it).
    The claim's own restore failure is no capacity conflict."""
    x = first(c.stream.events, lambda e: _conflict(c, e))
    fin = None if x is None else c.stream.first_finish(x.request_id)
    if x is None or fin is None or fin.seq < x.seq:
        return None
    if x.event == "active_request_refused" and fin.status == "served":
        return None
    return [x.seq, fin.seq]


def _conflict(c: ClaimView, e: Event) -> bool:
    if e.event == "active_request_refused":
        # SPEC §4.1/§4.2: the envelope names the outcome's claim (a null envelope is no
        # match: "an outcome event's envelope claim_id equals its outcome_claim_id"); a
        # harness never satisfies a requirement
        if e.outcome_claim_id != c.id or e.claim_id != c.id or e.arbiter == Arbiter.HARNESS:
            return False
    elif e.event != "active_request_deferred":
        return False
    if list(e.blocking_claim_ids) != [c.id] or c.materialized is None:
        return False
    harmed = seq_of(first(c.named("claim_harmed")))
    own_failure = c.failed_on(e.request_id, e.seq)
    return c.materialized.seq < e.seq < min(c.end, harmed) and not own_failure


def generations(c: ClaimView) -> Seqs:
    """SPEC §4 lifecycle (offloadable): a complete success cycle, then the failure cycle, the
    two with distinct generation labels (labels need only be distinct; seq orders)."""
    found: Seqs = {}
    full = [cy for cy in c.cycles if observation_chain(cy).keys() >= OBSERVATION_RULES.keys()]
    fail_cy = failure_cycle(c)
    failed = fail_cy is not None and failure_chain(c).keys() >= FAILURE_RULES.keys()
    if full:
        found[R.SUCCESS_GENERATION] = [full[0].seq]
    if failed and fail_cy is not None:
        found[R.FAILURE_GENERATION] = [fail_cy.seq]
        before = [cy for cy in full if cy.seq < fail_cy.seq and cy.label != fail_cy.label]
        if before:
            found[R.GENERATIONS_ORDERED] = [before[0].seq, fail_cy.seq]
    return found


def lifecycle(c: ClaimView) -> tuple[Seqs, tuple[R, ...]]:
    """The lifecycle paths the claim's protection mode promises, and which requirements apply.

    expiring / demotable: the release precedes every loss, no harm. hard_protected: resident,
    unharmed, and a conflict refused naming exactly this claim. offloadable, soft_priority and
    the rest: a success cycle, then a failure cycle, no harm.
    """
    found: Seqs = {}
    for key, rule in ((R.NO_HARM, no_harm), (R.MATERIALIZED, lifecycle_materialized)):
        seqs = rule(c)
        if seqs is not None:
            found[key] = seqs
    if c.mode == "hard_protected":
        _put(found, R.CONFLICT_ATTRIBUTED, conflict_attributed(c))
        return found, HARD_PROTECTED_PATH
    if c.mode in ("expiring", "demotable"):
        key, event, path = ((R.EXPIRY_BEFORE_LOSS, "claim_expired", EXPIRING_PATH)
                            if c.mode == "expiring"
                            else (R.DEMOTION_BEFORE_LOSS, "claim_demoted", DEMOTABLE_PATH))
        _put(found, key, release_before_loss(c, event))
        # the holding materialization is evidence of the path (B2 rests on it)
        return found, path
    found.update(generations(c))
    return found, GENERATIONS_PATH


def unpromised_loss(c: ClaimView) -> bool:
    """SPEC §4.1: a loss must be preceded by the outcome the claim's mode promises (harm
    reported for ``soft_priority``; expiry, demotion or a release for ``expiring`` and
    ``demotable``; never for ``hard_protected``, so a reported harm is loss there too). One
    that is not is an illegal step of the claim's history, in every gate (§4.2). An
    ``offloadable`` claim promises a stored copy, judged by the chains, not an outcome.
    SPEC §9.1: the harm a stopped process reports (``engine_restarted``, ``shutdown``) ends
    the claim, announced; it is no loss the mode failed to announce."""
    if c.mode == "soft_priority":
        return _unreported_loss(c, ("claim_harmed",)) is not None
    if c.mode in OUTCOME_BEFORE_LOSS:
        if any(not _stop_harm(e) for e in c.named("claim_harmed")):
            return True
        told = seq_of(first(c.claim_events, lambda e: e.event in RELEASES or (
            e.event == "claim_harmed" and _stop_harm(e))))
        return first(c.losses, lambda e: e.seq < told) is not None
    return False


def _stop_harm(e: Event) -> bool:
    """A harm reported because the process that held the claim stopped (SPEC §9.1)."""
    return e.cause in _STOP_CAUSES


_STOP_CAUSES = frozenset(cause.value for cause in StopCause)


def _put(found: Seqs, key: R, seqs: Found) -> None:
    if seqs is not None:
        found[key] = seqs


# ----------------------------------------------------------------------------- attribution
def multiple_claims(c: ClaimView) -> Found:
    """SPEC §4 attribution: "several claims in one stream" — at least two accepted claims."""
    accepted = c.stream.accepted_claims
    if len(accepted) < 2:
        return None
    return sorted(seq_of(first(ClaimView(c.stream, a).named("claim_accepted")))
                  for a in accepted[:2])


def failures_name_only_target(c: ClaimView) -> Found:
    """SPEC §4.1: any failure or outcome event (store/load failure, restore failure, refusal,
    demotion, expiry, harm) that names a non-target, or names no claim, fails; an outcome
    event's envelope ``claim_id`` equals its ``outcome_claim_id``. No vacuous truth: at least
    one failure must name the target."""
    failures = c.stream.failures
    if not failures or any(any(n != c.id for n in names) for _, names in failures):
        return None
    return []


def served(other: ClaimView) -> bool:
    """SPEC §4 attribution: a non-target is restored/served or untouched — no harm, no failed
    load, no restore failure, no unreported loss, and every restore cycle restored from the
    offload tier."""
    if other.named("claim_harmed", "claim_restore_failed") or _unreported_loss(other, ()):
        return False
    if any(failed_load(e) for e in other.own):
        return False
    # SPEC §4.2: a non-target passes only with a legal history of its own, and a request that
    # carries it and finishes other than served without an outcome naming it is spill-over
    if legal.claim_violation(other.stream, other.id) is not None or _unexplained_carrier(other):
        return False
    if stable_identity(other) is None:  # "every rule above": its identity too
        return False
    return all(OBSERVATION_RULES[R.RESTORED_FROM_OFFLOAD](cy) is not None
               for cy in other.cycles)


def _unexplained_carrier(other: ClaimView) -> bool:
    """A request carrying the claim (:attr:`ClaimView.carriers`) finishes other than served,
    or never finishes, with no failure or outcome on it naming the claim after it began to
    carry it."""
    for rid, since in other.carriers.items():
        fin = other.stream.first_finish(rid)
        if fin is not None and (fin.seq < since or fin.status == "served"):
            continue
        until = NEVER if fin is None else fin.seq  # one that never finishes is not shown served
        if not any(e.request_id == rid and since <= e.seq < until and other.id in names
                   for e, names in other.stream.failures):
            return True
    return False


def non_targets_served(c: ClaimView) -> Found:
    """SPEC §4 attribution: "non-targets are restored/served or untouched"."""
    others = [ClaimView(c.stream, a) for a in c.stream.accepted_claims if a != c.id]
    if not others or not all(served(o) for o in others):
        return None
    # SPEC §4.2: any other claim of the stream, accepted or not, needs a legal history
    named = claim_names(*(e.claim_id for e in c.stream.events)) - {c.id}
    if any(legal.claim_violation(c.stream, o) is not None for o in named):
        return None
    return sorted(seq_of(o.accepted) for o in others)[:16]


def target_failure_outcome(c: ClaimView, failure_met: Seqs) -> list[int]:
    """SPEC §4 attribution: "the target passes failure_outcome"."""
    return sorted({s for v in failure_met.values() for s in v})


# ----------------------------------------------------------------------------- conformance
def conformance(c: ClaimView, common: Seqs) -> Met:
    """SPEC §9.1: the claim's history is a legal run (§4.2–4.3), decided once, every failure
    answered, every loss announced, it did not vanish, and no unseen window fell while it was
    open. What the reading's stop left open is live, not failed: legality and open failures are
    judged without it."""
    found: Seqs = {r: common[r] for r in CONFORMANCE_SHARED if r in common}
    stream = c.stream
    if legal.claim_violation(stream, c.id, settled=True) is None and not unpromised_loss(c):
        found[R.LEGAL_TRANSITIONS] = []
    if not settled_open_failure(c):
        found[R.NO_OPEN_FAILURE] = []
    steps = legal.claim_found(stream, c.id)
    if not any(step.violation in DECIDED_AGAIN for step, _ in steps):
        found[R.DECIDED_ONCE] = []
    if not any(done and step.violation is Violation.VANISHED for step, done in steps):
        found[R.NOT_VANISHED] = []
    if _unreported_loss(c, ("claim_harmed",)) is None:
        found[R.LOSSES_ANNOUNCED] = []
    if not unseen(c):
        found[R.NO_UNSEEN_WINDOW] = []
    return found, CONFORMANCE_GATE if c.accepted is not None else CONFORMANCE_UNACCEPTED


def unseen(c: ClaimView) -> bool:
    """SPEC §9.1 "nothing inside an unseen window": an ``observation_gap`` while the claim was
    open — accepted and not ended, or named in the gap's stream and not decided yet."""
    stream = c.stream
    for gap in stream.events:
        if gap.event != "observation_gap":
            continue
        state = legal.phase_at(stream, c.id, gap.seq)
        if state in LIVE:
            return True
        start = stream.stream_start(gap.seq)
        if state in PRE and any(e.event in ("request_started", "claim_submitted")
                                and start < e.seq < gap.seq for e in c.own):
            return True
    return False


def live(c: ClaimView) -> bool:
    """SPEC §9.1: the claim is open where the reading stopped, in a stream with no close —
    accepted and not ended, named and not decided yet, or named by a request whose failure
    chain has not finished — and did not vanish before."""
    stream = c.stream
    vanished = any(done and step.violation is Violation.VANISHED
                   for step, done in legal.claim_found(stream, c.id))
    if not stream.last_open or vanished:  # a vanished claim's promise is already broken
        return False
    state = legal.phase_at(stream, c.id, NEVER)
    if state in LIVE:
        return True
    if any(not done for step, done in legal.claim_found(stream, c.id)
           if step.violation is Violation.NEVER_DECIDED):
        return True
    return any(legal.request_cut_live(stream, rid)
               for rid in legal.requests_naming(stream, c.id))


# -------------------------------------------------------------------------------- controls
def controls(c: ClaimView) -> dict[C, bool]:
    """The negative controls of SPEC §4, as facts of the stream for this claim."""
    # each from the events that concern the claim: they name it, or are on a request
    # carrying it (a failure elsewhere, naming only its own claim, is no fact about this one)
    mine = [(e, names) for e, names in c.stream.failures if c.id in names or c.carries(e)]
    return {
        C.GENERIC_COUNTER_ONLY: _generic_only(c),
        C.WRONG_CLAIM_FAILURE: any(n is not None and n != c.id
                                   for _, names in mine for n in names),
        C.UNCLAIMED_FAILURE: any(all(n is None for n in names) for _, names in mine),
        C.FALLBACK_RECOMPUTE: _fallback(c),
        C.ORDINARY_OFFLOAD_WITHOUT_CLAIM: any(
            e.event == "kv_store_finished" and e.success and e.claim_id is None
            and c.carries(e) for e in c.stream.events),
        C.POST_HOC_NAMING: bool(c.claim_events) and claim_accepted_before_lifecycle(c) is None
        and not _rejected_first(c),
        C.RESTORE_AFTER_REUSE: any(_reuse_before_restore(cy) for cy in c.cycles),
        C.BLOCKING_CLAIM_SMEAR: any(_smears(c, e) for e in c.stream.events),
        C.AMBIGUOUS_IDENTITY: bool(c.claim_events) and stable_identity(c) is None,
        C.ADMISSION_REFUSAL: any(
            e.event == "active_request_refused" and c.id in _refusal_names(e)
            and e.arbiter == "admission" for e in c.stream.events),
    }


def _rejected_first(c: ClaimView) -> bool:
    """The claim's first event beyond its submission and its carrier's start rejects it: it was
    named by that decision, not after the fact (control ``post_hoc_naming`` stays quiet)."""
    head = first(c.own, lambda e: e.event not in ("claim_submitted", "request_started"))
    return head is not None and head.event == "claim_rejected"


def _generic_only(c: ClaimView) -> bool:
    """A generic counter that concerns the claim (names it, or is on a request carrying it),
    and no evidence of the claim beyond its acceptance."""
    return any(e.event == "generic_counter" and (e.claim_id == c.id or c.carries(e))
               for e in c.stream.events) and all(e.event in _NO_EVIDENCE for e in c.own)


_NO_EVIDENCE = frozenset({"claim_submitted", "claim_accepted", "request_started",
                          "generic_counter"})


def _smears(c: ClaimView, e: Event) -> bool:
    """A refusal, or a deferral that blames claims, naming this claim but not blocking on
    exactly it."""
    if e.event == "active_request_deferred" and not e.blocking_claim_ids:
        return False
    if e.event not in ("active_request_refused", "active_request_deferred") or (
            c.id not in _refusal_names(e)):
        return False
    # a refusal blocks exactly its outcome claim
    outcome = e.outcome_claim_id if e.event == "active_request_refused" else c.id
    return list(e.blocking_claim_ids) != [c.id] or outcome != c.id


def _refusal_names(e: Event) -> set[str | None]:
    if e.event == "active_request_deferred":
        return {e.claim_id, *e.blocking_claim_ids}
    return {e.claim_id, e.outcome_claim_id, *e.blocking_claim_ids}


def _fallback(c: ClaimView) -> bool:
    """A fallback recompute of this claim: a ``claim_restored(source=fallback_recompute)``, or
    the scheduler's ``recompute`` branch naming the claim, or naming no claim on a request
    whose load of it had failed."""
    if any(e.source == "fallback_recompute" for e in c.named("claim_restored")):
        return True
    return any(e.event == "scheduler_load_failure" and e.policy == "recompute" and (
        e.claim_id == c.id or (e.claim_id is None and c.failed_on(e.request_id, e.seq)))
        for e in c.stream.events)


def _reuse_before_restore(cy: Cycle) -> bool:
    """A reuse of a cycle before any restore of it (SPEC §4 control ``restore_after_reuse``)."""
    restored = seq_of(first(cy.members("claim_restored")))
    return any(e.seq < restored for e in cy.members("claim_reused"))
