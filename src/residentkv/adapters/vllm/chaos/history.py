"""The history checker: what every client saw, joined to what the engine's sink says.

Each exchange is joined to its request in the sink by the request's ticket (the middleware's
``X-Request-Id``, ``rkv-...``, or the caller's own on unclaimed requests; vLLM builds its
request id from it). Then, in numbered steps:

1. **requests** -- each claimed response's outcome against the trace's outcome of that request
   (the decisive event, the ``seq`` the outcome cites, the claim it names, the finish status);
   a served response the trace never saw; unfinished requests;
2. **answers** -- claimed responses without any outcome (anonymous), and those the official
   client would retry;
3. **claims** -- every claim id of the run across the sink's streams: accepted in more than one
   incarnation or after its end, ended twice (decided twice); open where its stream closed and
   not ended at the next incarnation's head, or a registration never decided (undecided);
4. **content and isolation** -- restored outputs against the recompute of the same prompt
   (with the recomputed outputs of the same run as a baseline), restores for foreign requests;
5. **load** -- throughput and latency percentiles per kind of answer;
6. **conformance** -- gate ``conformance`` over the whole sink, if this build has it (never
   assumed: unavailable is reported as such and fails the run).

The checker reads the history and the sink only; it decides nothing about the engine that the
two files do not show.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from residentkv.adapters.vllm.chaos.model import (
    CLAIMED_KINDS,
    REUSE_KINDS,
    Exchange,
    History,
    OpKind,
    Transport,
)
from residentkv.adapters.vllm.chaos.sessions import client_outcome
from residentkv.adapters.vllm.chaos.sink import (
    Event,
    Sink,
    SinkStream,
    TraceRequest,
    read_sink,
    ticket_of,
)
from residentkv.adapters.vllm.server import ENGINE_STOPPED
from residentkv.errors import TraceReadError
from residentkv.findings import Finding
from residentkv.model.automaton import ENDING_STATE
from residentkv.model.vocabulary import GateName
from residentkv.trace.gates import check_trace
from residentkv.trace.registry import GATES

__all__ = ["BOUNDARY", "Figure", "check_history", "conformance_verdict", "trace_outcome"]

BOUNDARY = ("a chaos run shows what these clients saw and what this engine's sink says under "
            "this seed's load and faults on this machine; not that every interleaving, fault "
            "or deployment behaves the same")


class Figure(StrEnum):
    """The figures a chaos run reports; :data:`MUST_BE_ZERO` decide its exit code."""

    REQUESTS = "requests"
    RESPONSES = "responses"
    NOT_DELIVERED = "not_delivered"
    CONNECTION_LOST = "connection_lost"
    SERVED = "served"
    DISAGREEMENTS = "disagreements"
    UNDECIDED = "undecided_claims"
    DECIDED_TWICE = "decided_twice"
    ANONYMOUS = "anonymous_claimed_responses"
    RETRIED = "retried_claimed_responses"
    RESTORED_DIFFERS = "restored_output_differs"
    CROSS_TENANT = "cross_tenant_restores"
    UNFINISHED = "unfinished_requests"
    RESTORED_COMPARED = "restored_outputs_compared"
    RECOMPUTED_COMPARED = "recomputed_outputs_compared"
    RECOMPUTED_DIFFERS = "recomputed_output_differs"
    CLAIMS = "claims"
    LIVE_CLAIMS = "live_claims"
    STREAMS = "streams"
    UNREADABLE_LINES = "unreadable_sink_lines"
    FAULTS_APPLIED = "faults_applied"
    FAULTS_NOT_APPLIED = "faults_not_applied"


MUST_BE_ZERO: tuple[Figure, ...] = (
    Figure.DISAGREEMENTS, Figure.UNDECIDED, Figure.DECIDED_TWICE, Figure.ANONYMOUS,
    Figure.RETRIED, Figure.RESTORED_DIFFERS, Figure.CROSS_TENANT)

#: the event that decides each outcome a client can be told (what its ``seq`` may cite)
OUTCOME_EVENTS: dict[str, frozenset[str]] = {
    "accepted": frozenset({"claim_accepted", "kv_lookup"}),
    "offloaded": frozenset({"claim_offloaded"}),
    "restored": frozenset({"claim_restored", "claim_reused"}),
    "refused": frozenset({"active_request_refused", "claim_restore_failed"}),
    "rejected": frozenset({"claim_rejected"}),
    "fallback_recompute": frozenset({"claim_restored", "claim_restore_failed"}),
}
#: events of a restore: none may appear on a request naming another owner's claim
RESTORE_EVENTS = frozenset({"claim_restore_required", "kv_load_started", "kv_load_finished",
                            "claim_restored", "claim_reused"})
LATENCY_KINDS = ("restored", "not_restored", "refused", "registration", "unclaimed", "foreign",
                 ENGINE_STOPPED, "error")


def trace_outcome(req: TraceRequest) -> str | None:
    """The claim outcome the trace gives one request: its decisive event, or ``accepted``
    for a held claim served without a restore; None for a request that names no claim."""
    names = {e.name for e in req.events}
    if "claim_rejected" in names:
        return "rejected"
    if "active_request_refused" in names:
        return "refused"
    sources = {e.data.get("source") for e in req.events if e.name == "claim_restored"}
    if "fallback_recompute" in sources:
        return "fallback_recompute"
    if "offload_tier" in sources:
        return "restored"
    if "claim_offloaded" in names:
        return "offloaded"
    if "claim_accepted" in names or any(e.claim for e in req.events):
        return "accepted"
    return None


def _ending(e: Event) -> bool:
    """An event that ends its claim (the automaton's ending states); a restore failure only
    when it is the claim's refusal, not a record."""
    return e.name in ENDING_STATE and (e.name != "claim_restore_failed"
                                       or e.data.get("outcome_type") == "refusal")


@dataclass
class _Check:
    """The checker's working state: figures, findings, and what the renderers list."""

    history: History
    sink: Sink
    history_path: str
    figures: Counter[str] = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)

    def add(self, figure: Figure, code: str, message: str, *, line: int | None = None,
            on_sink: bool = True, severity: str = "error", notes: Iterable[str] = ()) -> None:
        self.figures[figure.value] += 1
        self.findings.append(Finding(
            code=code, message=message, severity=severity, notes=tuple(notes),
            path=self.sink.path if on_sink else self.history_path,
            line=line if on_sink else None))


