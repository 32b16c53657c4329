"""The fleet harness's pure parts: layout and command lines, tokenizer files, Prometheus
parsing, discovery parsing, and which traced request answered which sent request.

No Dynamo and no vLLM here: ``make fleet`` runs the real thing (docs/fleet.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from residentkv.adapters.dynamo.discovery import instance_ids
from residentkv.adapters.dynamo.driver import Sent, claim_ref
from residentkv.adapters.dynamo.layout import FleetLayout
from residentkv.adapters.dynamo.promtext import parse, total
from residentkv.adapters.dynamo.summary import claim_metrics, format_table, router_figures
from residentkv.adapters.dynamo.tokenizer import tokenizer_config, vocabulary
from residentkv.adapters.dynamo.tracefacts import read_events, served


def _layout(tmp_path: Path, **kw: Any) -> FleetLayout:
    return FleetLayout(tmp_path, "/venv/bin/python", **kw)


def _arg(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def test_workers_get_their_own_sink_socket_ports_and_ipc_event_endpoint(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    a, b = layout.replicas()
    assert (a.name, b.name) == ("A", "B")
    assert len({a.trace, b.trace}) == len({a.control_socket, b.control_socket}) == 2
    assert len({a.system_port, b.system_port, a.rpc_port, b.rpc_port}) == 4
    for r in (a, b):
        cmd = layout.worker_command(r)
        events = json.loads(_arg(cmd, "--kv-events-config"))
        # a tcp:// endpoint fails silently: no events reach the router
        assert events["endpoint"].startswith("ipc://") and events["enable_kv_cache_events"]
        transfer = json.loads(_arg(cmd, "--kv-transfer-config"))
        assert transfer["kv_connector"] == "ResidentClaimConnector"
        assert transfer["kv_connector_module_path"] == "residentkv.adapters.vllm"
        extra = transfer["kv_connector_extra_config"]
        assert extra["event_sink"] == str(r.trace)
        assert extra["control_socket"] == str(r.control_socket)
        assert extra["replica"] == r.name  # stream_started names the replica
        assert int(_arg(cmd, "--block-size")) % 32 == 0  # CPU attention
        env = layout.worker_env(r)
        assert env["DYN_FILE_KV"] == str(layout.discovery_dir)
        assert env["DYN_SYSTEM_PORT"] == str(r.system_port)


def test_no_etcd_no_nats_everything_on_loopback(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    commands = [layout.frontend_command(), *map(layout.worker_command, layout.replicas())]
    for cmd in commands:
        assert _arg(cmd, "--discovery-backend") == "file"
        assert _arg(cmd, "--request-plane") == "tcp"
        assert _arg(cmd, "--event-plane") == "zmq"
    front = layout.frontend_command()
    assert _arg(front, "--router-mode") == "kv" and _arg(front, "--http-host") == "127.0.0.1"
    assert all(v == "127.0.0.1" for k, v in layout.base_env().items() if k.endswith("_HOST"))
    assert layout.base_env()["DYN_VLLM_ENABLE_INFERENCE_V1_GENERATE"] == "1"


def test_tokenizer_vocabulary_covers_the_model_and_keeps_specials() -> None:
    vocab = vocabulary(1024)
    assert len(vocab) == 1024 and sorted(vocab.values()) == list(range(1024))
    assert (vocab["<unk>"], vocab["<s>"], vocab["</s>"], vocab["t3"]) == (0, 1, 2, 3)
    config = tokenizer_config(1024)
    assert config["eos_token"] == "</s>" and config["model_max_length"] == 1024
    with pytest.raises(ValueError):
        vocabulary(3)


def test_tokenizer_files_load_as_a_fast_tokenizer(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer

    from residentkv.adapters.dynamo.tokenizer import write_tokenizer

    write_tokenizer(tmp_path, vocab_size=64, max_length=128)
    tok = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert tok.encode("t5 t63 nope").ids == [5, 63, 0]
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["bos_token"] == "<s>"


PROM = """\
# HELP x a counter
vllm:residentkv_claims_accepted_total{engine="0",worker_id="ab"} 2.0
vllm:residentkv_claims_rejected_total{engine="0",reason="not_held",worker_id="ab"} 1.0
vllm:residentkv_claims_rejected_total{engine="0",reason="conflict",worker_id="ab"} 2.0
vllm:residentkv_restore_latency_seconds_sum{engine="0"} 0.5
vllm:residentkv_restore_latency_seconds_count{engine="0"} 4
dynamo_component_kv_cache_events_applied{event_type="stored",status="ok",worker_id="1"} 3
dynamo_component_kv_cache_events_applied{event_type="stored",status="ok",worker_id="2"} 4
dynamo_component_kv_cache_events_applied{event_type="stored",status="invalid_block"} 1
dynamo_component_router_kv_hit_rate_sum{router_id="r"} 1.5
dynamo_component_router_kv_hit_rate_count{router_id="r"} 3
garbage line
"""


def test_prometheus_totals_and_figures() -> None:
    samples = parse(PROM)
    assert total(samples, "dynamo_component_kv_cache_events_applied",
                 event_type="stored", status="ok") == 7
    claims = claim_metrics(PROM)
    assert claims["accepted"] == 2 and claims["rejected"] == 3
    assert claims["restore_latency_count"] == 4 and "absent" not in claims
    router = router_figures(PROM)
    assert router["kv_events_applied_ok"]["stored"] == 7
    assert router["kv_events_applied_not_ok"] == 1
    assert router["router_kv_hit_rate_mean"] == 0.5
    assert claim_metrics("")["absent"] == 1.0


def test_instance_ids_come_from_file_discovery_by_request_plane_port(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    a, b = layout.replicas()
    inst = tmp_path / "discovery" / "v1" / "instances"
    inst.mkdir(parents=True)
    for r, iid in ((a, 11), (b, 22)):
        doc = {"instance_id": iid, "transport": {"tcp": f"127.0.0.1:{r.rpc_port}/x/dynamo/g"}}
        (inst / f"dynamo%2Fbackend%2Fgenerate%2F{iid:x}").write_text(json.dumps(doc))
        other = {"instance_id": iid + 1, "transport": {"tcp": f"127.0.0.1:{r.rpc_port}/y"}}
        (inst / f"dynamo%2Fbackend%2Fclear%5Fkv%5Fblocks%2F{iid:x}").write_text(
            json.dumps(other))
    (inst / "dynamo%2Fbackend%2Fgenerate%2Fbad").write_text("{not json")
    assert instance_ids(layout.discovery_dir, layout.replicas()) == {"A": 11, "B": 22}


def _sent(label: str, marks: dict[str, int]) -> Sent:
    return Sent(label=label, scenario="s", via="router", claim_id="c", owner_scope="o",
                form="ref", session=None, marks=marks)


def _ev(event: str, rid: str | None, **kw: Any) -> dict[str, Any]:
    return {"event": event, "request_id": rid, **kw}


def test_a_sent_request_is_the_one_started_between_its_marks_and_the_next() -> None:
    traces = {
        "A": [_ev("stream_started", None), _ev("request_started", "r1"),
              _ev("claim_restored", "r1", claim_id="c", source="offload_tier"),
              _ev("request_started", "r3")],
        "B": [_ev("stream_started", None), _ev("request_started", "r2"),
              _ev("claim_rejected", "r2", claim_id="c", reason="not held: ...")],
    }
    first = served({"A": 1, "B": 1}, {"A": 3, "B": 1}, traces)
    assert [(s.replica, s.request_id) for s in first] == [("A", "r1")]
    assert first[0].restored_from_host and first[0].read_host_tier
    second = served({"A": 3, "B": 1}, {"A": 3, "B": 3}, traces)
    assert [(s.replica, s.request_id) for s in second] == [("B", "r2")]
    assert second[0].rejection("c") is not None and not second[0].read_host_tier
    assert len(served({"A": 1, "B": 1}, None, traces)) == 3  # no upper mark: all later ones


def test_torn_last_line_is_skipped_when_finding_requests(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(_ev("request_started", "r1")) + "\n{\"event\": \"req")
    events = read_events(path)
    assert len(events) == 2 and events[1] == {}
    assert read_events(tmp_path / "missing.jsonl") == []


def test_claim_ref_is_the_reference_form() -> None:
    claim = {"claim_id": "c-1", "owner_scope": "tenant:a", "footprint_blocks": 2}
    assert claim_ref(claim) == {"resident_claim_ref": {"claim_id": "c-1",
                                                       "owner_scope": "tenant:a"}}


def test_table_lists_unmet_checks_under_their_scenario() -> None:
    verdicts = [{"scenario": "one", "held": True, "checks": {"a": True}},
                {"scenario": "two", "held": False, "checks": {"b": True, "c": False},
                 "notes": ["why"]}]
    text = format_table(verdicts, {"rate": "3/3"})
    assert "one" in text and "HELD" in text and "FAILED" in text
    assert "not met: c" in text and "not met: b" not in text and "rate: 3/3" in text


def test_stderr_to_sends_fd_2_to_the_log_and_restores_it(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    import os

    from residentkv.adapters.dynamo.procs import stderr_to

    log = tmp_path / "logs" / "client.log"
    with stderr_to(log):
        os.write(2, b"INFO router.route_request: route request completed\n")
    os.write(2, b"fleet: step failed\n")
    err = capfd.readouterr().err
    assert "route request completed" in log.read_text() and "route request" not in err
    assert "fleet: step failed" in err and "step failed" not in log.read_text()
