"""A replica's death as the fleet harness handles it, without Dynamo: which discovery records
are a dead worker's, the supervisor that withdraws them when the kernel reports the process
gone (a real child process, killed for real), and the figures read from the traces."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from residentkv.adapters.dynamo.discovery import read_records, records_of, withdraw
from residentkv.adapters.dynamo.driver import Sent
from residentkv.adapters.dynamo.scenarios import pair_order
from residentkv.adapters.dynamo.supervisor import Supervisor, Withdrawal
from residentkv.adapters.dynamo.tracefacts import Served
from residentkv.adapters.dynamo.verdicts import death_timeline, latency_split

WORKER, OTHER = 11, 22


def _write(root: Path, kind: str, name: str, doc: Any) -> None:
    d = root / "v1" / kind
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")


def _fleet_discovery(root: Path) -> None:
    """The record set two registered workers and a frontend leave in file discovery."""
    for iid, pub in ((WORKER, 101), (OTHER, 202)):
        for ep in ("generate", "clear%5Fkv%5Fblocks"):
            _write(root, "instances", f"dynamo%2Fbackend%2F{ep}%2F{iid:x}",
                   {"type": "Endpoint", "endpoint": ep, "instance_id": iid})
        _write(root, "mdc", f"dynamo%2Fbackend%2Fgenerate%2F{iid:x}",
               {"type": "Model", "instance_id": iid})
        _write(root, "event_sources", f"kv-events%2F{pub:x}",
               {"type": "EventSource", "publisher_id": pub,
                "metadata": {"worker": {"worker_id": iid, "dp_rank": 0}}})
        _write(root, "event_channels", f"kv-events%2F{pub:x}",
               {"type": "EventChannel", "topic": "kv-events", "instance_id": pub})
    # the frontend's own channel names no worker; a torn record and a store temp file
    _write(root, "event_channels", "session%5Faffinity%5Fevents%2F77",
           {"type": "EventChannel", "topic": "session_affinity_events", "instance_id": 77})
    _write(root, "instances", "dynamo%2Fbackend%2Fgenerate%2Ftorn", "{not json")
    _write(root, "mdc", ".tmp_0123", {"instance_id": WORKER})


def _names(root: Path) -> set[str]:
    return {f"{p.parent.name}/{p.name}" for p in (root / "v1").rglob("*") if p.is_file()}


def test_a_workers_records_are_its_endpoints_card_publishers_and_their_channels(
        tmp_path: Path) -> None:
    _fleet_discovery(tmp_path)
    mine = {f"{r.kind}/{r.path.name}" for r in records_of(WORKER, read_records(tmp_path))}
    assert mine == {
        "instances/dynamo%2Fbackend%2Fgenerate%2Fb",
        "instances/dynamo%2Fbackend%2Fclear%5Fkv%5Fblocks%2Fb",
        "mdc/dynamo%2Fbackend%2Fgenerate%2Fb",
        "event_sources/kv-events%2F65",
        "event_channels/kv-events%2F65",
    }
    assert records_of(999, read_records(tmp_path)) == []


def test_withdraw_deletes_only_the_dead_workers_records(tmp_path: Path) -> None:
    _fleet_discovery(tmp_path)
    before = _names(tmp_path)
    gone = withdraw(tmp_path, WORKER)
    assert len(gone) == 5
    assert _names(tmp_path) == before - set(gone)
    assert any(n.endswith(f"{OTHER:x}") for n in _names(tmp_path))  # the survivor stays
    assert "event_channels/session%5Faffinity%5Fevents%2F77" in _names(tmp_path)
    assert withdraw(tmp_path, WORKER) == []  # nothing left of it: not an error


def _child() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                            stdin=subprocess.DEVNULL)


def _wait_for(sup: Supervisor, n: int) -> list[Withdrawal]:
    deadline = time.monotonic() + 30
    while len(sup.withdrawals()) < n and time.monotonic() < deadline:
        time.sleep(0.02)
    return sup.withdrawals()


def test_supervisor_withdraws_a_worker_when_its_process_is_killed(tmp_path: Path) -> None:
    _fleet_discovery(tmp_path)
    dead, alive = _child(), _child()
    sup = Supervisor(tmp_path)
    try:
        sup.start({"A": (dead.pid, WORKER), "B": (alive.pid, OTHER)})
        assert sup.withdrawals() == []  # nothing exited, nothing withdrawn
        t_kill = time.monotonic_ns()
        os.kill(dead.pid, signal.SIGKILL)
        dead.wait(30)
        (w,) = _wait_for(sup, 1)
    finally:
        sup.close()
        alive.kill()
        alive.wait(30)
    assert (w.replica, w.pid, w.instance_id) == ("A", dead.pid, WORKER)
    assert t_kill <= w.exited_ns <= w.withdrawn_ns
    assert len(w.records) == 5
    assert not any(n.endswith(f"{WORKER:x}") for n in _names(tmp_path))
    assert any(n.endswith(f"{OTHER:x}") for n in _names(tmp_path))
    assert len(sup.withdrawals()) == 1  # the survivor was killed after close: not watched


def test_supervisor_withdraws_at_once_a_worker_already_gone(tmp_path: Path) -> None:
    _fleet_discovery(tmp_path)
    gone = _child()
    gone.kill()
    gone.wait(30)  # reaped: no process left to watch
    sup = Supervisor(tmp_path)
    sup.start({"A": (gone.pid, WORKER)})
    sup.close()
    assert [w.replica for w in sup.withdrawals()] == ["A"]


def test_death_timeline_is_measured_from_the_kill(tmp_path: Path) -> None:
    w = Withdrawal("A", 1, WORKER, exited_ns=1_250_000_000, withdrawn_ns=1_252_000_000,
                   records=("a", "b"))
    assert death_timeline({"A": 1_000_000_000}, [w]) == {
        "death_seen_ms": 250.0, "discovery_withdrawn_ms": 252.0, "records_withdrawn": 2}
    # the supervisor saw nothing of the killed replica: no figure is made up
    assert death_timeline({"B": 1_000_000_000}, [w]) == {}


def _sent(t_sent: int, t_done: int) -> Sent:
    return Sent(label="x", scenario="s", via="router", claim_id="c", owner_scope="o",
                form="ref", session=None, marks={}, t_sent_ns=t_sent, t_done_ns=t_done)


def test_latency_split_reads_one_clock_send_engine_answer() -> None:
    served = Served("A", "r1", [{"event": "request_started", "ts_ns": 3_000_000},
                                {"event": "kv_lookup", "ts_ns": 3_500_000},
                                {"event": "request_finished", "ts_ns": 18_000_000}])
    assert latency_split(_sent(1_000_000, 20_500_000), served) == (2.0, 15.0, 2.5)
    unfinished = Served("A", "r1", served.events[:2])
    assert latency_split(_sent(1_000_000, 20_500_000), unfinished) is None
    assert latency_split(_sent(0, 20_500_000), served) is None  # never sent: no estimate


def test_pairs_alternate_which_path_goes_first() -> None:
    orders = [pair_order(rep, 0) for rep in range(4)]
    assert orders[0] == orders[2] == ("router", "direct")
    assert orders[1] == orders[3] == ("direct", "router")
    assert pair_order(0, 1) == ("direct", "router")

