"""``witness control`` in the operator's words: every answer of the control socket is confirmed
or refused with its cause and exit 1 (the real socket: tests/adapters/test_vllm_server.py and
the docs test of docs/vllm-adapter.md)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from residentkv.adapters.vllm.control_answers import (
    injection_answer,
    outcome_answer,
    release_answer,
)
from residentkv.commands.witness import witness

RULE = {"claim_id": "c-1", "owner_scope": None, "unclaimed": False, "mode": "once"}


def test_release_names_each_claim_that_was_not_live() -> None:
    a = release_answer({"c-1": 1, "c-9": 0})
    assert not a.ok
    assert a.lines[0].startswith("released c-1")
    assert a.lines[1].startswith("error: claim c-9 is not live on this engine")
    assert release_answer({"c-1": 1}).ok


def test_injection_is_confirmed_only_when_the_engine_holds_the_rule() -> None:
    held = injection_answer(RULE, {"rules": [RULE]})
    assert held.ok and held.lines == (
        "failure injection set: the next load of claim c-1 fails (once: the rule is then "
        "spent)",)
    assert not injection_answer(RULE, {"rules": []}).ok
    assert not injection_answer(RULE, {}).ok
    corrupt = injection_answer({**RULE, "mode": "corrupt"}, {"rules": [{**RULE,
                                                                       "mode": "corrupt"}]})
    assert "digest check fails" in corrupt.lines[0]


def test_clearing_is_confirmed_only_when_no_rule_is_left() -> None:
    assert injection_answer(None, {"rules": []}).ok
    left = injection_answer(None, {"rules": [RULE]})
    assert not left.ok and "still set" in left.lines[0]


def test_an_unknown_request_is_a_failure_that_says_which_ids_count() -> None:
    a = outcome_answer("cmpl-1234", None)
    assert not a.ok and "no claim outcome for request cmpl-1234" in a.lines[0]
    assert "X-Request-Id" in a.lines[0]
    assert outcome_answer("cmpl-1", {"outcome": "refused"}).ok


def test_a_socket_nobody_serves_is_unusable_input_with_the_likely_cause(tmp_path: Path) -> None:
    result = CliRunner().invoke(witness, ["control", "--socket", str(tmp_path / "no.sock"),
                                          "status"])
    assert result.exit_code != 0
    assert "cannot reach the control socket" in str(result.exception)
    assert "kv_connector_extra_config" in str(result.exception)
