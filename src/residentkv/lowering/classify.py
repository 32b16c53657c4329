"""The fail-closed classifier (SPEC §7): one of six classes per row, with its reasons.

:func:`classify` is a pure function of (row, anchor results, bundle). Evidence strength per
anchor: ``verified`` (a source anchor whose content matches, a trace whose gate passed) >
``cited`` (a doc quote, a sim scenario, a source anchor with no source to check it against) >
``none`` (drifted, missing, failed). An obligation's *effective* status:

* no usable evidence -> ``unknown``;
* asserted ``satisfied`` -> ``satisfied`` only when *established*: verified anchors cited for it
  cover one of the bundle's evidence alternatives (every gate of the alternative passed, or a
  verified source anchor where the bundle allows ``source``); otherwise ``unknown``;
* asserted ``partial``/``absent``/``contradicted`` -> as asserted (a refusing verdict may rest on
  cited evidence); asserted ``unknown`` -> ``unknown``.

Rule 3 accepts B1-B3 either established by the bundle or cited with a passing ``observation``
trace (the success path); rule 4 needs a real (source, doc or trace) anchor with usable evidence,
and either ``asserts: substrate`` or at least one established obligation; a row asserting
conformance that admits an absent/contradicted obligation never reaches rule 4.

Rules, in order: 5 rejected_mapping, 1 native_conformance, 2 adapter_policy_evidence,
3 adapter_observational_evidence, 4 approximation_substrate, 6 unknown_evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict

from residentkv.lowering.anchors import AnchorResult
from residentkv.lowering.bundles import (
    OBLIGATIONS,
    SHORT,
    SOURCE,
    Bundle,
    BundleObligation,
    gate_requirements,
)
from residentkv.lowering.descriptor import CLASSES, Obligation, Row, Status
from residentkv.model.vocabulary import Requirement, RowClass

Strength = Literal["verified", "cited", "none"]
RANK: dict[str, int] = {c: i + 1 for i, c in enumerate(CLASSES)}
GRANTING: frozenset[str] = frozenset(CLASSES[:3])
POSITIVE: frozenset[str] = frozenset(CLASSES[:4])
_B1_B3 = OBLIGATIONS[:3]
#: what a trace must show to establish B2: a materialization that holds -- a
#: ``claim_materialized`` meeting the predicate, or a full success cycle, which starts with one.
#: A lifecycle gate of an expiring/demotable claim does not ask for it (accept, then expire,
#: passes it), so no B2 ever rests on such a vacuous path.
HOLDING_MATERIALIZATION: frozenset[str] = frozenset(
    {Requirement.MATERIALIZED.value, Requirement.SUCCESS_GENERATION.value})


class AnchorRef(BaseModel):
    """One anchor cited by an obligation, with its verification result."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    kind: str
    result: str


class ObligationVerdict(BaseModel):
    """Asserted vs effective status of one obligation, and the anchor that decided it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    asserted: Status
    effective: Status
    strength: Strength
    established: bool
    decided_by: str | None
    reason: str
    anchors: list[AnchorRef]


class Verdict(BaseModel):
    """The class of one valid row, the obligations behind it, and the reasons in words."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    klass: RowClass
    rule: int
    reasons: list[str]
    obligations: dict[str, ObligationVerdict]


def strength(r: AnchorResult) -> Strength:
    """Evidence strength of one verification result (invalid evidence counts as none)."""
    if r.result == "verified" and r.kind in ("source", "trace"):
        return "verified"
    return "cited" if r.result == "unverifiable" else "none"


def alternatives_text(alternatives: list[list[str]]) -> str:
    """Evidence alternatives in words: ``lifecycle, or observation and failure_outcome``."""
    return ", or ".join(" and ".join(alt) for alt in alternatives)


def _missing(aid: str) -> AnchorResult:
    return AnchorResult(id=aid, kind="unknown", result="missing", code="A002",
                        detail="no verification result for this anchor")


def _covers(spec: BundleObligation, verified: list[AnchorResult]) -> list[str] | None:
    """Ids of the verified anchors that cover one evidence alternative of *spec*, if any.

    A trace anchor covers a gate of the alternative only when that gate's own evidence shows
    every requirement of the obligation the gate can report: a gate that passed by the rules
    of another mode (a soft_priority claim's lifecycle) shows nothing about this one. For B2
    that evidence must include a materialization that holds (:data:`HOLDING_MATERIALIZATION`).
    """
    known = gate_requirements()
    for alt in spec.satisfied_by:
        used: list[str] = []
        for need in alt:
            wanted = {q for q in spec.requirements if q in known.get(need, ())}
            hit = next((r for r in verified if (
                r.kind == "source" if need == SOURCE
                else r.kind == "trace" and r.gate == need and wanted <= set(r.shown)
                and (spec.refines != "B2" or bool(HOLDING_MATERIALIZATION & set(r.shown))))),
                None)
            if hit is None:
                break
            used.append(hit.id)
        else:
            return used
    return None


