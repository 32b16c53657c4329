"""The curated rows grade one anchored symbol alike: the same target, cited for the same
obligation, carries the same status in every row -- unless an anchor note says why not.

A target is (package, release, file, symbol or line range). Two rows of a primitive share their
anchors, so they agree by construction; this test catches two *primitives* that read the same
code differently (the kv-events/prefix-caching split the audit found), and a release pair whose
re-read silently changed a grade.
"""

from __future__ import annotations

from collections import defaultdict

from residentkv.lowering.bundles import load_bundles
from residentkv.lowering.descriptor import Row, SourceAnchor, read_descriptor
from residentkv.sources import runtime_descriptor_paths

Target = tuple[str, str | None, str, str | None]


def _rows() -> list[Row]:
    modes = set(load_bundles())
    rows = []
    for path in runtime_descriptor_paths():
        for lr in read_descriptor(path, modes).rows:
            assert lr.row is not None, [f.render() for f in lr.findings]
            rows.append(lr.row)
    return rows


def _target(a: SourceAnchor) -> Target:
    return (a.package, a.version, a.path, a.symbol or a.lines)


def grades(rows: list[Row]) -> dict[tuple[Target, str], list[tuple[str, str, bool]]]:
    """(target, obligation) -> [(row id, status, anchor has a note)]."""
    out: dict[tuple[Target, str], list[tuple[str, str, bool]]] = defaultdict(list)
    for r in rows:
        for name, ob in r.obligations.items():
            for aid in ob.evidence:
                a = r.anchors[aid]
                if isinstance(a, SourceAnchor):
                    out[(_target(a), name)].append((r.id, ob.status, bool(a.note)))
    return out


def disagreements(rows: list[Row]) -> list[str]:
    """Targets graded differently for one obligation with no anchor note saying why."""
    bad = []
    for (target, name), seen in sorted(grades(rows).items(), key=str):
        if len({status for _, status, _ in seen}) > 1 and not any(n for _, _, n in seen):
            bad.append(f"{target} {name}: " + ", ".join(f"{rid}={s}" for rid, s, _ in seen))
    return bad


def test_the_same_anchored_symbol_gets_the_same_status_for_the_same_obligation() -> None:
    assert disagreements(_rows()) == []


def test_a_disagreement_is_found_unless_a_note_explains_it() -> None:
    rows = _rows()
    row = next(r for r in rows if r.id == "vllm/prefix-caching/substrate")
    twin = row.model_copy(update={
        "id": "vllm/prefix-caching/other",
        "obligations": row.obligations.model_copy(update={
            "claim_identity": row.obligations.claim_identity.model_copy(
                update={"status": "partial"})})})
    found = disagreements([row, twin])
    assert len(found) == 1 and "claim_identity" in found[0] and "=partial" in found[0]
    aid = row.obligations.claim_identity.evidence[0]
    noted = twin.model_copy(update={"anchors": {
        **twin.anchors, aid: twin.anchors[aid].model_copy(update={"note": "why it differs"})}})
    assert disagreements([row, noted]) == []
