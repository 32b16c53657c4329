"""The history checker on hand-built histories and sinks: each figure that must be zero fires
on the case that breaks it, names the place, and stays zero on a clean run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chaoskit import (
    OTHER,
    PASS,
    clean_run,
    ev,
    exchange,
    history,
    rid,
    served,
    stream,
    write_sink,
)
from residentkv.adapters.vllm.chaos import history as history_module
from residentkv.adapters.vllm.chaos.history import (
    MUST_BE_ZERO,
    check_history,
    conformance_verdict,
    trace_outcome,
)
from residentkv.adapters.vllm.chaos.model import FaultKind, FaultRecord, OpKind, Transport
from residentkv.adapters.vllm.chaos.sink import read_sink, ticket_of


def _codes(doc: dict[str, Any]) -> list[str]:
    return [f["code"] for f in doc["findings"]]


def test_a_clean_run_passes_with_every_must_be_zero_figure_zero(tmp_path: Path) -> None:
    hist, sink = clean_run(tmp_path)
    doc = check_history(hist, sink, conformance=PASS)
    assert doc["passed"], doc["findings"]
    assert all(doc["figures"][f.value] == 0 for f in MUST_BE_ZERO)
    assert doc["figures"]["restored_outputs_compared"] == 1
    assert doc["figures"]["claims"] == 1 and doc["figures"]["served"] == 3
    assert doc["claims"] == [{"claim_id": "c-1", "status": "ended", "accepted_in": [0],
                              "endings": ["claim_harmed"]}]
    assert doc["load"]["latency_ms"]["restored"]["count"] == 1


SUITE = Path(history_module.__file__).parents[3] / "data" / "suite"


def test_the_conformance_verdict_is_the_gates_over_every_stream() -> None:
    ok = conformance_verdict(SUITE / "positive-conformance-restarts" / "traces" /
                             "deployment.jsonl")
    assert ok["status"] == "pass" and ok["failed"] == [] and len(ok["streams"]) > 1
    bad = conformance_verdict(SUITE / "vanished-at-restart" / "traces" / "restart.jsonl")
    assert bad["status"] == "fail"
    assert [(f["claim_id"], f["missing"]) for f in bad["failed"]] == [
        ("c-1", ["legal_transitions", "not_vanished"])]
    assert bad["failed"][0]["illegal"]["violation"] == "vanished"


def test_a_failed_or_missing_conformance_verdict_fails_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hist, sink = clean_run(tmp_path)
    doc = check_history(hist, sink)  # the hand-built sink is no strict v1 stream
    assert doc["conformance"]["status"] == "fail" and doc["failing"] == []
    assert not doc["passed"] and "C009" in _codes(doc)
    monkeypatch.setattr(history_module, "GATES", {})  # a build without the gate
    doc = check_history(hist, sink)
    assert doc["conformance"]["status"] == "unavailable"
    assert not doc["passed"] and "C008" in _codes(doc)


def test_an_outcome_the_trace_does_not_back_is_a_disagreement(tmp_path: Path) -> None:
    hist, sink = clean_run(tmp_path)
    told = exchange(1, OpKind.REUSE_REF, "rkv-b", outcome="rejected", seq=7)
    doc = check_history(hist.model_copy(update={"exchanges": [hist.exchanges[0], told]}), sink,
                        conformance=PASS)
    assert doc["figures"]["disagreements"] == 1 and not doc["passed"]
    finding = doc["findings"][0]
    assert finding["code"] == "C001" and "told 'rejected', the trace says 'restored'" \
        in finding["message"] and finding["line"] == 6


def test_an_outcome_citing_another_event_is_a_disagreement(tmp_path: Path) -> None:
    hist, sink = clean_run(tmp_path)
    wrong = exchange(1, OpKind.REUSE_REF, "rkv-b", outcome="restored", seq=3)
    doc = check_history(hist.model_copy(update={"exchanges": [wrong]}), sink, conformance=PASS)
    assert doc["figures"]["disagreements"] == 1
    assert "cites seq 3, which is claim_offloaded of cmpl-rkv-a" in doc["findings"][0]["message"]


def test_a_served_response_the_sink_never_saw_is_a_disagreement(tmp_path: Path) -> None:
    hist, sink = clean_run(tmp_path)
    ghost = exchange(3, OpKind.REUSE_REF, "rkv-ghost", outcome="restored", seq=7)
    doc = check_history(hist.model_copy(update={"exchanges": [*hist.exchanges, ghost]}), sink,
                        conformance=PASS)
    assert doc["figures"]["disagreements"] == 1
    assert "no request with this ticket" in doc["findings"][0]["message"]


def test_an_error_the_engine_never_saw_is_anonymous_not_a_disagreement(tmp_path: Path) -> None:
    hist, sink = clean_run(tmp_path)
    never = exchange(3, OpKind.REUSE_REF, "rkv-never", tokens=[],
                     error_type="InternalServerError")  # HTTP 200, an error chunk, no tokens
    doc = check_history(hist.model_copy(update={"exchanges": [*hist.exchanges, never]}), sink,
                        conformance=PASS)
    assert doc["figures"]["disagreements"] == 0
    assert doc["figures"]["anonymous_claimed_responses"] == 1


def test_an_anonymous_500_on_a_claimed_request_is_counted_twice(tmp_path: Path) -> None:
    hist, sink = clean_run(tmp_path)
    dead = exchange(3, OpKind.REUSE_REF, "rkv-c", status=500, would_retry=True,
                    error_type="InternalServerError")
    lost = exchange(4, OpKind.REUSE_FULL, None, status=None, transport=Transport.LOST,
                    would_retry=True)
    refused_conn = exchange(5, OpKind.REUSE_FULL, None, status=None,
                            transport=Transport.REFUSED, would_retry=True)
    doc = check_history(hist.model_copy(update={"exchanges": [
        *hist.exchanges, dead, lost, refused_conn]}), sink, conformance=PASS)
    assert doc["figures"]["anonymous_claimed_responses"] == 2  # never sent: not a response
    assert doc["figures"]["retried_claimed_responses"] == 2
    assert doc["figures"]["not_delivered"] == 1 and doc["figures"]["connection_lost"] == 1


def test_a_claimed_stream_that_ends_in_an_anonymous_error_is_anonymous(tmp_path: Path) -> None:
    hist, sink = clean_run(tmp_path)
    cut = exchange(1, OpKind.REUSE_REF, "rkv-b", outcome="restored", seq=7, tokens=[11, 12],
                   error_type="InternalServerError")
    cut = cut.model_copy(update={"outcome": None, "stream": True})  # the header said it
    lost = cut.model_copy(update={"op_id": 3, "error_type": None,
                                  "transport": Transport.LOST})
    doc = check_history(hist.model_copy(update={"exchanges": [hist.exchanges[0], cut, lost]}),
                        sink, conformance=PASS)
    assert doc["figures"]["anonymous_claimed_responses"] == 2
    assert "began with outcome 'restored' and ended in an error" in doc["findings"][0]["message"]
    # a cut stream is no completion: its tokens are not compared with the recompute
    assert doc["figures"]["restored_outputs_compared"] == 0
    assert doc["figures"]["restored_output_differs"] == 0
    assert doc["load"]["latency_ms"]["error"]["count"] == 2


def test_a_claim_scoped_answer_when_the_engine_stopped_counts_nothing(tmp_path: Path) -> None:
    lines = [stream("s0"), *served(1, "rkv-a", "c-1", ("claim_accepted", "claim_offloaded")),
             ev(5, "request_started", rid("rkv-s"), claim_ref="c-1"),
             ev(6, "kv_lookup", rid("rkv-s"), "c-1"),
             stream("s1"), ev(1, "claim_harmed", None, "c-1", cause="engine_restarted"),
             ev(2, "stream_closed", reason="shutdown")]
    sink = write_sink(tmp_path / "trace.jsonl", lines)
    stopped = exchange(1, OpKind.REUSE_REF, "rkv-s", status=503, outcome="engine_stopped",
                       error_type="resident_claim_engine_stopped")
    doc = check_history(history(sink, [
        exchange(0, OpKind.REGISTER, "rkv-a", outcome="offloaded", seq=3), stopped],
        incarnations=2), sink, conformance=PASS)
    assert doc["passed"], doc["findings"]
    assert doc["load"]["latency_ms"]["engine_stopped"]["count"] == 1
    assert doc["figures"]["unfinished_requests"] == 1
    # the same answer for a request the trace served is one disagreement
    lines.insert(6, ev(7, "request_finished", rid("rkv-s"), status="served"))
    write_sink(sink, lines)
    doc = check_history(history(sink, [stopped], incarnations=2), sink, conformance=PASS)
    assert doc["figures"]["disagreements"] == 1
    assert "HTTP 503 (engine_stopped), the trace finished the request 'served'" in \
        doc["findings"][0]["message"]


def test_a_refusal_the_client_will_not_retry_counts_nothing(tmp_path: Path) -> None:
    lines = [stream("s0"), *served(1, "rkv-a", "c-1", ("claim_accepted", "claim_offloaded")),
             ev(5, "request_started", rid("rkv-r"), claim_ref="c-1"),
             ev(6, "claim_restore_failed", rid("rkv-r"), "c-1", outcome_type="refusal"),
             ev(7, "active_request_refused", rid("rkv-r"), "c-1"),
             ev(8, "request_finished", rid("rkv-r"), status="refused"),
             ev(9, "stream_closed", reason="shutdown")]
    sink = write_sink(tmp_path / "trace.jsonl", lines)
    doc = check_history(history(sink, [
        exchange(0, OpKind.REGISTER, "rkv-a", outcome="offloaded", seq=3),
        exchange(1, OpKind.REUSE_REF, "rkv-r", status=409, outcome="refused", seq=7)]),
        sink, conformance=PASS)
    assert doc["passed"], doc["findings"]
    assert doc["claims"][0]["status"] == "ended"
    assert doc["load"]["latency_ms"]["refused"]["count"] == 1


def _restart(tmp: Path, head: list[dict[str, Any]], reaccept: bool) -> dict[str, Any]:
    second = [stream("s1"), *head]
    exchanges = [exchange(0, OpKind.REGISTER, "rkv-a", outcome="offloaded", seq=3)]
    if reaccept:
        second += served(5, "rkv-b", "c-1", ("claim_accepted", "claim_offloaded"))
        exchanges.append(exchange(1, OpKind.REUSE_FULL, "rkv-b", outcome="offloaded", seq=7))
    lines = [stream("s0"), *served(1, "rkv-a", "c-1", ("claim_accepted", "claim_offloaded")),
             *second, ev(20, "stream_closed", reason="shutdown")]
    sink = write_sink(tmp / "trace.jsonl", lines)
    return check_history(history(sink, exchanges, incarnations=2), sink, conformance=PASS)


def test_a_claim_open_at_a_restart_vanishes_unless_the_next_head_ends_it(
        tmp_path: Path) -> None:
    doc = _restart(tmp_path, [], reaccept=False)
    assert doc["figures"]["undecided_claims"] == 1
    assert "open when stream 1 started" in doc["findings"][0]["message"]
    ended = [ev(1, "claim_harmed", None, "c-1", cause="engine_restarted")]
    doc = _restart(tmp_path, ended, reaccept=False)
    assert doc["passed"] and doc["claims"][0]["endings"] == ["claim_harmed"]


def test_a_claim_accepted_again_after_a_restart_is_decided_twice(tmp_path: Path) -> None:
    doc = _restart(tmp_path, [], reaccept=True)
    assert doc["figures"]["decided_twice"] == 1
    assert doc["claims"][0]["accepted_in"] == [0, 1]
    assert [f["code"] for f in doc["findings"]] == ["C002", "C003", "C002"]


def test_open_claims_at_the_end_vanish_after_a_stop_and_are_live_when_attached(
        tmp_path: Path) -> None:
    lines = [stream("s0"), *served(1, "rkv-a", "c-1", ("claim_accepted", "claim_offloaded"))]
    sink = write_sink(tmp_path / "trace.jsonl", lines)
    reg = [exchange(0, OpKind.REGISTER, "rkv-a", outcome="offloaded", seq=3)]
    stopped = check_history(history(sink, reg), sink, conformance=PASS)
    assert stopped["figures"]["undecided_claims"] == 1
    attached = check_history(history(sink, reg, stopped_at_end=False), sink, conformance=PASS)
    assert attached["passed"] and attached["figures"]["live_claims"] == 1


def test_a_registration_never_decided_is_undecided(tmp_path: Path) -> None:
    lines = [stream("s0"), ev(1, "request_started", rid("rkv-a"), claim_ref="c-1"),
             ev(2, "stream_closed", reason="shutdown")]
    sink = write_sink(tmp_path / "trace.jsonl", lines)
    doc = check_history(history(sink, [exchange(0, OpKind.REGISTER, "rkv-a", status=500,
                                                error_type="InternalServerError")]),
                        sink, conformance=PASS)
    assert doc["figures"]["undecided_claims"] == 1
    assert doc["figures"]["unfinished_requests"] == 1  # reported, not failed
    assert any("never decided" in f["message"] for f in doc["findings"])


def test_restored_tokens_other_than_the_recompute_fail(tmp_path: Path) -> None:
    hist, sink = clean_run(tmp_path)
    wrong = exchange(1, OpKind.REUSE_REF, "rkv-b", outcome="restored", seq=7, tokens=[9, 9])
    doc = check_history(hist.model_copy(update={"exchanges": [hist.exchanges[0], wrong]}), sink,
                        conformance=PASS)
    assert doc["figures"]["restored_output_differs"] == 1 and "C006" in _codes(doc)


def test_a_restore_for_another_tenant_fails(tmp_path: Path) -> None:
    lines = [stream("s0"), *served(1, "rkv-f", "c-1", ("claim_restored",)),
             ev(9, "stream_closed", reason="shutdown")]
    sink = write_sink(tmp_path / "trace.jsonl", lines)
    foreign = exchange(0, OpKind.FOREIGN_REF, "rkv-f", outcome="restored", session=OTHER,
                       prompt=OTHER)
    doc = check_history(history(sink, [foreign]), sink, conformance=PASS)
    assert doc["figures"]["cross_tenant_restores"] == 1 and "C007" in _codes(doc)


def test_torn_lines_and_unapplied_faults_are_notes(tmp_path: Path) -> None:
    hist, sink = clean_run(tmp_path)
    sink.write_text(sink.read_text() + '{"schema": "residentkv.event/v1", "seq": 4\n')
    skipped = FaultRecord(kind=FaultKind.KILL_ENGINE, due_after_s=3.0, applied=False,
                          detail="not applied: attached deployment")
    doc = check_history(hist.model_copy(update={"faults": [skipped]}), sink, conformance=PASS)
    assert doc["passed"]
    notes = [f for f in doc["findings"] if f["severity"] == "note"]
    assert [f["code"] for f in notes] == ["C011", "C012"]
    assert notes[1]["line"] == 14  # the line after the 13 of the clean run


def test_trace_outcome_and_ticket_join() -> None:
    assert ticket_of("cmpl-rkv-0a1b-0-ab12cd34") == "rkv-0a1b"
    assert ticket_of("cmpl-chaos3-op17-0-12345678") == "chaos3-op17"
    assert ticket_of("plain-request") is None


@pytest.mark.parametrize(("decisive", "expected"), [
    ((), None), (("claim_accepted",), "accepted"), (("kv_lookup",), "accepted"),
    (("claim_accepted", "claim_offloaded"), "offloaded"),
    (("claim_restored", "claim_reused"), "restored"), (("claim_rejected",), "rejected"),
    (("claim_restore_failed", "active_request_refused"), "refused")])
def test_trace_outcome_of_a_request(tmp_path: Path, decisive: tuple[str, ...],
                                    expected: str | None) -> None:
    claim = "c-1" if decisive else None
    sink = write_sink(tmp_path / "t.jsonl", [stream("s"), *served(1, "rkv-x", claim, decisive)])
    req = read_sink(sink).find_request("rkv-x")
    assert req is not None and trace_outcome(req) == expected