def _load(history: History) -> list[Exchange]:
    return [x for x in history.exchanges if x.kind is not OpKind.REFERENCE]


def _delivered(ex: Exchange) -> bool:
    return ex.status is not None or ex.transport in (Transport.LOST, Transport.TIMEOUT)


def _failed(ex: Exchange) -> bool:
    """The response ended in an error: an error status, an error in the stream, or the
    connection lost under it."""
    return (ex.status is not None and ex.status >= 400) or ex.error_type is not None \
        or ex.transport in (Transport.LOST, Transport.TIMEOUT)


def _complete(ex: Exchange) -> bool:
    """A whole completion: 2xx, finished, no error."""
    return ex.status is not None and 200 <= ex.status < 300 and not _failed(ex) \
        and ex.finish_reason is not None


def _who(ex: Exchange) -> str:
    return (f"op {ex.op_id} ({ex.kind}, {'stream' if ex.stream else 'plain'}, "
            f"claim {ex.claim_id}, ticket {ex.ticket})")


# ------------------------------------------------------------------ 1. requests


def _check_requests(c: _Check) -> None:
    for ex in _load(c.history):
        if not _delivered(ex):
            continue
        req = c.sink.find_request(ex.ticket) if ex.ticket else None
        if req is None:
            if _needs_the_engine(ex):
                c.add(Figure.DISAGREEMENTS, "C001",
                      f"{_who(ex)}: answered HTTP {ex.status}"
                      + (f" ({client_outcome(ex)})" if client_outcome(ex) else "")
                      + " but the sink has no request with this ticket", on_sink=False)
            continue
        found = _outcome_disagrees(c, ex, req) or _finish_disagrees(ex, req)
        if found is not None:
            c.add(Figure.DISAGREEMENTS, "C001", f"{_who(ex)}: {found[0]}", line=found[1])


def _needs_the_engine(ex: Exchange) -> bool:
    """Whether the answer says the engine took the request in: a whole completion, a
    refusal, or a claim outcome other than the stop's."""
    told = client_outcome(ex)
    return _complete(ex) or ex.status == 409 or (told is not None and told != ENGINE_STOPPED)


