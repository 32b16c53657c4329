"""The capacity sweep of SPEC §10: resident victims and the active request's outcome per policy
and pool size, every figure read back from the run's own trace.

Each (usable, policy) point runs the reference scenario (a resident claim materialized first,
then an active prefill) into its own JSONL trace; :func:`row_from_trace` reads that trace with
residentkv's reader and nothing else. Expectations (:func:`expected_row`) are the contract's
arithmetic, checked against the trace-derived rows; a mismatch is a failure (exit code 1).

Pictures of a sweep are the report layer's (:func:`residentkv.report.pictures.sweep_grid`);
nothing here draws or imports matplotlib.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from residentkv.errors import UsageError
from residentkv.microruntime.facts import Trace, read_trace
from residentkv.microruntime.policies import POLICIES
from residentkv.microruntime.scenario import ACTIVE_REQUEST, Reference, run_reference

Active = Literal["served", "refused", "deferred"]
_RANGE = re.compile(r"^\s*(\d{1,18})\s*\.\.\s*(\d{1,18})\s*$")  # int() refuses > 4,300 digits


@dataclass(frozen=True)
class SweepRow:
    """One (usable, policy) point, as read from its trace."""

    usable: int
    policy: str
    resident_victims: int
    active: Active
    shortfall: int | None
    blocking_claim_ids: list[str]
    harmed_claims: list[str]


@dataclass(frozen=True)
class SweepResult:
    """All rows, the traces they came from, and any expectation that failed."""

    resident: int
    active: int
    rows: list[SweepRow]
    traces: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Whether every point matched its expectation."""
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        """``{"rows": [...]}`` plus the parameters and failures."""
        return {
            "resident": self.resident,
            "active": self.active,
            "rows": [asdict(r) for r in self.rows],
            "failures": list(self.failures),
        }


