"""A deployment's life on real vLLM (SPEC §9.1), in the shape users run: the OpenAI server with
the claim outcome middleware, vLLM's default multiprocessing (an EngineCore and a Worker
process), the official ``openai`` client with its default retries, concurrent clients.

One sink, four engine incarnations in turn: the first serves other tenants, pressure and
release, expiry and budgets, and dies by SIGKILL of its EngineCore under claimed requests; the
second starts on the same sink and is stopped by SIGTERM under load with vLLM's default
``--shutdown-timeout 0``; the third starts on the same sink again with ``--shutdown-timeout 30``
(the documented recommendation) and is stopped by SIGTERM under load; the fourth aborts claimed
requests twice, by ``/pause`` (the engine lives on) and by a SIGTERM of its EngineCore (the
engine ends after it answered the aborts). Each test asserts what the clients got and what the
trace says: legal across its streams (``life_kit``), every claim decided once, every accepted
claim ended when its engine stopped.

What stops an engine under running requests is sent by a watcher process of its own
(``sink_trigger``) the moment the trace shows the requests running, never by the test process,
which runs the clients and can be off the CPU for longer than the requests run.

The tests run in file order and share the deployment (starting a server takes ~20 s); the
servers run in their own process groups and are stopped by PID whatever happens.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm")
pytest.importorskip("openai")
pytest.importorskip("psutil")

import openai
import psutil
from life_kit import assert_decided_once_and_ended, assert_legal, events, streams
from sink_trigger import SinkTrigger

from residentkv.adapters.vllm.witness import Witness, make_claim
from residentkv.trace.gates import check_trace

pytestmark = pytest.mark.vllm

#: one KV block of the tiny model in the host tier (2 layers, K and V, float32)
BLOCK_BYTES = 128 * 2 * 32 * 4 * 2 * 2
#: room for two claims of two blocks: a third is refused at the door
TIER_BYTES = 4 * BLOCK_BYTES
#: room for eight: the later incarnations hold several tenants' claims at once
WIDE_TIER_BYTES = 16 * BLOCK_BYTES
OWNER = "tenant:a/session:1"
#: tokens: as long as the model allows (max_model_len 2048 less the 297-token prompt, a margin),
#: so that a request is still running when its engine is stopped
LONG = 1740


class Deployment:
    """One work dir and sink; the servers started on it in turn (one incarnation each)."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.witness: Witness | None = None
        self.shared: Any = None
        self.pool = ThreadPoolExecutor(max_workers=8)

    def start(self, *server_args: str, tier_bytes: int = TIER_BYTES) -> Witness:
        self.witness = Witness(self.work, shape="server", host_tier_bytes=tier_bytes,
                               server_args=list(server_args))
        # one client for the pool's threads, made here: a client made in a thread while
        # another thread's request runs waits for that request to end (measured: 4.4 s for a
        # 1500-token request), which turns concurrent clients into sequential ones
        self.shared = self.client(timeout=90)
        return self.witness

    @property
    def w(self) -> Witness:
        assert self.witness is not None
        return self.witness

    @property
    def sink(self) -> Path:
        return self.w.sink

    def client(self, **kw: Any) -> Any:
        """The official client, default retries (a claim-scoped error must say: no retry)."""
        return openai.OpenAI(base_url=self.w.backend.server.base_url + "/v1", api_key="none",
                             **kw)

    def ask(self, claimed: dict[str, Any], prompt: list[int], max_tokens: int = 4,
            stream: bool = False, client: Any = None) -> Any:
        """One completion with its raw response (headers), or the exception it raised."""
        client = client or self.shared
        body = {"ignore_eos": True, "return_token_ids": True, "kv_transfer_params": claimed}
        try:
            if stream:
                chunks = client.completions.create(
                    model=self.w.model_id, prompt=prompt, max_tokens=max_tokens,
                    temperature=0.0, stream=True, extra_body=body)
                return [c for c in chunks]
            return client.completions.with_raw_response.create(
                model=self.w.model_id, prompt=prompt, max_tokens=max_tokens, temperature=0.0,
                extra_body=body)
        except openai.APIError as exc:
            return exc

    def submit(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Future[Any]:
        return self.pool.submit(fn, *args, **kw)

    def close(self) -> None:
        if self.witness is not None:
            self.witness.close()
        self.pool.shutdown(wait=False, cancel_futures=True)


@pytest.fixture(scope="module")
def life(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    deployment = Deployment(tmp_path_factory.mktemp("life"))
    deployment.start()
    try:
        yield deployment
    finally:
        deployment.close()


def full(cid: str, owner: str = OWNER, **over: Any) -> dict[str, Any]:
    return {"resident_claim": make_claim(cid, owner, "tiny-llama", f"obj-{cid}") | over}


def by_ref(cid: str, owner: str = OWNER) -> dict[str, Any]:
    return {"resident_claim_ref": {"claim_id": cid, "owner_scope": owner}}


def outcome(answer: Any) -> dict[str, Any]:
    """The claim outcome a client got: from a response body, or a claim-scoped error."""
    if isinstance(answer, openai.APIError):
        body = answer.body if isinstance(answer.body, dict) else {}
        found = body.get("resident_claim")
        assert isinstance(found, dict), answer
        return found
    if isinstance(answer, list):  # a finished stream: the outcome is in the headers only
        raise AssertionError("a stream carries its outcome in headers; use ask(stream=False)")
    parsed = answer.parse()
    return dict(parsed.kv_transfer_params["resident_claim"])


def claim_scoped_error(answer: Any, cid: str) -> dict[str, Any]:
    """*answer* is a claim-scoped error naming *cid* that the official client did not retry."""
    assert isinstance(answer, openai.APIError), answer
    found = outcome(answer)
    assert found["claim_id"] == cid, found
    if isinstance(answer, openai.APIStatusError):
        assert answer.response.headers["x-should-retry"] == "false"
        assert answer.response.headers["x-residentkv-claim-id"] == cid
    return found


def wait_for(sink: Path, done: Callable[[list[dict[str, Any]]], bool],
             timeout: float = 120) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        evs = events(sink)
        if done(evs):
            return evs
        assert time.monotonic() < deadline, "the trace never showed it"
        time.sleep(0.1)


def named(evs: list[dict[str, Any]], event: str, cid: str) -> list[dict[str, Any]]:
    return [e for e in evs if e["event"] == event and e["claim_id"] == cid]


def served_or_stopped(answer: Any, cid: str, served: str) -> bool:
    """A request its engine served to the end has its real outcome (*served*); one the stop
    cut got a claim-scoped ``engine_stopped``, never a silent cut or an anonymous answer.
    Returns whether it was stopped.

    The load that keeps a request running when its engine is stopped is not under a test's
    control (an unloaded machine decodes the tiny model at ~3 ms a token, a loaded one can hold
    a client thread for seconds), so each answer is checked for what it is. The trace's
    ``request_finished`` of a served request waits for the claim's store to complete, so a stop
    may come between the client's last token and that line: a served answer needs no finish in
    the trace."""
    if isinstance(answer, openai.APIError):
        # (fail-closed either way: a response still on its way to the server when the engine
        # went is answered engine_stopped, though the trace may show the request served)
        assert claim_scoped_error(answer, cid)["outcome"] == "engine_stopped"
        return True
    if isinstance(answer, list):  # a stream: its outcome was in its headers
        assert answer and answer[-1].choices[0].finish_reason == "length", (
            "a stream cut without a claim-scoped error")
    else:
        # served to the end: an answer vLLM aborted as its engine stopped is no served one
        assert answer.parse().choices[0].finish_reason == "length", "cut without an error"
        assert outcome(answer)["outcome"] == served
    return False


def started_for(evs: list[dict[str, Any]], cid: str) -> list[dict[str, Any]]:
    return [e for e in evs if e["event"] == "request_started" and e.get("claim_ref") == cid]


def engine_core(server_pid: int) -> Any:
    for child in psutil.Process(server_pid).children(recursive=True):
        try:
            title = " ".join(child.cmdline()) + " " + child.name()
        except psutil.Error:
            continue
        if "EngineCore" in title:
            return child
    raise AssertionError("no EngineCore process under the server")


def register(life: Deployment, cid: str, prompt: list[int], **over: Any) -> None:
    life.w.reset()
    assert outcome(life.ask(full(cid, **over), prompt))["outcome"] == "offloaded"
    life.w.reset()


# ------------------------------------------------------------------ the first incarnation


def test_a_foreign_reference_before_registration_changes_nothing(life: Deployment) -> None:
    sink = life.sink
    cid, prompt = "life-foreign", life.w.prompt("life-foreign", 0)
    try:
        foreign = life.ask(by_ref(cid, "tenant:b/session:9"), prompt)
        register(life, cid, prompt)
        reuse = life.ask(by_ref(cid), prompt)
    finally:
        life.w.op.release_claims([cid])
    assert outcome(foreign)["outcome"] == "rejected"  # answered about that request
    assert foreign.headers["x-residentkv-claim-outcome"] == "rejected"
    assert outcome(reuse)["outcome"] == "restored"
    (result,) = check_trace(sink, gates=("observation",), claim_id=cid).results
    assert result.passed, result.missing
    assert_legal(sink)
    assert_decided_once_and_ended(sink)


def test_pressure_and_release_decide_each_claim_once(life: Deployment) -> None:
    sink = life.sink
    prompts = {c: life.w.prompt("life-pressure", i) for i, c in enumerate(("p1", "p2", "p3"))}
    try:
        register(life, "p1", prompts["p1"])
        register(life, "p2", prompts["p2"])
        full_tier = outcome(life.ask(full("p3"), prompts["p3"]))
        assert full_tier["outcome"] == "rejected"
        assert full_tier["reason"].startswith("host tier full")
        assert life.w.op.release_claims(["p1"]) == 1  # room again
        again = outcome(life.ask(full("p3"), prompts["p3"]))
        released = outcome(life.ask(full("p1"), prompts["p1"]))  # the released claim, in full
    finally:
        life.w.op.release_claims(["p1", "p2", "p3"])
    assert again["outcome"] == "rejected" and "rejected (host tier full" in again["reason"]
    assert released["outcome"] == "rejected" and "released (operator release)" in released[
        "reason"]
    evs = events(sink)
    assert [e["claim_id"] for e in evs if e["event"] == "claim_accepted"
            and e["claim_id"].startswith("p")] == ["p1", "p2"]
    assert not named(evs, "claim_restore_required", "p1")
    assert_legal(sink)
    assert_decided_once_and_ended(sink)


def test_an_expiring_claim_expires_before_its_kv_leaves_and_budgets_are_named(
        life: Deployment) -> None:
    sink = life.sink
    cid, prompt = "life-expiring", life.w.prompt("life-expiring", 0)
    mine = [cid, "life-e2", "life-e3", "life-e4"]
    try:
        register(life, cid, prompt, protection_mode="expiring", expires_after_s=4.0)
        assert outcome(life.ask(by_ref(cid), prompt))["outcome"] == "restored"
        wait_for(sink, lambda evs: bool(named(evs, "claim_expired", cid)))
        life.w.reset()
        late = outcome(life.ask(by_ref(cid), prompt))
        # the expired claim's slots are free again: the tier takes two new claims
        life.w.op.call("configure", budgets={"claims": 1, "blocks": None, "bytes": None})
        register(life, "life-e2", life.w.prompt("life-expiring", 1))
        over = outcome(life.ask(full("life-e3"), life.w.prompt("life-expiring", 2)))
        register(life, "life-e4", life.w.prompt("life-expiring", 3), owner="tenant:c/session:1")
    finally:
        life.w.op.release_claims(mine)
        life.w.op.call("configure", budgets={"claims": None, "blocks": None, "bytes": None})
    assert late["outcome"] == "rejected"
    assert "expired (expires_after_s=4 elapsed)" in late["reason"]
    assert over["outcome"] == "rejected"
    assert over["reason"].startswith("budget per_owner_claims exceeded")
    evs = events(sink)
    (expired,) = named(evs, "claim_expired", cid)
    last_use = max(e["seq"] for e in evs if e["claim_id"] == cid and e is not expired)
    assert expired["seq"] > last_use
    assert_legal(sink)
    assert_decided_once_and_ended(sink)


def test_a_killed_engine_core_answers_its_claimed_requests_by_name(life: Deployment) -> None:
    w = life.w
    p1, p2 = w.prompt("life-kill", 1), w.prompt("life-kill", 2)
    register(life, "kill-1", p1)
    core = engine_core(w.backend.server.proc.pid)
    with SinkTrigger(life.sink, [("claim_reused", "kill-1"), ("claim_offloaded", "kill-2")],
                     signal_to=(core.pid, signal.SIGKILL)) as trigger:
        streamed = life.submit(life.ask, by_ref("kill-1"), p1, LONG, True)
        registering = life.submit(life.ask, full("kill-2"), p2, LONG)
        trigger.acted()  # nothing written before the kill is lost
    stream_answer, registration = streamed.result(timeout=120), registering.result(timeout=120)
    evs = events(life.sink)
    stopped = [served_or_stopped(stream_answer, "kill-1", "restored"),
               served_or_stopped(registration, "kill-2", "offloaded")]
    assert any(stopped), "both requests ended before the kill landed: nothing was stopped"
    if stopped[1]:
        lost = claim_scoped_error(registration, "kill-2")
        assert "engine_restarted" in lost["reason"]
        assert isinstance(registration, openai.APIStatusError)
        assert registration.status_code == 503
    # not retried: the server saw each request once
    assert len(started_for(evs, "kill-2")) == 1 and len(started_for(evs, "kill-1")) == 2
    w.backend.server.proc.wait(60)  # vLLM's API server ends when its engine died
    w.close()


# ------------------------------------------------------------------ the second incarnation


def test_a_restart_on_the_same_sink_ends_the_old_claims_and_answers_them_with_the_loss(
        life: Deployment) -> None:
    before = streams(life.sink)
    life.start(tier_bytes=WIDE_TIER_BYTES)
    prompt = life.w.prompt("life-kill", 1)
    life.w.reset()
    again = outcome(life.ask(full("kill-1"), prompt))  # the full claim: the loss, not "held"
    assert again["outcome"] == "rejected" and "harmed (engine_restarted)" in again["reason"]
    reference = outcome(life.ask(by_ref("kill-1"), prompt))
    assert reference["outcome"] == "rejected" and reference["reason"].startswith("not held: ")
    register(life, "restart-1", life.w.prompt("life-restart", 0))  # a new id is accepted
    parts = streams(life.sink)
    assert len(parts) == len(before) + 1
    head = parts[-1]
    assert head[0]["event"] == "stream_started" and head[0]["seq"] == 0
    assert head[0].get("incarnation") != before[-1][0].get("incarnation")
    harmed = {e["claim_id"]: e for e in head[1:3]}
    assert set(harmed) == {"kill-1", "kill-2"}
    assert all(e["event"] == "claim_harmed" and e["cause"] == "engine_restarted"
               for e in harmed.values())
    evs = parts[-1]
    assert not named(evs, "claim_accepted", "kill-1")
    assert not [e for e in evs if e["event"] == "claim_restore_required"
                and e["claim_id"] == "kill-1"]
    assert_legal(life.sink)
    assert_decided_once_and_ended(life.sink)


def test_sigterm_under_load_with_the_default_shutdown_timeout_answers_every_claim(
        life: Deployment) -> None:
    w = life.w
    prompts = [w.prompt("life-term", i) for i in range(4)]
    # SIGTERM: what an orchestrator sends
    with SinkTrigger(life.sink, [("claim_offloaded", f"term-{i}") for i in range(4)],
                     signal_to=(w.backend.server.proc.pid, signal.SIGTERM)) as trigger:
        asks = [life.submit(life.ask, full(f"term-{i}", f"tenant:{i % 2}/session:1"), p, LONG,
                            i % 2 == 1) for i, p in enumerate(prompts)]
        trigger.acted()
    answers = [a.result(timeout=120) for a in asks]  # never a hang
    w.backend.server.proc.wait(60)
    stopped = [served_or_stopped(a, f"term-{i}", "offloaded")
               for i, a in enumerate(answers)]
    assert any(stopped), "every request ended before SIGTERM landed: nothing was stopped"
    w.close()


# ------------------------------------------------------------------ the third incarnation


def test_sigterm_under_load_with_a_shutdown_timeout_drains_ends_claims_and_closes(
        life: Deployment) -> None:
    life.start("--shutdown-timeout", "30", tier_bytes=WIDE_TIER_BYTES)
    w = life.w
    prompts = [w.prompt("life-drain", i) for i in range(4)]
    register(life, "drain-0", prompts[0])
    running = [("claim_accepted", "drain-1"), ("claim_accepted", "drain-2"),
               ("claim_restore_required", "drain-0")]  # all three running
    with SinkTrigger(life.sink, running,
                     signal_to=(w.backend.server.proc.pid, signal.SIGTERM)) as trigger:
        asks = [life.submit(life.ask, by_ref("drain-0"), prompts[0], 300)]
        asks += [life.submit(life.ask, full(f"drain-{i}", f"tenant:{i}/session:1"), prompts[i],
                             300) for i in (1, 2)]
        trigger.acted()
    late = life.ask(full("drain-late"), prompts[3])  # arrives while the engine drains
    answers = [a.result(timeout=120) for a in asks]
    assert [outcome(a)["outcome"] for a in answers] == ["restored", "offloaded", "offloaded"]
    assert all(a.headers["x-residentkv-claim-outcome"] for a in answers)
    assert claim_scoped_error(late, "drain-late")["outcome"] == "engine_stopped"
    w.backend.server.proc.wait(60)
    w.close()
    last = streams(life.sink)[-1]
    assert last[-1]["event"] == "stream_closed" and last[-1]["reason"] == "shutdown"
    harms = {e["claim_id"]: e["cause"] for e in last if e["event"] == "claim_harmed"}
    assert {c for c, cause in harms.items() if cause == "shutdown"} == {
        "drain-0", "drain-1", "drain-2"}
    assert {c for c, cause in harms.items() if cause == "engine_restarted"} == {
        "restart-1", *(f"term-{i}" for i in range(4))}
    started = {e["request_id"] for e in last if e["event"] == "request_started"}
    finished = {e["request_id"] for e in last if e["event"] == "request_finished"}
    assert started == finished  # nothing left running in a closed stream
    assert_legal(life.sink)
    assert_decided_once_and_ended(life.sink)


# ------------------------------------------------------------------ the fourth incarnation


def test_an_abort_is_answered_by_what_became_of_the_engine(life: Deployment) -> None:
    """vLLM answers a request it aborts with ``finish_reason: "abort"``, which says nothing of
    the claim. Paused by ``/pause`` (which aborts), the engine lives on: the abort goes out with
    the claim's outcome, and the claim is still held. Stopped by a SIGTERM of its own (as an
    init system sends it to every process of a unit; here to the EngineCore alone, so that the
    server's kill does not race it), the engine aborts its running requests, answers them, and
    ends only after its teardown: the aborts reach the server first, every time, and each is
    answered by name with the loss the trace records (``claim_harmed``, cause ``shutdown``)."""
    life.start(tier_bytes=WIDE_TIER_BYTES)
    w = life.w
    prompts = [w.prompt("life-abort", i) for i in range(4)]

    def running(cids: list[str], first: int, **act: Any) -> list[Future[Any]]:
        """The claims' requests (the first streamed); *act* lands once the engine runs them
        all."""
        with SinkTrigger(life.sink, [("claim_offloaded", c) for c in cids], **act) as trigger:
            asks = [life.submit(life.ask, full(c, f"tenant:{i}/session:1"), prompts[first + i],
                                LONG, i == 0) for i, c in enumerate(cids)]
            trigger.acted()
        return asks

    paused = running(["pause-0", "pause-1"], 0,
                     post=w.backend.server.base_url + "/pause?mode=abort")
    stream, plain = (a.result(timeout=120) for a in paused)
    assert w.backend.server.post("/resume") == 200
    assert stream[-1].choices[0].finish_reason == "abort"
    assert plain.headers["x-residentkv-claim-outcome"] == "offloaded"
    assert plain.parse().choices[0].finish_reason == "abort"
    assert w.op.release_claims(["pause-0", "pause-1"]) == 2  # held, as their clients were told

    core = engine_core(w.backend.server.proc.pid)
    stopping = running(["signal-0", "signal-1"], 2, signal_to=(core.pid, signal.SIGTERM))
    answers = [a.result(timeout=120) for a in stopping]
    w.backend.server.proc.wait(60)  # vLLM's API server ends when its engine did
    w.close()
    last = streams(life.sink)[-1]
    for i, answer in enumerate(answers):
        cid = f"signal-{i}"
        lost = claim_scoped_error(answer, cid)
        assert lost["outcome"] == "engine_stopped" and "cause shutdown" in lost["reason"]
        (accepted,) = named(last, "claim_accepted", cid)
        assert [e["finish_reason"] for e in last if e["event"] == "request_finished"
                and e["request_id"] == accepted["request_id"]] == ["abort"]  # vLLM aborted it
        assert [e["cause"] for e in named(last, "claim_harmed", cid)] == ["shutdown"]
    assert last[-1]["event"] == "stream_closed" and last[-1]["reason"] == "shutdown"
    assert_legal(life.sink)
    assert_decided_once_and_ended(life.sink)