#: a disagreement: what, and the sink line that shows the trace's side
Disagreement = tuple[str, int]


def _outcome_disagrees(c: _Check, ex: Exchange, req: TraceRequest) -> Disagreement | None:
    told = client_outcome(ex)
    traced = trace_outcome(req)
    line = (req.started or req.events[0]).line
    if ex.kind not in CLAIMED_KINDS:
        if told is not None or traced is not None:
            return f"an unclaimed request; client told {told!r}, trace {traced!r}", line
        return None
    if told is None or told == ENGINE_STOPPED:
        return None  # no outcome: step 2 counts it; a stop: the finish is checked
    if told != traced:
        return f"client told {told!r}, the trace says {traced!r}", line
    named = (ex.outcome or {}).get("claim_id", ex.claim_header)
    if named is not None and str(named) != ex.claim_id:
        return f"the outcome names claim {named!r}, the request named {ex.claim_id!r}", line
    return _cited_seq_disagrees(c, ex, req, told, line)


def _cited_seq_disagrees(c: _Check, ex: Exchange, req: TraceRequest, told: str,
                         line: int) -> Disagreement | None:
    seq = (ex.outcome or {}).get("seq")
    if not isinstance(seq, int):
        return None
    cited = c.sink.streams[req.stream].by_seq.get(seq)
    if cited is None or cited.request != req.request_id \
            or cited.name not in OUTCOME_EVENTS.get(told, frozenset()):
        what = f"{cited.name} of {cited.request}" if cited else "no event"
        return f"outcome {told!r} cites seq {seq}, which is {what}", \
            cited.line if cited else line
    return None


def _finish_disagrees(ex: Exchange, req: TraceRequest) -> Disagreement | None:
    """The HTTP answer against the request's ``request_finished``: a success the trace did not
    serve, a refusal it did not refuse, an error (a stop included) for a request it served."""
    finished = req.finished
    if ex.status is None or finished is None:
        return None
    status = finished.data.get("status")
    ok = 200 <= ex.status < 300 and ex.transport is None and ex.error_type is None
    if (ok and status != "served") or (ex.status == 409 and status != "refused") \
            or (ex.status >= 500 and status == "served"):
        told = client_outcome(ex)
        return (f"client got HTTP {ex.status}" + (f" ({told})" if told else "")
                + f", the trace finished the request {status!r}", finished.line)
    return None


def _check_unfinished(c: _Check) -> None:
    tickets = {x.ticket for x in c.history.exchanges if x.ticket}
    for stream in c.sink.streams:
        for req in stream.requests.values():
            if req.started is None or req.finished is not None \
                    or ticket_of(req.request_id) not in tickets:
                continue
            c.add(Figure.UNFINISHED, "C010",
                  f"request {req.request_id} started in stream {stream.index} and never "
                  "finished there", line=req.started.line, severity="note")


# ------------------------------------------------------------------ 2. answers


def _anonymity(ex: Exchange) -> str | None:
    """Why a claimed response does not carry its outcome, or None when it does: it names no
    outcome at all, or it ended in an error that names no claim (whatever its start said)."""
    how = (f"HTTP {ex.status}" + (f" {ex.error_type}" if ex.error_type else "")
           + (f" then {ex.transport}" if ex.transport else "")
           if ex.status is not None else str(ex.transport))
    told = client_outcome(ex)
    if told is None:
        return f"{how} names no claim outcome"
    if _failed(ex) and ex.outcome is None:
        return f"began with outcome {told!r} and ended in an error ({how}) that names no claim"
    return None


def _check_answers(c: _Check) -> None:
    for ex in _load(c.history):
        if ex.kind not in CLAIMED_KINDS or not _delivered(ex):
            continue
        why = _anonymity(ex)
        if why is not None:
            c.add(Figure.ANONYMOUS, "C004", f"{_who(ex)}: {why}", on_sink=False,
                  notes=[ex.error_message] if ex.error_message else ())
        if ex.would_retry:
            c.add(Figure.RETRIED, "C005",
                  f"{_who(ex)}: the official client would retry "
                  + (f"HTTP {ex.status} (x-should-retry: {ex.should_retry_header})"
                     if ex.status is not None else str(ex.transport)), on_sink=False)