def parse_usable(text: str, step: int) -> list[int]:
    """``"80..150"`` (inclusive, by *step*), ``"80,90,130"`` or ``"100"`` -> pool sizes."""
    if step <= 0:
        raise UsageError(f"--step {step}: expected a positive number of blocks")
    m = _RANGE.match(text)
    if m:
        lo, hi = int(m[1]), int(m[2])
        if lo > hi:
            raise UsageError(
                f"--usable {text}: empty range ({lo} > {hi}); expected LOW..HIGH with LOW <= HIGH"
            )
        values = list(range(lo, hi + 1, step))
    else:
        try:
            values = [int(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise UsageError(
                f"--usable {text!r}: expected LOW..HIGH (e.g. 80..150), a list (80,90) or a number"
            ) from None
        if not values:
            raise UsageError("--usable: no pool size given")
    if any(v <= 0 for v in values):
        raise UsageError(f"--usable {text}: pool sizes must be positive")
    return values


def row_from_trace(trace: Trace, usable: int, policy: str) -> SweepRow:
    """Read one sweep row from a trace (and only from the trace)."""
    if trace.problems:
        raise ValueError(f"{trace.path}: trace has problems: {trace.problems[0]}")
    claims = trace.claim_ids()
    victims = sum(len(trace.losses(c)) for c in claims)
    finished = trace.first("request_finished", request_id=ACTIVE_REQUEST)
    refused = trace.first("active_request_refused", request_id=ACTIVE_REQUEST)
    deferred = trace.first("active_request_deferred", request_id=ACTIVE_REQUEST)
    if finished is None:
        raise ValueError(f"{trace.path}: the active request never finished")
    active: Active
    if finished["status"] == "served":
        active = "deferred" if deferred is not None else "served"
    else:
        active = "refused"
    blocking: list[str] = []
    if refused is not None:
        blocking = list(refused["blocking_claim_ids"])
    elif deferred is not None:
        blocking = list(deferred["blocking_claim_ids"])
    harmed = sorted({e["claim_id"] for e in trace.select("claim_harmed")})
    return SweepRow(
        usable=usable,
        policy=policy,
        resident_victims=victims,
        active=active,
        shortfall=refused["shortfall"] if refused is not None else None,
        blocking_claim_ids=blocking,
        harmed_claims=harmed,
    )


def expected_row(usable: int, policy: str, resident: int, active: int, claim_id: str) -> SweepRow:
    """What the contract says the point must show (SPEC §10 for resident 60, active 70)."""
    conflict = resident + active - usable  # blocks the resident would have to give up
    if active > usable:  # the prefill can never fit: refused, nobody to blame
        return SweepRow(usable, policy, 0, "refused", active - usable, [], [])
    if conflict <= 0:
        return SweepRow(usable, policy, 0, "served", None, [], [])
    if policy in ("native", "write_no_admit", "demote_on_conflict"):
        return SweepRow(usable, policy, conflict, "served", None, [], [])
    if policy == "expiring":
        # SPEC §4.3: the wait names no claim (only a hard_protected claim is named by a
        # conflicting request's deferral)
        return SweepRow(usable, policy, conflict, "deferred", None, [], [])
    if policy == "offload_resident":
        return SweepRow(usable, policy, 0, "served", None, [], [])
    return SweepRow(usable, policy, 0, "refused", conflict, [claim_id], [])


def run_sweep(
    resident: int,
    active: int,
    usables: Sequence[int],
    out_dir: Path,
    policies: Sequence[str] = tuple(POLICIES),
) -> SweepResult:
    """Run every (usable, policy) point into ``out_dir/traces`` and read the rows back."""
    if resident <= 0 or active <= 0:
        raise UsageError("--resident and --active must be positive block counts")
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise UsageError(f"unknown policy {unknown[0]!r}; expected one of {', '.join(POLICIES)}")
    rows: list[SweepRow] = []
    traces: dict[str, str] = {}
    failures: list[str] = []
    for usable in usables:
        for policy in policies:
            path = out_dir / "traces" / f"{policy}-u{usable}.jsonl"
            run_reference(Reference(usable, policy, resident, active), path)
            trace = read_trace(path)
            row = row_from_trace(trace, usable, policy)
            rows.append(row)
            traces[f"{policy}@{usable}"] = str(path)
            claims = trace.claim_ids()
            want = expected_row(usable, policy, resident, active, claims[0] if claims else "?")
            if row != want:
                failures.append(f"{policy} at usable {usable}: trace shows {_cell(row)}, "
                                f"expected {_cell(want)} ({path})")
    return SweepResult(resident, active, rows, traces, failures)


def _cell(row: SweepRow) -> str:
    parts = [f"{row.resident_victims} victims", row.active]
    if row.shortfall is not None:
        parts.append(f"shortfall {row.shortfall}")
    if row.blocking_claim_ids:
        parts.append(f"blocking {', '.join(row.blocking_claim_ids)}")
    if row.harmed_claims:
        parts.append(f"harmed {', '.join(row.harmed_claims)}")
    return ", ".join(parts)


def render_text(result: SweepResult) -> str:
    """A fixed-width table, one line per (usable, policy)."""
    head = ("usable", "policy", "victims", "active", "shortfall", "blocking", "harmed")
    lines = [[str(r.usable), r.policy, str(r.resident_victims), r.active,
              "-" if r.shortfall is None else str(r.shortfall),
              ",".join(r.blocking_claim_ids) or "-", ",".join(r.harmed_claims) or "-"]
             for r in result.rows]
    widths = [max(len(h), *(len(x[i]) for x in lines)) for i, h in enumerate(head)]
    out = [f"capacity sweep: resident claim {result.resident} blocks, active prefill "
           f"{result.active} blocks (figures read from each run's trace)"]
    out.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
    out += ["  ".join(c.ljust(w) for c, w in zip(x, widths, strict=True)).rstrip() for x in lines]
    return "\n".join(out)


def render_json(result: SweepResult) -> str:
    """Deterministic JSON."""
    return json.dumps(result.to_json(), indent=2, sort_keys=True)

