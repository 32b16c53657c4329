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
    FORGOTTEN,
    Budgets,
    ClaimRecord,
    Decision,
    Decisions,
    LoadFailure,
    Outcome,
    Problem,
    Rejection,
    RequestState,
    Resolved,
    WorkerFact,
    acceptance_problem,
    decided_problem,
    held_claim_problem,
    loss_fields,
    ref_problem,
    resolve_ref,
    restorable_blocks,
    started_fields,
    stop_ending,
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


def _accept(claim: ResidentClaim, prompt: int = 297, hashed: int = 2,
            budgets: Budgets | None = None,
            claims: dict[str, ClaimRecord] | None = None) -> Problem | None:
    return acceptance_problem(claim, prompt_tokens=prompt, hashed_blocks=hashed,
                              block_size=BLOCK, model_names={"tiny-llama"},
                              budgets=budgets or Budgets(), block_bytes=1000,
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
    over = _accept(claim, budgets=Budgets(blocks=3), claims=held)
    assert over is not None and over.kind == "budget" and "holds 2 blocks" in over.reason
    # a closed claim no longer counts against its owner's budget
    assert _accept(claim, budgets=Budgets(blocks=3),
                   claims={"c0": _record(_claim("c0"), closed=True)}) is None


def test_each_per_owner_budget_is_named_by_the_rejection_it_causes() -> None:
    claim = _claim()
    held = {"c0": _record(_claim("c0")), "x": _record(_claim("x", owner="tenant:other"))}
    by_count = _accept(claim, budgets=Budgets(claims=1), claims=held)
    assert by_count is not None and by_count.kind == "budget"
    assert by_count.reason.startswith("budget per_owner_claims exceeded") and "holds 1" in \
        by_count.reason
    by_bytes = _accept(claim, budgets=Budgets(bytes=3999), claims=held)  # 2 + 2 blocks of 1000
    assert by_bytes is not None and "per_owner_claim_bytes" in by_bytes.reason
    assert _accept(claim, budgets=Budgets(claims=2, blocks=4, bytes=4000), claims=held) is None


def test_expiring_claims_are_lowered_other_modes_are_not() -> None:
    assert _accept(_claim(protection_mode="expiring", expires_after_s=5.0)) is None
    assert _accept(_claim(expires_after_s=5.0)) is None  # offloadable with a duration too
    hard = _accept(_claim(protection_mode="hard_protected"))
    assert hard is not None and hard.kind == "protection_mode" and "expiring" in hard.reason


def test_a_decided_id_is_answered_with_its_decision_never_named_again() -> None:
    decisions = Decisions(kept=2)
    decisions.record("a", Decision(False, "host tier full: needs 2 block slots"))
    decisions.record("b", Decision(True, "harmed (engine_restarted)"))
    problem = decided_problem("a", decisions.get("a"))  # type: ignore[arg-type]
    assert problem.kind == "decided" and not problem.name_claim
    assert "rejected (host tier full" in problem.reason and "new claim id" in problem.reason
    assert "harmed (engine_restarted)" in decided_problem(
        "b", decisions.get("b")).reason  # type: ignore[arg-type]
    decisions.record("c", Decision(True))  # "a" leaves the exact memory, not the filter
    assert decisions.get("a") is FORGOTTEN and len(decisions) == 2
    assert decisions.get("never") is None


def test_a_claim_that_loses_its_kv_is_harmed_only_if_it_materialized() -> None:
    assert stop_ending(held_materialized=True, cycle_open=False, lost=True) == "claim_harmed"
    assert stop_ending(held_materialized=False, cycle_open=False, lost=True) == "claim_released"
    assert stop_ending(held_materialized=True, cycle_open=False, lost=False) == "claim_released"
    # inside a restore cycle nothing but harm may end a claim (SPEC §4.2)
    assert stop_ending(held_materialized=True, cycle_open=True, lost=False) == "claim_harmed"
    fields = loss_fields((2, 2, 2, True), 2)
    assert fields["before"] == {"surviving": 2, "leading": 2, "required": 2, "holds": True}
    assert fields["after"] == {"surviving": 0, "leading": 0, "required": 2, "holds": False}


def test_restorable_blocks_stop_before_the_last_prompt_token() -> None:
    assert [restorable_blocks(n, BLOCK) for n in (0, 1, 128, 129, 257, 297)] == [0, 0, 0, 1, 2, 2]


def test_references_resolve_only_to_the_owners_open_claim() -> None:
    owner = "tenant:a/session:1"
    claims = {"c1": _record(_claim("c1", owner))}
    none = Decisions()
    assert resolve_ref({"claim_id": "c1", "owner_scope": owner}, claims, none) == "c1"
    theirs = resolve_ref({"claim_id": "c1", "owner_scope": "tenant:b"}, claims, none)
    assert isinstance(theirs, Problem) and theirs.kind == "conflict" and not theirs.name_claim
    assert owner not in theirs.reason  # the holder's owner is not disclosed
    # a reference never names a claim: it may come from a tenant that does not own the id
    unknown = resolve_ref({"claim_id": "c9", "owner_scope": owner}, claims, none)
    assert isinstance(unknown, Problem) and unknown.kind == "not_held" and not unknown.name_claim
    past = Decisions()
    past.record("c9", Decision(True, "released (operator release)"))
    released = resolve_ref({"claim_id": "c9", "owner_scope": owner}, claims, past)
    assert isinstance(released, Problem) and not released.name_claim
    assert released.reason.endswith("(released (operator release))")
    closed = {"c1": _record(_claim("c1", owner), closed=True)}
    shut = resolve_ref({"claim_id": "c1", "owner_scope": owner}, closed, none)
    assert isinstance(shut, Problem) and shut.kind == "failed_closed"
    ending = {"c1": _record(_claim("c1", owner), ending=("claim_expired", "due"))}
    late = resolve_ref({"claim_id": "c1", "owner_scope": owner}, ending, none)
    assert isinstance(late, Problem) and late.kind == "ending" and "expired (due)" in late.reason
    bad = resolve_ref(["c1"], claims, none)
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
    ending = held_claim_problem(_record(claim, ending=("claim_released", "operator")), claim)
    assert ending is not None and ending.kind == "ending" and not ending.name_claim


def test_a_claim_serves_only_its_own_prefix_when_offloaded_and_open() -> None:
    rec = _record(_claim())
    hashes = [b"h0", b"h1", b"h2"]
    assert not rec.serves(None, hashes, 297, BLOCK)  # not offloaded yet
    rec.offloaded = True
    assert rec.serves(None, hashes, 297, BLOCK)
    assert not rec.serves("salt", hashes, 297, BLOCK)
    assert not rec.serves(None, [b"h0", b"hx"], 297, BLOCK)
    assert not rec.serves(None, hashes, 256, BLOCK)
    rec.ending = ("claim_released", "operator release")
    assert not rec.serves(None, hashes, 297, BLOCK)
    rec.ending, rec.closed = None, True
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
                                       budgets=rules.Budgets(), block_bytes=1, claims={})
    assert problem is not None and problem.kind == "footprint", problem
    none = rules.Decisions()
    assert rules.resolve_ref({"claim_id": "c1", "owner_scope": "t"}, {}, none).kind == "not_held"
    from residentkv.adapters.vllm import journal
    j = journal.Journal()
    j.feed(journal.Line("claim_accepted", "c1", footprint_blocks=2))
    assert [e for e, _ in j.close_open("engine_restarted")] == ["claim_released"]
    assert not any(m.split(".")[0] in ("vllm", "torch") for m in sys.modules), "imported"
    print("rules ran without vllm and torch")
""")


def test_the_rules_run_where_vllm_and_torch_cannot_be_imported() -> None:
    proc = subprocess.run([sys.executable, "-c", _BLOCKED_RUN], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "rules ran without vllm and torch" in proc.stdout