# ------------------------------------------------------------------ 3. claims


@dataclass
class _ClaimLife:
    claim_id: str
    accepted: list[Event] = field(default_factory=list)
    accepted_streams: list[int] = field(default_factory=list)
    ended: list[Event] = field(default_factory=list)
    status: str = "never_accepted"


def _run_claims(c: _Check) -> set[str]:
    return {x.claim_id for x in c.history.exchanges
            if x.claim_id is not None and x.kind in CLAIMED_KINDS}


def _check_claims(c: _Check) -> None:
    for cid in sorted(_run_claims(c)):
        life = _ClaimLife(cid)
        for stream in c.sink.streams:
            _follow(c, life, stream)
        _close_last(c, life)
        if life.accepted:
            c.figures[Figure.CLAIMS.value] += 1
        c.claims.append({"claim_id": cid, "status": life.status,
                         "accepted_in": life.accepted_streams,
                         "endings": [e.name for e in life.ended]})
    _check_registrations(c)


def _follow(c: _Check, life: _ClaimLife, stream: SinkStream) -> None:
    events = stream.claims.get(life.claim_id, [])
    if life.status == "open":  # open at the previous stream's end: ended at this one's head?
        head = {e.line for e in stream.head()}
        if any(_ending(e) and e.line in head for e in events):
            life.status = "ended"
        else:
            _vanished(c, life, stream.first_line,
                      f"open when stream {stream.index} started and not ended at its head")
    for e in events:
        if e.name == "claim_accepted":
            _accepted(c, life, e, stream.index)
        elif _ending(e):
            _ended(c, life, e)
    if life.status == "open" and stream.closed is not None:
        _vanished(c, life, stream.closed.line,
                  f"open at the graceful close of stream {stream.index} (stream_closed)")


def _accepted(c: _Check, life: _ClaimLife, e: Event, stream: int) -> None:
    if life.status == "open" and stream in life.accepted_streams:
        return  # an identical repeat within one stream changes nothing (SPEC §4.2)
    if life.accepted:
        c.add(Figure.DECIDED_TWICE, "C003",
              f"claim {life.claim_id} accepted again in stream {stream} after "
              f"{'its end' if life.ended else 'an earlier acceptance'} (first accepted in "
              f"stream {life.accepted_streams[0]})", line=e.line)
    life.accepted.append(e)
    life.accepted_streams.append(stream)
    life.status = "open"


def _ended(c: _Check, life: _ClaimLife, e: Event) -> None:
    if life.ended:
        c.add(Figure.DECIDED_TWICE, "C003",
              f"claim {life.claim_id} ended twice: {life.ended[0].name} then {e.name}",
              line=e.line)
    life.ended.append(e)
    life.status = "ended"


def _vanished(c: _Check, life: _ClaimLife, line: int, why: str) -> None:
    c.add(Figure.UNDECIDED, "C002", f"claim {life.claim_id} vanished: {why}", line=line)
    life.status = "vanished"


def _close_last(c: _Check, life: _ClaimLife) -> None:
    if life.status != "open":
        return
    last = c.sink.streams[-1]
    if c.history.stopped_at_end and last.closed is None:
        _vanished(c, life, last.events[-1].line,
                  f"open when the harness stopped the server gracefully; stream {last.index} "
                  "has no closing event and no outcome for it")
    else:
        life.status = "live"
        c.figures[Figure.LIVE_CLAIMS.value] += 1


def _check_registrations(c: _Check) -> None:
    for ex in _load(c.history):
        if ex.kind not in (OpKind.REGISTER, OpKind.PRESSURE) or not ex.ticket:
            continue
        req = c.sink.find_request(ex.ticket)
        if req is None or req.started is None:
            continue
        if not {e.name for e in req.events} & {"claim_accepted", "claim_rejected"}:
            c.add(Figure.UNDECIDED, "C002",
                  f"{_who(ex)}: the registration reached the engine and was never decided",
                  line=req.started.line)


# ------------------------------------------------------------------ 4. content, isolation