def effective(
    name: str, ob: Obligation, results: Mapping[str, AnchorResult], spec: BundleObligation
) -> ObligationVerdict:
    """The effective status of one obligation from its anchors (see the module docstring)."""
    refs = [results.get(a) or _missing(a) for a in ob.evidence]
    anchors = [AnchorRef(id=r.id if r.id else a, kind=r.kind, result=r.result)
               for a, r in zip(ob.evidence, refs, strict=True)]
    usable = [r for r in refs if strength(r) != "none"]
    if not usable:
        return ObligationVerdict(asserted=ob.status, effective="unknown", strength="none",
                                 established=False, decided_by=None, anchors=anchors,
                                 reason=f"{SHORT[name]}: no usable evidence "
                                        f"({_results(refs) or 'none cited'})")
    verified = [r for r in usable if strength(r) == "verified"]
    best: Strength = "verified" if verified else "cited"
    top = (verified or usable)[0]
    if ob.status == "satisfied":
        used = _covers(spec, verified)
        if used:
            return ObligationVerdict(asserted="satisfied", effective="satisfied", strength=best,
                                     established=True, decided_by=used[-1], anchors=anchors,
                                     reason=f"{SHORT[name]}: satisfied, established by verified "
                                            f"{', '.join(used)}")
        return ObligationVerdict(asserted="satisfied", effective="unknown", strength=best,
                                 established=False, decided_by=top.id, anchors=anchors,
                                 reason=f"{SHORT[name]}: asserted satisfied, but no verified "
                                        f"evidence covers {alternatives_text(spec.satisfied_by)} "
                                        f"(best: anchor {top.id}, {top.result})")
    eff: Status = ob.status
    return ObligationVerdict(asserted=ob.status, effective=eff, strength=best, established=False,
                             decided_by=top.id, anchors=anchors,
                             reason=f"{SHORT[name]}: {eff} on {best} evidence {top.id}")


def _results(refs: list[AnchorResult]) -> str:
    return ", ".join(f"{r.id} {r.result}" for r in refs)


def classify(row: Row, results: Mapping[str, AnchorResult], bundle: Bundle) -> Verdict:
    """Place a valid row in one of the six classes (rules 5, 1, 2, 3, 4, 6 in that order)."""
    obs = {n: effective(n, ob, results, bundle.obligations[n]) for n, ob in row.obligations.items()}
    for rule in (_rule5, _rule1, _rule2, _rule3, _rule4):
        hit = rule(row, obs, results)
        if hit is not None:
            klass, why = hit
            return Verdict(klass=RowClass(klass), rule=RANK[klass], reasons=[why],
                           obligations=obs)
    return Verdict(klass="unknown_evidence", rule=6, obligations=obs, reasons=[
        "no rule applies on the evidence given (fail-closed default): "
        + "; ".join(o.reason for o in obs.values())])


Hit = tuple[str, str] | None
Obs = dict[str, ObligationVerdict]


def _rule5(row: Row, obs: Obs, results: Mapping[str, AnchorResult]) -> Hit:
    refuted = [f"{SHORT[n]} {o.effective} (anchor {o.decided_by}, {o.strength})"
               for n, o in obs.items() if o.effective in ("absent", "contradicted")]
    if row.asserts == "conformance" and refuted:
        return "rejected_mapping", (f"rule 5: asserts conformance for {row.lowers}, whose bundle "
                                    f"requires all of B1-B4, but {'; '.join(refuted)}")
    return None


def _all_established(obs: Obs) -> bool:
    return all(o.established for o in obs.values())


def _rule1(row: Row, obs: Obs, results: Mapping[str, AnchorResult]) -> Hit:
    if row.asserts == "conformance" and row.mechanism == "native" and _all_established(obs):
        return "native_conformance", (f"rule 1: native mechanism; B1-B4 established by verified "
                                      f"evidence, B4 by {obs['claim_scoped_outcomes'].decided_by}")
    return None


def _rule2(row: Row, obs: Obs, results: Mapping[str, AnchorResult]) -> Hit:
    if row.asserts == "conformance" and row.mechanism != "native" and _all_established(obs):
        return "adapter_policy_evidence", (
            f"rule 2: {row.mechanism} mechanism; B1-B4 established by verified evidence, B4 by "
            f"passing trace {obs['claim_scoped_outcomes'].decided_by}")
    return None


def _observed(name: str, row: Row, results: Mapping[str, AnchorResult]) -> str | None:
    """A verified, passing observation trace cited for obligation *name*, if any."""
    ob: Obligation = getattr(row.obligations, name)
    for aid in ob.evidence:
        r = results.get(aid)
        if r and r.kind == "trace" and r.gate == "observation" and strength(r) == "verified":
            return aid
    return None


def _rule3(row: Row, obs: Obs, results: Mapping[str, AnchorResult]) -> Hit:
    # B1-B3 on the success path: each asserted satisfied and either established by the bundle or
    # cited with a passing observation trace (the success half of an ordered lifecycle).
    if row.mechanism == "native":
        return None
    traces = [_observed(n, row, results) for n in _B1_B3]
    ok = all(obs[n].asserted == "satisfied" and (obs[n].established or t is not None)
             for n, t in zip(_B1_B3, traces, strict=True))
    seen = sorted({t for t in traces if t is not None})
    if not ok or not seen:
        return None
    return "adapter_observational_evidence", (
        f"rule 3: {row.mechanism} mechanism; B1-B3 shown with passing observation trace "
        f"{', '.join(seen)}; B4 not established ({obs['claim_scoped_outcomes'].reason})")


def _rule4(row: Row, obs: Obs, results: Mapping[str, AnchorResult]) -> Hit:
    real = sorted({r.id for n, o in obs.items() for r in o.anchors
                   if r.kind in ("source", "doc", "trace")
                   and strength(results.get(r.id) or _missing(r.id)) != "none"})
    if not real:
        return None
    admits = [n for n, ob in row.obligations.items() if ob.status in ("absent", "contradicted")]
    if row.asserts == "conformance" and admits:
        return None
    binds = [SHORT[n] for n, o in obs.items() if o.established]
    if row.asserts == "substrate" or binds:
        what = "asserts substrate" if row.asserts == "substrate" else f"binds {', '.join(binds)}"
        return "approximation_substrate", (
            f"rule 4: a real primitive with usable evidence ({', '.join(real)}) that {what}, "
            "but not all of B1-B4 on verified evidence")
    return None
