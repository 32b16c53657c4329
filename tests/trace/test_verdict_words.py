"""A failed gate says the first thing that decides it, in the user's words, never a list of
requirement ids whose events are right there."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from residentkv.trace.gates import check_trace
from residentkv.trace.verdict_words import ClaimStory, first_cause

RunCli = Callable[..., tuple[int, str, str]]
TRACES = Path(__file__).resolve().parents[2] / "src" / "residentkv" / "data" / "traces"
SUITE = TRACES.parent / "suite"


def _stored_never_restored(tmp_path: Path) -> Path:
    """success_path up to its reuse request: accepted, materialized, stored, offloaded."""
    lines = (TRACES / "success_path.jsonl").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "stored.jsonl"
    path.write_text("\n".join(lines[:7]) + "\n", encoding="utf-8")
    return path


def test_no_restore_cycle_is_said_so_not_listed_as_missing_events(cli_run: RunCli,
                                                                 tmp_path: Path) -> None:
    trace = _stored_never_restored(tmp_path)
    code, out, _ = cli_run("trace", "check", str(trace), "--gate", "observation")
    assert code == 1
    why = [line.strip() for line in out.splitlines() if "observation failed:" in line]
    assert why == ["c-1 observation failed: no restore cycle of c-1 in this trace: observation "
                   "needs one (c-1 materialized at seq 2, stored at seq 4, offloaded at seq 5; "
                   "no request restored it)"]
    assert "missing c-1 observation: materialized" not in out


def test_json_and_sarif_carry_the_first_cause(cli_run: RunCli, tmp_path: Path) -> None:
    trace = str(_stored_never_restored(tmp_path))
    _, out, _ = cli_run("trace", "check", trace, "--gate", "failure_outcome", "--format", "json")
    (result,) = json.loads(out)["traces"][0]["results"]
    assert result["because"].startswith("no restore of c-1 was attempted in this trace")
    assert set(result["why"]) == set(result["missing"])  # every reason is still there
    _, sarif, _ = cli_run("trace", "check", trace, "--gate", "failure_outcome", "--format",
                          "sarif")
    (res,) = json.loads(sarif)["runs"][0]["results"]
    assert result["because"] in res["message"]["text"]


@pytest.mark.parametrize("missing,story,expected", [
    (["claim_events_present"], None, "no event of c-1 in this trace"),
    (["no_observation_gap", "restore_required"], ClaimStory(gap=3),
     "the stream has an observation gap at seq 3"),
    (["claim_accepted_before_lifecycle"], ClaimStory(), "c-1 was never accepted"),
    (["claim_accepted_before_lifecycle"], ClaimStory(accepted=4, registration="post_hoc"),
     "c-1 was registered post hoc"),
    (["restore_required", "materialized"], ClaimStory(accepted=1),
     "c-1 never materialized in this trace"),
    (["load_succeeded", "restored_from_offload"],
     ClaimStory(accepted=1, materialized=2, restores=1, first_restore=9, failed_load=11),
     "c-1's restore did not load: its load failed at seq 11"),
    (["reused_after_restore"], ClaimStory(accepted=1, materialized=2, restores=1,
                                          first_restore=9),
     "c-1's restore cycle at seq 9: no holding claim_reused"),
])
def test_observation_words(missing: list[str], story: ClaimStory | None,
                           expected: str) -> None:
    result = {"gate": "observation", "claim_id": "c-1", "passed": False, "missing": missing}
    assert first_cause(result, story).startswith(expected)


def test_an_unannounced_loss_names_the_loss_and_what_the_mode_promised() -> None:
    result = {"gate": "lifecycle", "claim_id": "c-soft", "passed": False,
              "missing": ["legal_transitions", "no_harm", "success_generation"],
              "illegal": None}
    story = ClaimStory(accepted=1, mode="soft_priority", materialized=3, lost=8)
    assert first_cause(result, story) == (
        "c-soft lost a needed block at seq 8 and nothing said so first: soft_priority "
        "promises a harm reported before any loss")


def test_an_illegal_step_is_named_with_its_seq_and_state() -> None:
    step = {"seq": 7, "event": "claim_reused", "state": "offloaded",
            "violation": "reuse_before_restore", "why": "a reuse needs a restore first"}
    result = {"gate": "observation", "claim_id": "c-1", "passed": False,
              "missing": ["legal_transitions", "restore_required"], "illegal": step}
    assert first_cause(result, ClaimStory(accepted=1)) == (
        "seq 7: claim_reused is not allowed while c-1 is offloaded (reuse_before_restore: "
        "a reuse needs a restore first)")


def test_a_pass_needs_no_words() -> None:
    assert first_cause({"gate": "observation", "claim_id": "c", "passed": True,
                        "missing": []}, None) == ""


def test_every_failed_result_of_the_shipped_traces_has_words_about_its_claim() -> None:
    traces = sorted([*TRACES.glob("*.jsonl"), *SUITE.rglob("*.jsonl")])
    assert len(traces) > 40
    for path in traces:
        check = check_trace(path)
        for r in check.results:
            if r.passed:
                continue
            words = first_cause(r.model_dump(mode="json"), check.stories.get(r.claim_id))
            assert words and (r.claim_id in words or "the trace has problems" in words
                              or "observation gap" in words), (path, r.gate, words)


def test_a_vanished_claim_says_when_it_vanished() -> None:
    step = {"seq": 8, "event": "stream_closed", "state": "offloaded", "violation": "vanished",
            "why": "the claim was open when its stream closed gracefully"}
    result = {"gate": "conformance", "claim_id": "c-1", "passed": False,
              "missing": ["legal_transitions", "not_vanished"], "illegal": step}
    assert first_cause(result, ClaimStory(accepted=1)).startswith(
        "c-1 vanished: it was still offloaded when its stream closed (seq 8)")