def _check_content(c: _Check) -> None:
    refs = c.history.reference_tokens
    for ex in _load(c.history):
        if not _complete(ex) or ex.prompt not in refs:
            continue
        same = ex.tokens == refs[ex.prompt]
        if client_outcome(ex) == "restored":
            c.figures[Figure.RESTORED_COMPARED.value] += 1
            if not same:
                c.add(Figure.RESTORED_DIFFERS, "C006",
                      f"{_who(ex)}: restored tokens {ex.tokens} differ from the recompute "
                      f"{refs[ex.prompt]}", on_sink=False)
        else:
            c.figures[Figure.RECOMPUTED_COMPARED.value] += 1
            c.figures[Figure.RECOMPUTED_DIFFERS.value] += 0 if same else 1


def _check_isolation(c: _Check) -> None:
    for ex in _load(c.history):
        if ex.kind not in (OpKind.FOREIGN_REF, OpKind.FOREIGN_FULL):
            continue
        req = c.sink.find_request(ex.ticket) if ex.ticket else None
        restore = next((e for e in req.events if e.name in RESTORE_EVENTS), None) if req \
            else None
        if restore is not None or client_outcome(ex) == "restored":
            c.add(Figure.CROSS_TENANT, "C007",
                  f"{_who(ex)}: owner {ex.owner_scope} named another owner's claim and "
                  + (f"the trace restores it ({restore.name})" if restore
                     else "was told 'restored'"),
                  line=restore.line if restore else None, on_sink=restore is not None)


# ------------------------------------------------------------------ 5. load


def _category(ex: Exchange) -> str | None:
    told = client_outcome(ex)
    if ex.status is None:
        return None
    if ex.status == 409 or told == "refused":
        return "refused"
    if told == ENGINE_STOPPED:
        return ENGINE_STOPPED
    if _failed(ex):
        return "error"
    if ex.kind in REUSE_KINDS:
        return "restored" if told == "restored" else "not_restored"
    if ex.kind in (OpKind.REGISTER, OpKind.PRESSURE):
        return "registration"
    if ex.kind in (OpKind.FOREIGN_REF, OpKind.FOREIGN_FULL):
        return "foreign"
    return "unclaimed"


def _percentiles(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"count": 0, "p50": None, "p95": None, "p99": None, "max": None}
    if len(values) == 1:
        v = round(values[0], 2)
        return {"count": 1, "p50": v, "p95": v, "p99": v, "max": v}
    q = statistics.quantiles(values, n=100, method="inclusive")
    return {"count": len(values), "p50": round(q[49], 2), "p95": round(q[94], 2),
            "p99": round(q[98], 2), "max": round(max(values), 2)}


def _load_figures(c: _Check) -> dict[str, Any]:
    load = _load(c.history)
    by: dict[str, list[float]] = {k: [] for k in LATENCY_KINDS}
    for ex in load:
        cat = _category(ex)
        if cat is not None:
            by[cat].append(ex.latency_ms)
    c.figures[Figure.REQUESTS.value] = len(load)
    c.figures[Figure.RESPONSES.value] = sum(1 for x in load if x.status is not None)
    c.figures[Figure.NOT_DELIVERED.value] = sum(1 for x in load
                                               if x.transport is Transport.REFUSED)
    c.figures[Figure.CONNECTION_LOST.value] = sum(
        1 for x in load if x.transport in (Transport.LOST, Transport.TIMEOUT))
    served = sum(1 for x in load if _category(x) not in (None, "refused", "error"))
    c.figures[Figure.SERVED.value] = served
    seconds = max(c.history.load_served_s, 1e-9)
    return {"seconds": round(seconds, 2),
            "wall_seconds": round(c.history.load_ended_at - c.history.load_started_at, 2),
            "requests_per_s": round(len(load) / seconds, 2),
            "served_per_s": round(served / seconds, 2),
            "latency_ms": {k: _percentiles(v) for k, v in by.items()}}


# ------------------------------------------------------------------ 6. conformance


