"""Shared descriptor text for the drift and review tests."""

from __future__ import annotations

from pathlib import Path


def pair_descriptor(folder: Path, primitive: str, anchors: dict[str, dict[str, str]],
                    evidence: tuple[str, str, str, str]) -> Path:
    """``rt.yaml``: a primitive's substrate row and its overclaim, sharing one obligations block
    (B1-B4 cite *evidence*; B4 contradicted) and one anchors block (YAML aliases), at release
    2.0, with comments a round-trip rewrite must keep."""
    blocks = "\n".join(f"      {aid}:\n" + "\n".join(f'        {k}: "{v}"' for k, v in a.items())
                       for aid, a in anchors.items())
    b1, b2, b3, b4 = evidence
    path = folder / "rt.yaml"
    path.write_text(f"""# a curated file: this comment must survive the review
schema: residentkv.descriptor/v1
rows:
  - id: rt/{primitive}/substrate
    runtime: {{name: rt, version: "2.0"}}   # the release this row describes
    mode: "eviction order"
    mechanism: native
    lowers: soft_priority
    asserts: substrate
    obligations: &obl
      claim_identity: {{status: absent, evidence: [{b1}]}}
      materialization_predicate: {{status: absent, evidence: [{b2}]}}
      ordered_lifecycle: {{status: absent, evidence: [{b3}]}}
      claim_scoped_outcomes: {{status: contradicted, evidence: [{b4}]}}
    anchors: &anc
{blocks}
    expect: approximation_substrate
    boundary: "test wheels"

  - id: rt/{primitive}/hard_protected
    runtime: {{name: rt, version: "2.0"}}
    mode: "eviction order read as protection"
    mechanism: native
    lowers: hard_protected
    asserts: conformance
    obligations: *obl
    anchors: *anc
    expect: rejected_mapping
    boundary: "test wheels"
""")
    return path
