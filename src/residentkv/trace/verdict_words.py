"""Why a gate failed, in the user's words: the first thing that decides the verdict.

A failed gate result lists every requirement id it misses, and some of them are missing only
because something earlier never happened: a trace with no restore cycle misses
``materialized``, ``store_succeeded`` and ``offloaded`` for ``observation`` although those
events are there (they count only inside a restore cycle). :func:`first_cause` reads the result
and a few facts of the claim (:class:`ClaimStory`, what happened to it in the stream) and says
the one thing the user has to change or look at first: "no restore cycle of c-1 in this trace:
observation needs one". Pure: no reading, no judging (the gates decided; this only words it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from residentkv.model.vocabulary import Requirement as R
from residentkv.trace.semantics.why import why_missing
from residentkv.trace.tracker import StreamFacts

__all__ = ["ClaimStory", "claim_stories", "first_cause"]


@dataclass(frozen=True, slots=True)
class ClaimStory:
    """What happened to one claim in one stream: the seq of each first time, or None."""

    accepted: int | None = None
    registration: str | None = None
    mode: str | None = None
    materialized: int | None = None  # the first materialization that proves the predicate
    stored: int | None = None
    offloaded: int | None = None
    restores: int = 0  # restore cycles begun while the claim was live
    first_restore: int | None = None
    failed_load: int | None = None  # the failed load that opened the claim's failure cycle
    lost: int | None = None  # a needed block lost after materializing
    harmed: int | None = None
    released: int | None = None  # released, expired or demoted
    ended: int | None = None
    gap: int | None = None  # the stream's first observation_gap


def claim_stories(facts: StreamFacts, claim_ids: set[str]) -> dict[str, ClaimStory]:
    """The story of each of *claim_ids* (those with a failed result) from one stream's facts."""
    out = {}
    for cid in claim_ids:
        t = facts.claims.get(cid)
        if t is None:
            continue
        life, ident, failure = t.life, t.identity, t.failures.failure
        out[cid] = ClaimStory(
            accepted=ident.accepted_seq, registration=ident.registration, mode=ident.mode,
            materialized=life.materialized_seq, stored=life.store_seq,
            offloaded=life.offload_seq, restores=life.cycles,
            first_restore=life.first_cycle.seq if life.first_cycle is not None else None,
            failed_load=failure.cycle.failed_load if failure is not None else None,
            lost=life.first_loss, harmed=life.first_harm, released=life.first_release,
            ended=life.end_seq, gap=facts.gap)
    return out


#: what each mode promises before a loss (the outcome a loss needs first)
_PROMISE = {"soft_priority": "a harm reported before any loss",
            "expiring": "its expiry before any loss", "demotable": "its demotion before any loss",
            "hard_protected": "no loss at all"}

Cause = Callable[[str, "ClaimStory", Mapping[str, Any]], str | None]


def first_cause(result: Mapping[str, Any], story: ClaimStory | None) -> str:
    """The first thing that decides a failed gate result (the JSON form of a
    :class:`~residentkv.trace.results.GateResult`), in the user's words; ``""`` for a pass."""
    if result["passed"]:
        return ""
    missing = set(result["missing"])
    claim, gate = result["claim_id"], result["gate"]
    s = story or ClaimStory()
    for req in _ORDER.get(gate, ()) + tuple(sorted(missing)):
        if req not in missing:
            continue
        words = _WORDS.get(req)
        said = words(claim, s, result) if words is not None else None
        return said or f"{claim}: {req}: {why_missing(req)}"
    return f"{claim} does not pass {gate}"


# ------------------------------------------------------------------------- the common ones
def _gap(c: str, s: ClaimStory, r: Mapping[str, Any]) -> str:
    at = f" at seq {s.gap}" if s.gap is not None else ""
    return (f"the stream has an observation gap{at}: what happened in it is unknown, so it "
            f"shows nothing of {c}")


def _registered(c: str, s: ClaimStory, r: Mapping[str, Any]) -> str:
    if s.accepted is None:
        return (f"{c} was never accepted in this trace (no claim_accepted): a claim is "
                "registered before anything else of it")
    if s.registration == "post_hoc":
        return (f"{c} was registered post hoc (claim_accepted at seq {s.accepted}): only a "
                "pre-registered claim binds its identity")
    return (f"an event of {c} comes before its claim_accepted at seq {s.accepted}: a claim is "
            "registered before anything else of it")


def _legal(c: str, s: ClaimStory, r: Mapping[str, Any]) -> str | None:
    step = r.get("illegal")
    said = (f"seq {step['seq']}: {step['event']} is not allowed while {c} is {step['state']} "
            f"({step['violation']}: {step['why']})") if step else None
    if step and step["violation"] == "vanished":
        stop = ("its stream closed" if step["event"] == "stream_closed"
                else "its engine's next incarnation started")
        return (f"{c} vanished: it was still {step['state']} when {stop} (seq {step['seq']}) "
                "and no outcome ended it; a claim held at a stop ends with one naming it")
    if s.lost is not None and s.mode in _PROMISE and (not step or s.lost < step["seq"]):
        # the loss is what put the claim where the step was refused: say it first
        loss = (f"{c} lost a needed block at seq {s.lost} and nothing said so first: "
                f"{s.mode} promises {_PROMISE[s.mode]}")
        return f"{loss}; then {said}" if said else loss
    return said


