"""The connector's decisions (:mod:`residentkv.adapters.vllm.rules`) without vLLM or torch.

Every test here runs in the core test run; one runs the rules in a child process where vLLM and
torch cannot be imported at all, so a module-level import of either fails it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

from residentkv.adapters.vllm.rules import (
    ClaimRecord,
    LoadFailure,
    Outcome,
    Problem,
    Rejection,
    RequestState,
    Resolved,
    WorkerFact,
    acceptance_problem,
    held_claim_problem,
    ref_problem,
    resolve_ref,
    restorable_blocks,
    started_fields,
)
from residentkv.adapters.vllm.witness import make_claim
from residentkv.model.claim import ResidentClaim

BLOCK = 128


def _claim(cid: str = "c1", owner: str = "tenant:a/session:1", **over: Any) -> ResidentClaim:
    raw = make_claim(cid, owner, "tiny-llama", f"prefix:{cid}")
    raw.update(over)
    return ResidentClaim.model_validate(raw)


def _record(claim: ResidentClaim, **over: Any) -> ClaimRecord:
    return ClaimRecord(claim=claim, salt=None, hashes=(b"h0", b"h1"), slots=[0, 1],
                       identity={}, resident_request="r0", **over)


def _accept(claim: ResidentClaim, prompt: int = 297, hashed: int = 2, budget: int | None = None,
            claims: dict[str, ClaimRecord] | None = None) -> Problem | None:
    return acceptance_problem(claim, prompt_tokens=prompt, hashed_blocks=hashed,
                              block_size=BLOCK, model_names={"tiny-llama"}, budget=budget,
                              claims=claims or {})


def test_a_fitting_claim_is_accepted_and_each_rule_names_its_kind() -> None:
    claim = _claim()
    assert _accept(claim) is None
    assert _accept(_claim(registration="post_hoc")).kind == "registration"  # type: ignore[union-attr]
    assert _accept(_claim(protection_mode="soft_priority")).kind == "protection_mode"  # type: ignore[union-attr]
    other = make_claim("c1", "tenant:a/session:1", "other-model", "prefix:c1")
    assert _accept(ResidentClaim.model_validate(other)).kind == "model"  # type: ignore[union-attr]
    # 256 tokens: vLLM computes the last one, so only one full block is restorable
    short = _accept(claim, prompt=256)
    assert short is not None and short.kind == "footprint" and "1 full prompt" in short.reason
    assert _accept(claim, hashed=1).kind == "footprint"  # type: ignore[union-attr]
    held = {"c0": _record(_claim("c0"))}
    over = _accept(claim, budget=3, claims=held)
    assert over is not None and over.kind == "budget" and "holds 2 blocks" in over.reason
    # a closed claim no longer counts against its owner's budget
    assert _accept(claim, budget=3, claims={"c0": _record(_claim("c0"), closed=True)}) is None


def test_restorable_blocks_stop_before_the_last_prompt_token() -> None:
    assert [restorable_blocks(n, BLOCK) for n in (0, 1, 128, 129, 257, 297)] == [0, 0, 0, 1, 2, 2]


def test_references_resolve_only_to_the_owners_open_claim() -> None:
    owner = "tenant:a/session:1"
    claims = {"c1": _record(_claim("c1", owner))}
    assert resolve_ref({"claim_id": "c1", "owner_scope": owner}, claims, {}) == "c1"
    theirs = resolve_ref({"claim_id": "c1", "owner_scope": "tenant:b"}, claims, {})
    assert isinstance(theirs, Problem) and theirs.kind == "conflict" and not theirs.name_claim
    assert owner not in theirs.reason  # the holder's owner is not disclosed
    unknown = resolve_ref({"claim_id": "c9", "owner_scope": owner}, claims, {})
    assert isinstance(unknown, Problem) and unknown.kind == "not_held" and unknown.name_claim
    released = resolve_ref({"claim_id": "c9", "owner_scope": owner}, claims, {"c9": None})
    assert isinstance(released, Problem) and not released.name_claim
    assert "(released)" in released.reason
    closed = {"c1": _record(_claim("c1", owner), closed=True)}
    shut = resolve_ref({"claim_id": "c1", "owner_scope": owner}, closed, {})
    assert isinstance(shut, Problem) and shut.kind == "failed_closed"
    bad = resolve_ref(["c1"], claims, {})
    assert isinstance(bad, Problem) and bad.kind == "invalid" and not bad.name_claim


def test_malformed_references_say_what_is_wrong() -> None:
    assert "object" in (ref_problem("c1") or "")
    assert "claim_id" in (ref_problem({"claim_id": "", "owner_scope": "t"}) or "")
    assert "owner_scope" in (ref_problem({"claim_id": "c1"}) or "")
    assert "extra" in (ref_problem({"claim_id": "c1", "owner_scope": "t", "extra": 1}) or "")
    assert ref_problem({"claim_id": "c1", "owner_scope": "t"}) is None


def test_a_resubmitted_claim_is_a_reuse_only_when_identical_and_open() -> None:
    claim = _claim()
    assert held_claim_problem(_record(claim), claim) is None
    other = held_claim_problem(_record(claim), _claim(object_id="prefix:other"))
    assert other is not None and other.kind == "conflict"
    shut = held_claim_problem(_record(claim, closed=True), claim)
    assert shut is not None and shut.kind == "failed_closed"


def test_a_claim_serves_only_its_own_prefix_when_offloaded_and_open() -> None:
    rec = _record(_claim())
    hashes = [b"h0", b"h1", b"h2"]
    assert not rec.serves(None, hashes, 297, BLOCK)  # not offloaded yet
    rec.offloaded = True
    assert rec.serves(None, hashes, 297, BLOCK)
    assert not rec.serves("salt", hashes, 297, BLOCK)
    assert not rec.serves(None, [b"h0", b"hx"], 297, BLOCK)
    assert not rec.serves(None, hashes, 256, BLOCK)
    rec.closed = True
    assert not rec.serves(None, hashes, 297, BLOCK)


def test_outcomes_and_rejections_read_as_the_caller_sees_them() -> None:
    state = RequestState("r1")
    assert state.params() is None
    state.claim_id = "c1"
    assert state.params() == {"claim_id": "c1", "outcome": "accepted", "reason": None,
                              "seq": None}
    state.last_outcome = Outcome("refused", "host-tier load failed", 7)
    assert state.params() == {"claim_id": "c1", "outcome": "refused",
                              "reason": "host-tier load failed", "seq": 7}
    state.rejected = Rejection(3, "invalid claim", 2)  # what the request sent, kept as sent
    assert state.params() == {"claim_id": 3, "outcome": "rejected", "reason": "invalid claim",
                              "seq": 2}


def test_started_fields_name_the_requested_claim_only_when_it_is_a_string() -> None:
    assert started_fields(None) == {"owner_scope": None}
    assert started_fields({"claim_id": "c1", "owner_scope": "t"}) == {"owner_scope": "t",
                                                                      "claim_ref": "c1"}
    assert started_fields({"claim_id": 5}) == {"owner_scope": None, "claim_ref": None}


def test_a_job_succeeds_only_if_every_rank_did() -> None:
    ok = WorkerFact("load", 1, 0, True, 10, 20, nbytes=4, verified=True)
    bad = WorkerFact("load", 1, 1, False, 12, 25, nbytes=0, invalid_block_ids=[3],
                     reason=LoadFailure.DIGEST_MISMATCH)
    res = Resolved.fold([ok, bad])
    assert not res.success and res.failed_ranks == [1] and res.invalid == {3}
    assert (res.started_ns, res.finished_ns, res.ranks) == (10, 25, [0, 1])
    assert res.reason is LoadFailure.DIGEST_MISMATCH and not res.verified
    assert Resolved.fold([ok]).success


_BLOCKED_RUN = textwrap.dedent("""
    import importlib.abc, sys

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("vllm", "torch"):
                raise ImportError(f"{name} is blocked in this test")
            return None

    sys.meta_path.insert(0, Blocker())
    from residentkv.adapters.vllm import rules
    from residentkv.adapters.vllm.witness import make_claim
    from residentkv.model.claim import ResidentClaim

    claim = ResidentClaim.model_validate(make_claim("c1", "t", "tiny-llama", "p"))
    problem = rules.acceptance_problem(claim, prompt_tokens=200, hashed_blocks=2,
                                       block_size=128, model_names={"tiny-llama"},
                                       budget=None, claims={})
    assert problem is not None and problem.kind == "footprint", problem
    assert rules.resolve_ref({"claim_id": "c1", "owner_scope": "t"}, {}, {}).kind == "not_held"
    assert not any(m.split(".")[0] in ("vllm", "torch") for m in sys.modules), "imported"
    print("rules ran without vllm and torch")
""")


def test_the_rules_run_where_vllm_and_torch_cannot_be_imported() -> None:
    proc = subprocess.run([sys.executable, "-c", _BLOCKED_RUN], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "rules ran without vllm and torch" in proc.stdout