def conformance_verdict(sink: str | Path) -> dict[str, Any]:
    """Gate ``conformance`` over the whole sink, every stream of it: ``pass`` only when its
    stream verdict passes and the sink reads without a problem; ``unavailable`` in a build
    without the gate (the verdict is never assumed)."""
    if GateName.CONFORMANCE not in GATES:
        return {"status": "unavailable",
                "detail": "gate conformance is not in this build's gate registry"}
    try:
        check = check_trace(sink, gates=[GateName.CONFORMANCE.value])
    except TraceReadError as exc:
        return {"status": "error", "detail": str(exc)}
    verdict = check.conformance
    if verdict is None:
        return {"status": "error", "detail": "the gate gave no stream verdict"}
    failed = [{"claim_id": r.claim_id, "missing": r.missing,
               "illegal": r.illegal.model_dump(mode="json") if r.illegal else None}
              for r in check.results if not r.passed]
    passed = verdict.passed and check.problem_count == 0
    return {"status": "pass" if passed else "fail",
            "detail": f"{verdict.claims} claims judged over {len(verdict.streams)} streams: "
                      f"{len(verdict.failed)} failed, {len(verdict.live)} live, "
                      f"{check.problem_count} reader problem(s)",
            "failed": failed, "live": verdict.live,
            "streams": [s.model_dump(mode="json") for s in verdict.streams],
            "problems": [f.render() for f in check.problems[:20]]}


def _check_conformance(c: _Check, verdict: dict[str, Any]) -> None:
    if verdict["status"] == "unavailable":
        c.findings.append(Finding(code="C008", message=verdict["detail"], path=c.sink.path))
        return
    if verdict["status"] == "pass":
        return
    c.findings.append(Finding(code="C009", message=verdict["detail"], path=c.sink.path,
                              notes=tuple(verdict.get("problems", ()))))
    for claim in verdict.get("failed", ()):
        c.findings.append(Finding(
            code="C009", path=c.sink.path,
            message=f"claim {claim['claim_id']} fails conformance: missing "
                    f"{', '.join(claim['missing'])}",
            notes=(f"first illegal step: {claim['illegal']}",) if claim["illegal"] else ()))


# ------------------------------------------------------------------ the whole check


def _faults(c: _Check) -> None:
    for f in c.history.faults:
        if f.applied:
            c.figures[Figure.FAULTS_APPLIED.value] += 1
        else:
            c.add(Figure.FAULTS_NOT_APPLIED, "C011", f"{f.kind} due after {f.due_after_s:.1f} s of "
                  f"load: {f.detail}", on_sink=False, severity="note")


def _sink_lines(c: _Check) -> None:
    c.figures[Figure.STREAMS.value] = len(c.sink.streams)
    for line in c.sink.bad_lines:
        c.add(Figure.UNREADABLE_LINES, "C012", "not a JSON object (left out)", line=line,
              severity="note")


def check_history(history: History, sink_path: str | Path, history_path: str = "history.json",
                  *, conformance: dict[str, Any] | None = None) -> dict[str, Any]:
    """Judge a run: every figure, the findings behind the failing ones, and the verdict."""
    c = _Check(history=history, sink=read_sink(sink_path), history_path=history_path)
    for figure in Figure:
        c.figures[figure.value] += 0
    _check_requests(c)
    _check_unfinished(c)
    _check_answers(c)
    _check_claims(c)
    _check_content(c)
    _check_isolation(c)
    load = _load_figures(c)
    _faults(c)
    _sink_lines(c)
    verdict = conformance if conformance is not None else conformance_verdict(sink_path)
    _check_conformance(c, verdict)
    failing = [f.value for f in MUST_BE_ZERO if c.figures[f.value]]
    return {
        "schema": "residentkv.chaos/v1",
        "passed": not failing and verdict["status"] == "pass",
        "failing": failing,
        "must_be_zero": [f.value for f in MUST_BE_ZERO],
        "figures": dict(sorted(c.figures.items())),
        "load": load,
        "conformance": verdict,
        "findings": [f.model_dump(mode="json") for f in c.findings],
        "claims": c.claims,
        "streams": [{"index": s.index, "stream_id": s.stream_id, "first_line": s.first_line,
                     "events": len(s.events), "closed": s.closed is not None}
                    for s in c.sink.streams],
        "settings": history.settings.model_dump(mode="json"),
        "faults": [f.model_dump(mode="json") for f in history.faults],
        "incarnations": [i.model_dump(mode="json") for i in history.incarnations],
        "timeline": [{"t": x.sent_at, "ms": x.latency_ms, "client": x.client,
                      "kind": x.kind.value, "category": _category(x) or str(x.transport)}
                     for x in _load(history)],
        "load_window": [history.load_started_at, history.load_ended_at],
        "sink": str(sink_path),
        "history": history_path,
        "boundary": BOUNDARY,
    }
