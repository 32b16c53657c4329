"""What ``residentkv explain`` knows, rendered as text: finding codes (by id or name),
requirement ids, negative controls, gates and bundle modes, each read from where it is defined
(the code registry, the gate table, the shipped bundles); nothing here is a second copy.
"""

from __future__ import annotations

from collections.abc import Callable

from residentkv.codes import CODES, Code
from residentkv.lowering.bundles import Bundle, load_bundles
from residentkv.model.automaton import VIOLATION_WHY, Violation
from residentkv.model.vocabulary import (
    ALL_GATE_NAMES,
    CONTROLS,
    FLEET_GATE,
    FLEET_REQUIREMENTS,
    Requirement,
)
from residentkv.model.vocabulary import OBLIGATION_SHORT as SHORT
from residentkv.trace.gates import BOUNDARIES, REQUIREMENTS

_BY_NAME: dict[str, Code] = {c.name: c for c in CODES.values()}


def requirement_reason(req: str) -> str:
    """The one-line reason a requirement id is reported missing (from the gate semantics)."""
    from residentkv.trace.semantics import why_missing

    return why_missing(req)


def _code(c: Code) -> list[str]:
    return [f"{c.id} {c.name} (finding code, phase {c.phase})", f"  what:    {c.summary}",
            f"  why:     {c.why}", f"  example: {c.example}"]


def _requirement(req: str, bundles: dict[str, Bundle]) -> list[str]:
    gates = [g for g in ALL_GATE_NAMES if req in REQUIREMENTS[g]]
    out = [f"{req} (trace requirement id)", f"  reported by gates: {', '.join(gates)}"]
    out.append(f"  when missing: {requirement_reason(req)}")
    used = [f"{mode} {SHORT[name]} {name}" for mode, b in sorted(bundles.items())
            for name, ob in b.obligations.items() if req in ob.requirements]
    out.append(f"  required by bundles: {'; '.join(used) or '(none)'}")
    return out


def _fleet_requirement(req: str) -> list[str]:
    from residentkv.fleet.why import why_missing

    return [f"{req} (fleet requirement id)", f"  reported by gate: {FLEET_GATE} "
            "(several replicas' streams judged together; docs/fleet-view.md)",
            f"  when missing: {why_missing(req)}"]


def _fleet_gate() -> list[str]:
    return [f"{FLEET_GATE} (fleet gate: `residentkv fleet check STREAM...`)",
            "  shows: every claim-carrying request got exactly one decision naming its claim, "
            "from the replica that served it; each claim has one home; no cross-tenant restore",
            f"  requirement ids: {', '.join(FLEET_REQUIREMENTS)}"]


def _control(name: str) -> list[str]:
    return [f"{name} (negative control)",
            "  when it fires in a claim's stream, the gates judging that claim fail: this "
            "pattern is never evidence for the claim",
            f"  checked by gates: {', '.join(ALL_GATE_NAMES)}"]


def _gate(gate: str, bundles: dict[str, Bundle]) -> list[str]:
    used = sorted({f"{mode} {SHORT[name]}" for mode, b in bundles.items()
                   for name, ob in b.obligations.items() if gate in ob.gates()})
    return [f"{gate} (trace gate)", f"  shows: {BOUNDARIES[gate]}",
            f"  requirement ids: {', '.join(REQUIREMENTS[gate])}",
            f"  satisfies (in some alternative): {', '.join(used) or '(none)'}"]


def _violation(v: Violation) -> list[str]:
    return [f"{v.value} (automaton violation; docs/trace-gates.md shows the table)",
            f"  why:     {VIOLATION_WHY[v]}",
            "  effect:  every gate of the claim the event names (and of every claim a request "
            "names, for a request's violation) misses legal_transitions; the result names the "
            "seq of the offending event and the state it met"]


_VIOLATIONS = {v.value: v for v in Violation}


def _mode(b: Bundle) -> list[str]:
    return [f"{b.mode} (protection mode, bundle v{b.version})", f"  {b.summary}",
            f"  outcomes: {', '.join(b.outcomes)}", "  run `residentkv bundles show "
            f"{b.mode}` for what satisfies each obligation"]


def explain_lines(term: str) -> list[str] | None:
    """Lines explaining *term*, or ``None`` when residentkv does not know it."""
    bundles = load_bundles()
    finders: list[Callable[[], list[str] | None]] = [
        lambda: _code(CODES[term.upper()]) if term.upper() in CODES else None,
        lambda: _code(_BY_NAME[term]) if term in _BY_NAME else None,
        lambda: _requirement(term, bundles) if term in all_requirements() else None,
        lambda: _fleet_requirement(term) if term in FLEET_REQUIREMENTS else None,
        lambda: _fleet_gate() if term == FLEET_GATE else None,
        lambda: _control(term) if term in CONTROLS else None,
        lambda: _gate(term, bundles) if term in ALL_GATE_NAMES else None,
        lambda: _mode(bundles[term]) if term in bundles else None,
        lambda: _violation(_VIOLATIONS[term]) if term in _VIOLATIONS else None,
    ]
    hits = [lines for find in finders if (lines := find()) is not None]
    return [line for i, lines in enumerate(hits) for line in ([""] if i else []) + lines] or None


def all_requirements() -> list[str]:
    """Every requirement id any gate reports."""
    return [r.value for r in Requirement]


def list_lines() -> list[str]:
    """Everything ``explain`` knows, grouped."""
    out = ["finding codes:"]
    out += [f"  {c.id} {c.name}: {c.summary}" for c in CODES.values()]
    out += ["requirement ids:"] + [f"  {r}" for r in all_requirements()]
    out += ["negative controls:"] + [f"  {c}" for c in CONTROLS]
    out += ["fleet requirement ids:"] + [f"  {r}" for r in FLEET_REQUIREMENTS]
    out += ["gates:"] + [f"  {g}" for g in (*ALL_GATE_NAMES, FLEET_GATE)]
    out += ["protection modes:"] + [f"  {m}" for m in sorted(load_bundles())]
    out += ["automaton violations:"] + [f"  {v.value}: {VIOLATION_WHY[v]}" for v in Violation]
    return out
