"""The litmus suite of SPEC §10 (L1–L7, C1), each verdict derived from an emitted trace.

Every item runs a MicroRuntime scenario that writes a v1 trace, reads the trace back with
residentkv's reader and decides from its events alone: no constants stand in for outcomes and
nothing the harness knows is consulted. C1 runs the lowering checker on a two-row descriptor.

A check that cannot run is ``not_run`` and counts as a failure, never as a pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from residentkv.microruntime.emitter import provenance
from residentkv.microruntime.facts import Trace, read_trace
from residentkv.microruntime.lowering_c1 import run_c1
from residentkv.microruntime.policies import Policy, make_policy
from residentkv.microruntime.results import ITEMS, TITLES, LitmusResult
from residentkv.microruntime.runtime import MicroRuntime
from residentkv.microruntime.scenario import (
    BLOCK_SIZE,
    RESIDENT_OBJECT,
    RESIDENT_REQUEST,
    Reference,
    make_claim,
    run_reference,
)
from residentkv.microruntime.scheduler import FEASIBILITY_CONFLICT
from residentkv.model.claim import PredicateSpec, ProtectionMode
from residentkv.model.lifecycle import ClaimState, LossKind, classify_loss
from residentkv.model.predicate import evaluate_predicate
from residentkv.model.vocabulary import Arbiter
from residentkv.trace.writer import EventWriter

_HOLDING = frozenset({ClaimState.MATERIALIZED, ClaimState.RESTORED, ClaimState.REUSED})


def _verdict(
    item: str, trace: Trace, checks: dict[str, bool], evidence: dict[str, list[int]], detail: str
) -> LitmusResult:
    checks = {"trace_well_formed": not trace.problems and bool(trace.events), **checks}
    failed = sorted(k for k, v in checks.items() if not v)
    if failed:
        note = f"failed: {', '.join(failed)}"
        detail = f"{detail}; {note}" if detail else note
    return LitmusResult(
        id=item,
        title=TITLES[item],
        status="fail" if failed else "pass",
        checks=checks,
        evidence=evidence,
        detail=detail,
        trace=str(trace.path),
    )


def _seqs(events: Sequence[dict[str, Any]]) -> list[int]:
    return [e["seq"] for e in events]


def _resident_claim(trace: Trace) -> str | None:
    """The claim on the resident object (the one claim the reference scenario submits)."""
    ids = trace.claim_ids()
    return ids[0] if len(ids) == 1 else None


def _not_harm(trace: Trace, claim_id: str, losses: Sequence[dict[str, Any]]) -> bool:
    """No loss of the claim's blocks counts as harm under the contract's rule — even assuming
    each loss broke the predicate (the strictest reading)."""
    return all(
        classify_loss(trace.state_before(claim_id, e["seq"]), True, False) is not LossKind.HARM
        for e in losses
    )


# ----------------------------------------------------------------------------- verdicts


def judge_l1(trace: Trace) -> LitmusResult:
    """No accepted claim ⇒ eviction is not harm."""
    claim = _resident_claim(trace) or ""
    losses = trace.losses(claim)
    rejected = trace.select("claim_rejected", claim_id=claim)
    checks = {
        "claim_not_accepted": not trace.select("claim_accepted", claim_id=claim),
        "rejection_explicit": bool(rejected),
        "resident_blocks_evicted": bool(losses),
        "losses_are_not_harm": bool(losses) and _not_harm(trace, claim, losses),
        "no_harm_reported": not trace.select("claim_harmed"),
    }
    evidence = {"claim_rejected": _seqs(rejected), "evictions": _seqs(losses)}
    return _verdict("L1", trace, checks, evidence, f"{len(losses)} resident blocks evicted")


def judge_l2(trace: Trace) -> LitmusResult:
    """Write no-admit still evicts residents."""
    claim = _resident_claim(trace) or ""
    denied = [e for e in trace.select("future_reuse_denied") if e["request_id"]]
    no_admit = {e["request_id"] for e in denied}
    losses = trace.losses(claim)
    by_no_admit = [e for e in losses if e["request_id"] in no_admit]
    checks = {
        "no_admit_engaged": bool(denied),
        "claim_not_admitted": bool(trace.select("future_reuse_denied", claim_id=claim))
        and not trace.select("claim_accepted", claim_id=claim),
        "residents_evicted_by_no_admit_request": bool(by_no_admit),
        "losses_are_not_harm": _not_harm(trace, claim, losses),
        "no_harm_reported": not trace.select("claim_harmed"),
    }
    evidence = {"future_reuse_denied": _seqs(denied), "evictions": _seqs(by_no_admit)}
    return _verdict(
        "L2", trace, checks, evidence,
        f"{len(by_no_admit)} resident blocks evicted by no-admit requests",
    )


def judge_l3(trace: Trace) -> LitmusResult:
    """Accepted hard claim ⇒ attributed refusal, resident kept."""
    claim = _resident_claim(trace) or ""
    accepted = trace.select(
        "claim_accepted", claim_id=claim, protection_mode="hard_protected",
        registration="pre_registered",
    )
    materialized = trace.select("claim_materialized", claim_id=claim, holds=True)
    refusals = [e for e in trace.select("active_request_refused") if e["outcome_claim_id"] == claim]
    refusal = refusals[0] if refusals else None
    finished = (
        trace.first("request_finished", request_id=refusal["request_id"], status="refused")
        if refusal else None
    )
    checks = {
        "accepted_hard_protected": bool(accepted),
        "materialized_before_conflict": bool(materialized and refusal)
        and materialized[0]["seq"] < refusal["seq"],  # type: ignore[index]
        "refusal_attributed": refusal is not None
        and refusal["blocking_claim_ids"] == [claim]
        and refusal["feasibility"] == FEASIBILITY_CONFLICT
        and refusal["arbiter"] == Arbiter.ADMISSION
        and (refusal["shortfall"] or 0) > 0,
        "outcome_before_finish": bool(refusal and finished)
        and refusal["seq"] < finished["seq"],  # type: ignore[index]
        "resident_blocks_kept": not trace.losses(claim),
        "no_harm": not trace.select("claim_harmed", claim_id=claim),
    }
    evidence = {
        "claim_accepted": _seqs(accepted),
        "claim_materialized": _seqs(materialized),
        "active_request_refused": _seqs(refusals),
        "request_finished": _seqs([finished] if finished else []),
    }
    detail = (
        f"refused with shortfall {refusal['shortfall']}, blocking "
        f"{', '.join(refusal['blocking_claim_ids'])}"
        if refusal else "no refusal naming the claim"
    )
    return _verdict("L3", trace, checks, evidence, detail)


def _judge_ending(item: str, trace: Trace, ending: str, mode: str) -> LitmusResult:
    """L4/L5: the ending event precedes every later loss, so losses are post-release."""
    claim = _resident_claim(trace) or ""
    ended = trace.select(ending, claim_id=claim)
    end_seq = ended[0]["seq"] if ended else None
    losses = trace.losses(claim)
    lost_after = trace.select("claim_block_lost_after_release", claim_id=claim)
    reported = {e["block_id"] for e in lost_after}
    checks = {
        f"accepted_{mode}": bool(trace.select("claim_accepted", claim_id=claim,
                                              protection_mode=mode)),
        "materialized": bool(trace.select("claim_materialized", claim_id=claim, holds=True)),
        f"{ending}_present": end_seq is not None,
        "loss_occurred": bool(losses),
        f"{ending}_precedes_every_loss": end_seq is not None
        and all(e["seq"] > end_seq for e in losses + lost_after),
        "losses_post_release": bool(losses) and all(
            classify_loss(trace.state_before(claim, e["seq"]), True, False)
            is LossKind.POST_RELEASE_LOSS
            for e in losses
        ),
        "every_loss_reported_post_release": {e["block_id"] for e in losses} == reported,
        "harm_zero": not trace.select("claim_harmed", claim_id=claim),
    }
    evidence = {ending: _seqs(ended), "losses": _seqs(losses)}
    return _verdict(item, trace, checks, evidence, f"{len(losses)} post-release losses, 0 harm")


def judge_l4(trace: Trace) -> LitmusResult:
    """Demotion precedes loss ⇒ loss is post-release, harm 0."""
    return _judge_ending("L4", trace, "claim_demoted", "demotable")


def judge_l5(trace: Trace) -> LitmusResult:
    """Expiry precedes loss ⇒ loss is post-release, harm 0."""
    return _judge_ending("L5", trace, "claim_expired", "expiring")


def judge_l6(trace: Trace) -> LitmusResult:
    """Surviving blocks are not materialization: the predicate is evaluated on positions."""
    claim = _resident_claim(trace) or ""
    accepted = trace.first("claim_accepted", claim_id=claim)
    mat = trace.first("claim_materialized", claim_id=claim, holds=True)
    checks: dict[str, bool] = {"accepted": accepted is not None, "materialized": mat is not None}
    evidence: dict[str, list[int]] = {}
    detail = "no accepted, materialized claim"
    if accepted is not None and mat is not None:
        spec = PredicateSpec.model_validate(accepted["predicate"])
        footprint = accepted["footprint_blocks"]
        # Materialized with every position of the footprint present: the starting set is exact.
        full = mat["surviving"] == mat["leading"] == footprint
        present = set(range(footprint))
        losses = [e for e in trace.losses(claim) if e["seq"] > mat["seq"]]
        for e in losses:
            present.discard(e["position"])
        after = evaluate_predicate(spec, present)
        harmed = trace.first("claim_harmed", claim_id=claim)
        checks |= {
            "materialized_in_full": full,
            "one_block_lost": len(present) == footprint - 1,
            "block_0_lost": 0 not in present,
            "predicate_false_on_survivors": not after.holds,
            "harm_reported": harmed is not None and harmed["before"]["holds"] is True,
            "reported_result_matches": harmed is not None
            and harmed["after"] == after.model_dump(),
        }
        evidence = {"claim_materialized": [mat["seq"]], "losses": _seqs(losses),
                    "claim_harmed": [harmed["seq"]] if harmed else []}
        detail = (
            f"{after.surviving} surviving blocks, leading run {after.leading}, "
            f"predicate {spec.kind.value}({spec.blocks}) holds={after.holds}"
        )
    return _verdict("L6", trace, checks, evidence, detail)


def judge_l7(trace: Trace) -> LitmusResult:
    """The L3 trace alone reconstructs acceptance, materialization, conflict, blocking ids
    and outcome, in order, with one identity."""
    claim = _resident_claim(trace) or ""
    acc = trace.first("claim_accepted", claim_id=claim)
    mat = trace.first("claim_materialized", claim_id=claim)
    ref = next((e for e in trace.select("active_request_refused")
                if claim in e["blocking_claim_ids"]), None)
    req = ref["request_id"] if ref else None
    started = trace.first("request_started", request_id=req) if req else None
    fin = trace.first("request_finished", request_id=req) if req else None
    story = [acc, mat, started, ref, fin]
    ident = trace.identity_values(claim)
    checks = {
        "acceptance": acc is not None,
        "materialization": mat is not None and bool(mat["holds"]),
        "conflict": started is not None and ref is not None and ref["shortfall"] is not None,
        "blocking_ids": ref is not None and ref["blocking_claim_ids"] == [claim],
        "outcome": ref is not None and ref["outcome_claim_id"] == claim
        and fin is not None and fin["status"] == "refused",
        "totally_ordered": all(e is not None for e in story)
        and [e["seq"] for e in story if e] == sorted(e["seq"] for e in story if e),
        # the refusal protected a claim that was still holding: materialized, never harmed
        "claim_held_at_outcome": ref is not None
        and trace.state_before(claim, ref["seq"]) in _HOLDING
        and not trace.select("claim_harmed", claim_id=claim),
        "stable_identity": all(len(v) == 1 and None not in v for v in ident.values()),
        "legal_lifecycle": trace.lifecycle_legal(claim),
    }
    evidence = {name: [e["seq"]] for name, e in zip(
        ("claim_accepted", "claim_materialized", "request_started", "active_request_refused",
         "request_finished"), story, strict=True) if e}
    detail = (
        f"claim {claim} accepted@{acc['seq']}, materialized@{mat['seq']}, request {req} "
        f"refused@{ref['seq']} (shortfall {ref['shortfall']}, blocking "
        f"{', '.join(ref['blocking_claim_ids'])})"
        if acc and mat and ref else "story incomplete"
    )
    return _verdict("L7", trace, checks, evidence, detail)


# ---------------------------------------------------------------------------- scenarios


def run_l6_scenario(trace_path: Path, policy: Policy | None = None) -> Path:
    """A hard claim on 60 blocks whose predicate needs the leading 8; block 0 is then lost to
    an injected fault (a stimulus no policy prevents). The runtime applies the harm rule."""
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    trace_path.write_text("", encoding="utf-8")
    with EventWriter(trace_path, source="microruntime",
                     provenance=provenance()) as w:
        rt = MicroRuntime(80, policy or make_policy("hard_exclude"), writer=w,
                          block_size=BLOCK_SIZE)
        rt.submit_claim(make_claim(footprint=60, predicate_blocks=8,
                                   mode=ProtectionMode.HARD_PROTECTED))
        rt.request(RESIDENT_REQUEST, RESIDENT_OBJECT, 60)
        rt.inject_block_loss(RESIDENT_OBJECT, 0)
        rt.close()
    return trace_path


Judge = Callable[[Trace], LitmusResult]

#: item -> (policy the scenario runs under, judge)
SIM_ITEMS: dict[str, tuple[str, Judge]] = {
    "L1": ("native", judge_l1),
    "L2": ("write_no_admit", judge_l2),
    "L3": ("hard_exclude", judge_l3),
    "L4": ("demote_on_conflict", judge_l4),
    "L5": ("expiring", judge_l5),
    "L6": ("hard_exclude", judge_l6),
    "L7": ("hard_exclude", judge_l7),
}

#: usable blocks of the pressured reference run (resident 60 + active 70 > 80)
PRESSURE_USABLE = 80


def run_item(
    item: str, out_dir: Path, policies: Mapping[str, Policy] | None = None
) -> LitmusResult:
    """Run one litmus item, writing its trace(s) under *out_dir*.

    ``policies`` overrides the behaviour of named policies (tests pass broken ones).
    """
    if item == "C1":
        return run_c1(out_dir / "C1")
    policy_name, judge = SIM_ITEMS[item]
    policy = (policies or {}).get(policy_name)
    trace_path = out_dir / f"{item}-{policy_name}.jsonl"
    if item == "L6":
        run_l6_scenario(trace_path, policy)
    elif item == "L7":
        # L7 reads the L3 trace; run L3's scenario again only if it is not there.
        trace_path = out_dir / f"L3-{policy_name}.jsonl"
        if not trace_path.is_file():
            run_reference(Reference(PRESSURE_USABLE, policy_name), trace_path, policy=policy)
    else:
        run_reference(Reference(PRESSURE_USABLE, policy_name), trace_path, policy=policy)
    return judge(read_trace(trace_path))


def run_litmus(
    out_dir: Path,
    only: Sequence[str] | None = None,
    policies: Mapping[str, Policy] | None = None,
) -> list[LitmusResult]:
    """Run the suite (or the items in *only*, in suite order)."""
    wanted = [i for i in ITEMS if only is None or i in only]
    return [run_item(i, out_dir, policies) for i in wanted]