def _smear(c: str, s: ClaimStory, r: Mapping[str, Any]) -> str:
    return (f"a refusal or deferral naming {c} blocks other claims too, or not {c} "
            f"(blocking_claim_ids is not exactly [{c}]): the control blocking_claim_smear "
            "fired")


# --------------------------------------------------------------------------- observation
def _so_far(c: str, s: ClaimStory) -> str:
    seen = [f"{what} at seq {seq}" for what, seq in (
        ("materialized", s.materialized), ("stored", s.stored), ("offloaded", s.offloaded))
        if seq is not None]
    return f" ({c} {', '.join(seen)}; no request restored it)" if seen else ""


def _never_materialized(c: str, r: Mapping[str, Any]) -> str:
    return (f"{c} never materialized in this trace (no claim_materialized whose numbers prove "
            f"its predicate): {r['gate']} needs it materialized first")


def _no_cycle(c: str, s: ClaimStory, r: Mapping[str, Any]) -> str | None:
    if r["gate"] == "failure_outcome":
        return _no_failure(c, s, r)
    if s.materialized is None:
        return _never_materialized(c, r)
    if s.restores == 0:
        return (f"no restore cycle of {c} in this trace: {r['gate']} needs one"
                + _so_far(c, s))
    return (f"no restore of {c} while it was live (it ended at seq {s.ended}): {r['gate']} "
            "needs a restore cycle of the live claim")


def _in_cycle(req: R) -> Cause:
    def words(c: str, s: ClaimStory, r: Mapping[str, Any]) -> str:
        where = (f"{c}'s restore cycle at seq {s.first_restore}" if s.restores == 1
                 else f"none of the {s.restores} restore cycles of {c}")
        return f"{where}: {why_missing(req)}"
    return words


def _materialized(c: str, s: ClaimStory, r: Mapping[str, Any]) -> str | None:
    if s.materialized is None:
        return _never_materialized(c, r)
    return _in_cycle(R.MATERIALIZED)(c, s, r)


def _load(c: str, s: ClaimStory, r: Mapping[str, Any]) -> str | None:
    if s.failed_load is not None:
        return (f"{c}'s restore did not load: its load failed at seq {s.failed_load}; "
                "observation needs a successful load, then a restore from the offload tier "
                "and a reuse")
    return _in_cycle(R.LOAD_SUCCEEDED)(c, s, r)


# ----------------------------------------------------------------------- failure_outcome
def _no_failure(c: str, s: ClaimStory, r: Mapping[str, Any]) -> str | None:
    if s.restores == 0:
        return (f"no restore of {c} was attempted in this trace, so none failed: "
                f"{r['gate']} needs a controlled failure of its restore")
    if s.failed_load is None:
        return (f"no load of {c} failed in this trace: {r['gate']} needs a controlled "
                "(injected) failure of its restore")
    return None


# ------------------------------------------------------------------------------ lifecycle
def _harm(c: str, s: ClaimStory, r: Mapping[str, Any]) -> str | None:
    if s.harmed is not None:
        return f"{c} was harmed at seq {s.harmed}: lifecycle allows no harm"
    if s.lost is not None:
        return f"{c} lost a needed block at seq {s.lost} before any release"
    return None


def _success(c: str, s: ClaimStory, r: Mapping[str, Any]) -> str:
    needs = (f"lifecycle ({s.mode or 'its mode'}) needs a restore cycle that meets the whole "
             "observation chain, then a failure cycle")
    if s.restores == 0:
        return f"no restore cycle of {c} in this trace: {needs}" + _so_far(c, s)
    if s.restores == 1 and s.failed_load is not None:
        return (f"{c}'s only restore cycle (seq {s.first_restore}) is its failure (load failed "
                f"at seq {s.failed_load}): {needs}")
    return (f"none of the {s.restores} restore cycles of {c} meets the whole observation chain "
            f"(gate observation says what is missing): {needs}")


def _alone(c: str, s: ClaimStory, r: Mapping[str, Any]) -> str:
    return (f"{c} is the only claim accepted in this stream: attribution needs the target and "
            "at least one other claim")


def _target(c: str, s: ClaimStory, r: Mapping[str, Any]) -> str:
    return (_no_failure(c, s, r) or f"{c} does not pass failure_outcome (that gate says why): "
            "attribution needs its target's failure answered by a refusal naming it")


def _failure_cycle(c: str, s: ClaimStory, r: Mapping[str, Any]) -> str | None:
    if s.failed_load is None:
        return (f"no failed restore of {c} in this trace: lifecycle ({s.mode or 'its mode'}) "
                "needs, after a successful restore cycle, a failure cycle answered by a refusal "
                f"naming {c}")
    return None


