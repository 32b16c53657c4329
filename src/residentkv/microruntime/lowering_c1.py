"""Litmus C1: the lowering checker classifies soft priority honestly.

Two rows describe the same primitive — the MicroRuntime's soft-priority eviction tier (claimed
blocks are evicted only after unclaimed ones) — lowered two ways:

* to ``hard_protected`` asserting conformance: a priority tier cannot refuse conflicting work
  with an attributed outcome, so B4 is ``absent`` ⇒ the checker must say ``rejected_mapping``;
* to ``soft_priority`` asserting substrate ⇒ ``approximation_substrate``.

The evidence is a source anchor into residentkv's own simulator (verified against the installed
package, offline) plus a ``sim`` anchor. The verdict is the checker's classification, read from
its result; rows carry no ``expect`` so nothing is taken on trust. If the lowering checker cannot
be imported, C1 is ``not_run`` — a failure, never a pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import residentkv
from residentkv.microruntime.results import TITLES, LitmusResult

#: row id -> the class SPEC §10 requires for it
EXPECTED: dict[str, str] = {
    "microruntime/soft-priority/hard_protected": "rejected_mapping",
    "microruntime/soft-priority/soft_priority": "approximation_substrate",
}

_ROW_TEMPLATE = """\
  - id: {id}
    runtime: {{name: residentkv-microruntime, version: "{version}"}}
    mode: "soft_priority eviction tier: claimed blocks evicted only after unclaimed ones"
    mechanism: native
    lowers: {lowers}
    asserts: {asserts}
    obligations:
      claim_identity:            {{status: absent,  evidence: [tier]}}
      materialization_predicate: {{status: absent,  evidence: [tier]}}
      ordered_lifecycle:         {{status: partial, evidence: [tier, sim]}}
      claim_scoped_outcomes:     {{status: absent,  evidence: [tier, sim]}}
    anchors:
      tier: {{kind: source, package: residentkv, version: "{version}",
             path: microruntime/pool.py, symbol: BlockPool.pop_victim, quote: "lru_soft"}}
      sim: {{kind: sim, scenario: "soft-priority eviction under a capacity conflict"}}
    boundary: "semantics of the simulator's priority tier; not a statement about any runtime"
"""


def descriptor_text() -> str:
    """The two-row descriptor C1 checks."""
    rows = [
        _ROW_TEMPLATE.format(id=row_id, version=residentkv.__version__, lowers=lowers,
                             asserts="conformance" if lowers == "hard_protected" else "substrate")
        for row_id, lowers in (
            ("microruntime/soft-priority/hard_protected", "hard_protected"),
            ("microruntime/soft-priority/soft_priority", "soft_priority"),
        )
    ]
    return "schema: residentkv.descriptor/v1\nrows:\n" + "".join(rows)


def _not_run(why: str, path: Path | None = None) -> LitmusResult:
    return LitmusResult(
        id="C1", title=TITLES["C1"], status="not_run", checks={"lowering_checker_ran": False},
        detail=f"not run: {why}", trace=str(path) if path else None,
    )


def run_c1(out_dir: Path) -> LitmusResult:
    """Write the descriptor under *out_dir*, run the lowering checker, compare the classes."""
    try:
        from residentkv.lowering.anchors import Verifier
        from residentkv.lowering.check import run_check
        from residentkv.lowering.sources import DirRoot
    except ImportError as e:
        return _not_run(f"lowering checker unavailable ({e})")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "soft-priority.descriptor.yaml"
    path.write_text(descriptor_text(), encoding="utf-8")
    package_dir = Path(residentkv.__file__).parent
    result = run_check([path], verifier=Verifier({"residentkv": DirRoot("residentkv",
                                                                        package_dir)}))
    classes: dict[str, Any] = {r.id: r.klass for r in result.rows}
    checks = {f"{row_id} is {want}": classes.get(row_id) == want
              for row_id, want in EXPECTED.items()}
    checks["source_anchor_verified"] = all(
        a.result == "verified" for r in result.rows for a in r.anchors if a.kind == "source"
    ) and bool(result.rows)
    failed = sorted(k for k, v in checks.items() if not v)
    detail = "; ".join(f"{rid} -> {classes.get(rid)}" for rid in EXPECTED)
    if failed:
        detail += f"; failed: {', '.join(failed)}"
    return LitmusResult(
        id="C1", title=TITLES["C1"], status="fail" if failed else "pass", checks=checks,
        detail=detail, trace=str(path),
    )