def _release_before_loss(event: str) -> Cause:
    def words(c: str, s: ClaimStory, r: Mapping[str, Any]) -> str:
        if s.lost is not None:
            return f"{c} lost a needed block at seq {s.lost} before any {event}"
        return (f"no {event} of {c} in this trace: lifecycle ({s.mode}) needs it after "
                "the claim materialized and before any loss")
    return words


_WORDS: dict[str, Cause] = {
    R.NO_OBSERVATION_GAP: _gap,
    R.CLAIM_ACCEPTED_BEFORE_LIFECYCLE: _registered,
    R.LEGAL_TRANSITIONS: _legal,
    R.NO_BLOCKING_SMEAR: _smear,
    R.NO_UNSEEN_WINDOW: _gap,
    R.LOSSES_ANNOUNCED: lambda c, s, r: (
        f"{c} lost a needed block at seq {s.lost} before any outcome naming it announced the "
        "loss" if s.lost is not None else None),
    R.RESTORE_REQUIRED: _no_cycle,
    R.TRACE_WELL_FORMED: lambda c, s, r: (
        "the trace has problems (listed above): no gate passes on a trace with a bad line"),
    R.CLAIM_EVENTS_PRESENT: lambda c, s, r: f"no event of {c} in this trace",
    R.MATERIALIZED: _materialized,
    R.STORE_SUCCEEDED: _in_cycle(R.STORE_SUCCEEDED),
    R.OFFLOADED: _in_cycle(R.OFFLOADED),
    R.LOOKUP_HIT: _in_cycle(R.LOOKUP_HIT),
    R.LOAD_SUCCEEDED: _load,
    R.RESTORED_FROM_OFFLOAD: _in_cycle(R.RESTORED_FROM_OFFLOAD),
    R.REUSED_AFTER_RESTORE: _in_cycle(R.REUSED_AFTER_RESTORE),
    R.RESTORE_CONTENT_VERIFIED: _in_cycle(R.RESTORE_CONTENT_VERIFIED),
    R.CLAIM_LOAD_FAILED: _no_failure,
    R.NO_HARM: _harm,
    R.SUCCESS_GENERATION: _success,
    R.MULTIPLE_CLAIMS: _alone,
    R.TARGET_FAILURE_OUTCOME: _target,
    R.FAILURE_GENERATION: _failure_cycle,
    R.EXPIRY_BEFORE_LOSS: _release_before_loss("claim_expired"),
    R.DEMOTION_BEFORE_LOSS: _release_before_loss("claim_demoted"),
}

#: the requirements every gate checks first, in the order a reader would look
_COMMON: tuple[str, ...] = (
    R.TRACE_WELL_FORMED, R.CLAIM_EVENTS_PRESENT, R.NO_OBSERVATION_GAP,
    R.CLAIM_ACCEPTED_BEFORE_LIFECYCLE, R.IDENTITY_COMPLETE, R.STABLE_IDENTITY,
    R.PREDICATE_FIXED, R.LEGAL_TRANSITIONS, R.NO_OPEN_FAILURE, R.NO_BLOCKING_SMEAR)
#: per gate: the common ones, then its chain in the order the events come
_ORDER: dict[str, tuple[str, ...]] = {
    "observation": (
        *_COMMON, R.RESTORE_REQUIRED, R.MATERIALIZED, R.STORE_SUCCEEDED, R.OFFLOADED, R.LOOKUP_HIT,
        R.LOAD_SUCCEEDED, R.RESTORED_FROM_OFFLOAD, R.REUSED_AFTER_RESTORE,
        R.RESTORE_CONTENT_VERIFIED),
    "failure_outcome": (
        *_COMMON, R.RESTORE_REQUIRED, R.CLAIM_LOAD_FAILED, R.STORE_SUCCEEDED,
        R.SCHEDULER_FAILURE_BRANCH, R.RESTORE_FAILED_SCOPED, R.REFUSAL_ATTRIBUTED,
        R.OUTCOME_BEFORE_FINISH,
        R.NO_RESTORE_AFTER_FAILURE),
    "lifecycle": (
        *_COMMON, R.MATERIALIZED, R.NO_HARM, R.EXPIRY_BEFORE_LOSS, R.DEMOTION_BEFORE_LOSS,
        R.CONFLICT_ATTRIBUTED, R.SUCCESS_GENERATION, R.FAILURE_GENERATION,
        R.GENERATIONS_ORDERED),
    "conformance": (
        R.TRACE_WELL_FORMED, R.CLAIM_EVENTS_PRESENT, R.NO_UNSEEN_WINDOW, R.IDENTITY_COMPLETE,
        R.STABLE_IDENTITY, R.PREDICATE_FIXED, R.LEGAL_TRANSITIONS, R.LOSSES_ANNOUNCED,
        R.NOT_VANISHED, R.DECIDED_ONCE, R.NO_OPEN_FAILURE, R.NO_BLOCKING_SMEAR),
    "attribution": (
        *_COMMON, R.MULTIPLE_CLAIMS, R.TARGET_FAILURE_OUTCOME, R.FAILURES_NAME_ONLY_TARGET,
        R.NON_TARGETS_SERVED),
}
