"""Dialect ``resident-kv-artifact``: traces of the research artifact's patched vLLM connector.

The artifact names events and fields its own way (``request_initialized``,
``offload_worker_transfer_finished``, ``resident_claim_restoration_failed``, ``event_sequence``,
``monotonic_ns``, ``resident_claim_id`` ...). Each foreign event maps to at most one v1 event and
its ``event_sequence`` becomes ``seq`` (gaps are kept). The artifact emits no acceptance event:
its own gates treat the first ``request_initialized`` carrying ``resident_claim`` metadata as
the claim's registration, so exactly that event becomes
``claim_accepted(registration=pre_registered)``. That request then records no start of its own:
SPEC §4.3 has one ``request_started`` synthesized at the request's first event. These are the
only synthesized events, each listed in the report. The source's order is kept: an event's
``seq`` is ``2 × event_sequence + 1`` and a synthesized start takes the even number just before
the event it precedes, so every artifact number stays visible (``(seq - 1) / 2``, and
:attr:`~residentkv.trace.importers.base.ImportResult.origin`). Nothing else is invented: a
request finish whose status the artifact did not record is imported with ``status: null``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from residentkv.errors import TraceReadError, UserInputError
from residentkv.findings import Finding
from residentkv.limits import MAX_JSON_DEPTH, MAX_LINE_BYTES, json_depth_ok, read_input
from residentkv.model.events import EVENT_MODELS, SCHEMA_ID, Envelope
from residentkv.model.vocabulary import Arbiter
from residentkv.trace.duplicate_keys import first_duplicate_key
from residentkv.trace.importers.base import ImportReport, ImportResult

DIALECT = "resident-kv-artifact"
#: the source of an event the importer synthesized (never the artifact's own emitter)
SYNTHESIZED_SOURCE = "residentkv.import"

_PREDICATE = re.compile(
    # bounded digit runs: int() refuses strings past 4,300 digits, and no block count needs 19
    r"^(leading_prefix_at_least)\((\d{1,18})\)$|^(contiguous_range)\((\d{1,18}),\s*(\d{1,18})\)$"
)
_OUTCOME_TYPES = {"refusal", "demotion", "expiry", "harm"}
_IDENTITY = {
    "object_id": "reusable_object_id",
    "cache_identity": "cache_identity",
    "request_token_map_id": "request_token_map_id",
    "predicate_id": "predicate_id",
}
#: Fields consumed by every mapping (envelope and identity); the rest are reported per event.
_ALWAYS = {"event", "event_sequence", "monotonic_ns", "timestamp_ns", "request_id",
           "claim_id", "resident_claim_id", "resident_claim", *_IDENTITY.values()}

Fields = dict[str, Any]
Mapper = Callable[["_Importer", Fields], tuple[str, Fields, set[str]] | None]
#: integers beyond a signed 64-bit range are refused (no runtime counts that high)
_INT_LIMIT = 1 << 63


class WrongType(ValueError):
    """A foreign field whose JSON type is not the one the mapping needs (a located problem)."""

    def __init__(self, key: str, want: str, value: Any) -> None:
        super().__init__(f"field {key!r} must be {want}, found {_json_type(value)}")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "an array", dict: "an object"}.get(type(value), type(value).__name__)


def _get(d: Fields, key: str, want: str, default: Any = None) -> Any:
    """``d[key]`` checked against *want* (no truthiness, no coercion); absent or null gives
    *default*. *want*: ``bool``, ``int``, ``str``, ``str-list``, ``int-list``."""
    value = d.get(key)
    if value is None:
        return default
    ok = {
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool)
        and -_INT_LIMIT <= value < _INT_LIMIT,
        "str": isinstance(value, str),
        "str-list": isinstance(value, list) and all(isinstance(v, str) for v in value),
        "int-list": isinstance(value, list) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value),
    }[want]
    if not ok:
        label = {"bool": "a boolean", "int": "an integer in the signed 64-bit range",
                 "str": "a string", "str-list": "an array of strings",
                 "int-list": "an array of integers"}[want]
        raise WrongType(key, label, value)
    return value


def _claim_of(d: Fields) -> str | None:
    if _get(d, "resident_claim", "bool", False) is not True:
        return None
    cid = _get(d, "resident_claim_id", "str") or _get(d, "claim_id", "str")
    return cid or None


def _tiers(d: Fields) -> tuple[str, str]:
    t = _get(d, "transfer_type", "str-list", ["?", "?"])
    if len(t) != 2:
        raise WrongType("transfer_type", "an array of two tier names", t)
    return t[0], t[1]


def _job(d: Fields) -> int | None:
    job: int | None = _get(d, "job_id", "int")
    return job


class _Importer:
    def __init__(self, path: Path, report: ImportReport) -> None:
        self.path = path
        self.report = report
        self.accepted: set[str] = set()
        self.footprint: dict[str, int] = {}

    # ----------------------------------------------------------------------- mappers
    def request_initialized(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        cid = _claim_of(d)
        if cid is None or cid in self.accepted:
            return "request_started", {"prompt_tokens": _get(d, "num_prompt_tokens", "int")}, {
                "num_prompt_tokens"}
        return self._accept(cid, d)

    def _accept(self, cid: str, d: Fields) -> tuple[str, Fields, set[str]] | None:
        match = _PREDICATE.match(_get(d, "materialization_predicate", "str", ""))
        if match is None:
            self.report.drop("request_initialized",
                             "claim registration without a parseable materialization_predicate")
            return None
        start, blocks = (0, int(match.group(2))) if match.group(1) else (
            int(match.group(4)), int(match.group(5)))
        predicate: Fields = {"id": _get(d, "predicate_id", "str"), "kind": match.group(1) or
                             match.group(3), "blocks": blocks}
        if not match.group(1):
            predicate["start"] = start
        footprint = max(self.footprint.get(cid, 0), start + blocks)
        self.accepted.add(cid)
        self.report.synthesized.append({
            "seq": _seq(d["event_sequence"]), "event_sequence": d["event_sequence"],
            "event": "claim_accepted",
            "from": "request_initialized", "claim_id": cid,
            "why": "the artifact registers a claim by its first request_initialized carrying "
                   "resident_claim metadata; its own gates read it as the registration",
        })
        self.report.assume("claim_accepted.protection_mode = offloadable: the artifact's claims "
                           "are host-offload claims; the artifact records no mode")
        self.report.assume("claim_accepted.footprint_blocks = the claim's block_count_footprint "
                           "from its resident_claim_offloaded event (else the predicate's size)")
        fields = {"registration": "pre_registered", "protection_mode": "offloadable",
                  "footprint_blocks": footprint, "predicate": predicate}
        return "claim_accepted", fields, {"materialization_predicate"}

    def lookup(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        return "kv_lookup", {"hit_tokens": _get(d, "num_hit_tokens", "int", 0),
                             "async_load": _get(d, "will_load_async", "bool", False)}, {
            "num_hit_tokens", "will_load_async"}

    def store_created(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        src, dst = _tiers(d)
        return "kv_store_started", {"job_id": _job(d), "from_tier": src,
                                    "to_tier": dst}, {"job_id", "transfer_type"}

    def load_created(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        src, dst = _tiers(d)
        return "kv_load_started", {"job_id": _job(d), "from_tier": src,
                                   "to_tier": dst, "generation": _get(
                                       d, "restoration_generation", "int")}, {
            "job_id", "transfer_type", "restoration_generation"}

    def transfer_finished(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        src, dst = _tiers(d)
        used = {"job_id", "transfer_type", "success", "transfer_size"}
        success = _get(d, "success", "bool")
        if success is None:
            raise WrongType("success", "a boolean", None)
        common = {"job_id": _job(d), "bytes": _get(d, "transfer_size", "int"),
                  "success": success}
        if src == "GPU":
            return "kv_store_finished", {**common, "from_tier": src, "to_tier": dst}, used
        injected = (_get(d, "injected_restoration_failure", "bool", False)
                    or _get(d, "failure_injection_flag", "bool", False))
        return "kv_load_finished", {**common, "injected": injected, "generation": _get(
            d, "restoration_generation", "int")}, used | {"injected_restoration_failure",
                                                "failure_injection_flag",
                                                "restoration_generation"}

    def offloaded(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        return "claim_offloaded", {
            "generation": _get(d, "offload_generation", "int", 0),
            "from_tier": _get(d, "cache_tier_from", "str"),
            "to_tier": _get(d, "cache_tier_to", "str"),
            "block_count": _get(d, "block_count_footprint", "int", 0),
        }, {"offload_generation", "cache_tier_from", "cache_tier_to", "block_count_footprint"}

    def restore_required(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        return "claim_restore_required", {
            "generation": _get(d, "restoration_generation", "int", 0),
            "from_tier": _get(d, "cache_tier_from", "str"),
            "to_tier": _get(d, "cache_tier_to", "str"),
            "tokens": _get(d, "num_external_tokens", "int", 0),
        }, {"restoration_generation", "cache_tier_from", "cache_tier_to", "num_external_tokens"}

    def worker_load_failed(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        return "kv_load_failed", {
            "invalid_block_ids": _get(d, "invalid_block_ids", "int-list", []),
            "job_id": _job(d),
            "injected": _get(d, "failure_injection_flag", "bool", False),
            "generation": _get(d, "restoration_generation", "int"),
        }, {"invalid_block_ids", "job_id", "failure_injection_flag", "restoration_generation"}

    def restoration_failed(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        outcome = _get(d, "outcome_type", "str")
        if outcome not in _OUTCOME_TYPES:
            self.report.drop("resident_claim_restoration_failed",
                             f"outcome_type {outcome!r} is not a v1 outcome type "
                             "(refusal | demotion | expiry | harm)")
            return None
        return "claim_restore_failed", {
            "generation": _get(d, "restoration_generation", "int", 0),
            "reason": (_get(d, "restoration_failure_reason", "str")
                       or _get(d, "failure_reason", "str", "")),
            "injected": _get(d, "injected_restoration_failure", "bool", False),
            "outcome_type": outcome, "outcome_claim_id": _get(d, "outcome_claim_id", "str"),
        }, {"restoration_generation", "restoration_failure_reason", "failure_reason",
            "injected_restoration_failure", "outcome_type", "outcome_claim_id"}

    def restored(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        source = _get(d, "restoration_source", "str")
        if source not in ("offload_tier", "fallback_recompute"):
            self.report.drop("resident_claim_restored", f"restoration_source {source!r}")
            return None
        return "claim_restored", {"generation": _get(d, "restoration_generation", "int", 0),
                                  "source": source}, {"restoration_generation",
                                                      "restoration_source"}

    def refused(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        self.report.assume("active_request_refused.arbiter = harness for refusals the "
                           "artifact marks native_scheduler_refusal=false and emits outside "
                           "the scheduler")
        return "active_request_refused", self._refusal(d, Arbiter.HARNESS), {
            "outcome_claim_id", "blocking_claim_ids", "feasibility", "native_scheduler_refusal"}

    def scheduler_refused(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        return "active_request_refused", self._refusal(d, Arbiter.SCHEDULER_BOUNDARY), {
            "outcome_claim_id", "blocking_claim_ids", "feasibility"}

    @staticmethod
    def _refusal(d: Fields, arbiter: Arbiter) -> Fields:
        return {"outcome_claim_id": _get(d, "outcome_claim_id", "str"),
                "blocking_claim_ids": _get(d, "blocking_claim_ids", "str-list", []),
                "feasibility": _get(d, "feasibility", "str") or "unknown", "arbiter": arbiter}

    def scheduler_failure(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        return "scheduler_load_failure", {
            "policy": _get(d, "scheduler_failure_policy", "str"),
            "invalid_block_count": _get(d, "invalid_block_count", "int", 0),
            "failed_tokens": _get(d, "total_scheduler_failed_tokens", "int", 0),
            "finish_status": _get(d, "finish_status", "str"),
        }, {"scheduler_failure_policy", "invalid_block_count", "total_scheduler_failed_tokens",
            "finish_status"}

    def request_finished(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        self.report.assume("request_finished.status = null: the artifact's connector-side "
                           "finish events do not record the request's status")
        return "request_finished", {"status": None, "finish_reason": None}, set()

    def counter(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        value = _get(d, "failure_count", "int")
        value = _get(d, "request_failures", "int", 0) if value is None else value
        return "generic_counter", {"name": d["event"], "value": value}, {
            "failure_count", "request_failures"}


_MAPPERS: dict[str, Callable[[_Importer, Fields], tuple[str, Fields, set[str]] | None]] = {
    "request_initialized": _Importer.request_initialized,
    "offload_lookup_result": _Importer.lookup,
    "offload_store_job_created": _Importer.store_created,
    "offload_load_job_created": _Importer.load_created,
    "offload_worker_transfer_finished": _Importer.transfer_finished,
    "resident_claim_offloaded": _Importer.offloaded,
    "resident_claim_restore_required": _Importer.restore_required,
    "offload_worker_load_failed": _Importer.worker_load_failed,
    "resident_claim_restoration_failed": _Importer.restoration_failed,
    "resident_claim_restored": _Importer.restored,
    "active_request_refused": _Importer.refused,
    "scheduler_active_request_refused": _Importer.scheduler_refused,
    "scheduler_resident_claim_restoration_failed": _Importer.scheduler_failure,
    "offload_request_finished_no_pending_jobs": _Importer.request_finished,
    "offload_request_finished_pending_jobs": _Importer.request_finished,
    "generic_kv_transfer_failed_counter": _Importer.counter,
    "generic_request_error_counter": _Importer.counter,
}

#: Foreign events with no v1 meaning of their own, and why they are dropped.
_DROPPED = {
    "offload_worker_transfer_submitted": "submission of a transfer: v1 records its start "
                                         "(kv_*_started) and its finish only",
    "offload_job_completed": "the connector's bookkeeping of a finished job; the transfer "
                             "outcome is already imported from offload_worker_transfer_finished",
    "offload_load_job_failed": "the connector's bookkeeping of a failed job; the failure is "
                               "already imported from offload_worker_load_failed",
}

_SOURCE = {"scheduler_active_request_refused": "artifact.scheduler",
           "scheduler_resident_claim_restoration_failed": "artifact.scheduler"}


def _read_lines(data: bytes, shown: str, report: ImportReport) -> list[tuple[int, Fields]]:
    if b"\x00" in data:
        raise TraceReadError("binary data (a NUL byte), not a JSONL trace", code="T008",
                             path=shown)
    out = []
    for n, raw in enumerate(data.split(b"\n"), 1):
        problem = _line_problem(raw, shown, n)
        if problem is not None:
            report.problems.append(problem)
            continue
        line = raw.decode("utf-8")
        if not line.strip():
            continue
        try:
            d = json.loads(line, parse_constant=_no_constant)
        except json.JSONDecodeError as e:
            report.problems.append(Finding(code="T001", message=f"invalid JSON: {e.msg}",
                                           path=shown, line=n, col=e.colno))
            continue
        except (ValueError, RecursionError) as e:  # NaN/Infinity, > 4300-digit integers
            report.problems.append(Finding(code="T005", path=shown, line=n,
                                           message=f"value not allowed: {e}"))
            continue
        repeated = first_duplicate_key(raw)
        if repeated is not None:
            # a parser keeps the last value of a repeated key: importing it would launder an
            # ambiguous foreign line into a clean v1 event
            report.problems.append(Finding(
                code="T020", path=shown, line=n,
                message=f"key {json.dumps(repeated)} is given twice in one JSON object; "
                        "expected each key once (which value counts would be the parser's "
                        "choice); the line is not imported"))
            continue
        if not isinstance(d, dict) or "event" not in d or "event_sequence" not in d:
            report.problems.append(Finding(code="T004", path=shown, line=n,
                                           message="needs 'event' and 'event_sequence'"))
            continue
        try:
            _get(d, "event", "str")
            if _get(d, "event_sequence", "int", -1) < 0:
                raise WrongType("event_sequence", "a non-negative integer", d["event_sequence"])
            _get(d, "monotonic_ns", "int")
            _get(d, "timestamp_ns", "int")
            _get(d, "request_id", "str")
            _claim_of(d)
        except WrongType as e:
            report.problems.append(Finding(code="T005", path=shown, line=n, message=str(e)))
            continue
        out.append((n, d))
    return out


def _line_problem(raw: bytes, shown: str, n: int) -> Finding | None:
    """Invalid UTF-8, an over-long line or too deep nesting, located; else ``None``."""
    if len(raw) > MAX_LINE_BYTES:
        return Finding(code="T007", path=shown, line=n,
                       message=f"line longer than {MAX_LINE_BYTES} bytes")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return Finding(code="T008", path=shown, line=n, col=e.start + 1,
                       message=f"not UTF-8 text (byte {e.start + 1}: {e.reason})")
    if not json_depth_ok(raw, MAX_JSON_DEPTH):
        return Finding(code="T005", path=shown, line=n,
                       message=f"JSON nested more than {MAX_JSON_DEPTH} levels deep")
    return None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (NaN and Infinity are never imported)")


def import_artifact_trace(path: str | Path, data: bytes | None = None) -> ImportResult:
    """Import one artifact JSONL trace into v1 events, with a full report.

    *data*, when given, is the trace's content (standard input); *path* then only names it.
    A file that is not a regular file, too large, binary or holds no line is an error.
    """
    shown = str(path)
    if data is None:
        try:
            data = read_input(path, "trace")
        except UserInputError as e:
            code = {"L001": "T010", "L004": "T021"}.get(e.code, e.code)
            raise TraceReadError(e.message, code=code, path=shown) from None
    if not data.strip():
        raise TraceReadError("the trace is empty; expected artifact JSONL events",
                             code="T009", path=shown)
    path = Path(path)
    report = ImportReport(dialect=DIALECT, path=shown)
    lines = _read_lines(data, shown, report)
    importer = _Importer(path, report)
    for _, d in lines:  # footprints appear after registration: learn them first
        cid = _claim_of(d)
        footprint = d.get("block_count_footprint")
        if cid and isinstance(footprint, int) and not isinstance(footprint, bool) and (
                0 < footprint < _INT_LIMIT):
            importer.footprint.setdefault(cid, footprint)
    events: list[Envelope] = []
    foreign: dict[int, str] = {}  # v1 seq -> the artifact event it was mapped from
    last_seq = -1
    for n, d in lines:
        report.events_in += 1
        event = _convert(importer, d, path, n)
        if event is None:
            continue
        if event.seq <= last_seq:
            report.problems.append(Finding(code="T006", path=str(path), line=n, message=(
                f"event_sequence {_foreign(event.seq)} is not greater than "
                f"{_foreign(last_seq)}")))
            continue
        last_seq = event.seq
        events.append(event)
        foreign[event.seq] = str(d["event"])
    events = _start_requests(events, foreign, report)
    report.synthesized.sort(key=lambda s: int(s["seq"]))
    report.events_out = len(events)
    return ImportResult(events=events, report=report,
                        origin={e.seq: _foreign(e.seq + (e.seq % 2 == 0)) for e in events})


def _seq(event_sequence: int) -> int:
    """The v1 seq of the event mapped from foreign *event_sequence* (odd: an even number before
    it is free for a synthesized start)."""
    return 2 * event_sequence + 1


def _foreign(seq: int) -> int:
    """The foreign event_sequence of a mapped event's v1 *seq*."""
    return (seq - 1) // 2


def _start_requests(events: list[Envelope], foreign: dict[int, str],
                    report: ImportReport) -> list[Envelope]:
    """SPEC §4.3: a request the artifact records no start of gets one ``request_started`` at
    its first event (the seq just before it), reported beside the synthesized registration."""
    has_start = {e.request_id for e in events if e.event == "request_started"}  # type: ignore[attr-defined]
    seen: set[str] = set()
    out: list[Envelope] = []
    for e in events:
        rid = e.request_id
        if rid is not None and rid not in seen and rid not in has_start:
            seen.add(rid)
            start = EVENT_MODELS["request_started"].model_validate({
                "schema": SCHEMA_ID, "seq": e.seq - 1, "ts_ns": e.ts_ns,
                "source": SYNTHESIZED_SOURCE, "event": "request_started", "claim_id": None,
                "request_id": rid})
            out.append(start)
            report.synthesized.append({
                "seq": start.seq, "event_sequence": _foreign(e.seq), "event": "request_started",
                "before": foreign[e.seq], "request_id": rid,
                "why": "requests start first (docs/concepts.md#rulings): a request's first "
                       "event is its request_started; the "
                       "artifact records none for this request"})
            report.assume("request_started synthesized at the first event of a request the "
                          "artifact records no start of (docs/concepts.md#rulings), with no owner "
                          "scope and "
                          "no claim")
        out.append(e)
    return out


def _convert(importer: _Importer, d: Fields, path: Path, line: int) -> Envelope | None:
    report = importer.report
    name = str(d["event"])
    mapper = _MAPPERS.get(name)
    if mapper is None:
        report.drop(name, _DROPPED.get(name, "no v1 event type corresponds to it"))
        return None
    try:
        mapped = mapper(importer, d)
        if mapped is None:
            return None
        v1_name, fields, used = mapped
        record = _envelope(d, v1_name)
    except WrongType as e:
        report.problems.append(Finding(code="T005", path=str(path), line=line,
                                       message=f"{name}: {e}"))
        return None
    record.update({k: v for k, v in fields.items() if v is not None or k in (
        "status", "finish_reason", "outcome_claim_id", "finish_status")})
    consumed = _ALWAYS | used
    report.unmapped_fields[name].update(k for k in d if k not in consumed)
    try:
        event = EVENT_MODELS[v1_name].model_validate(record)
    except ValidationError as e:
        first = e.errors(include_url=False)[0]
        report.problems.append(Finding(code="T005", path=str(path), line=line, message=(
            f"{name} -> {v1_name}: {'.'.join(map(str, first['loc']))}: {first['msg']}")))
        return None
    report.mapped[f"{name} -> {v1_name}"] += 1
    return event


def _envelope(d: Fields, v1_name: str) -> Fields:
    cid = _claim_of(d)
    record: Fields = {
        "schema": SCHEMA_ID,
        "seq": _seq(d["event_sequence"]),
        "ts_ns": _get(d, "monotonic_ns", "int", _get(d, "timestamp_ns", "int", 0)),
        "source": _SOURCE.get(str(d["event"]), "artifact.connector"),
        "event": v1_name,
        "claim_id": cid,
        "request_id": _get(d, "request_id", "str"),
    }
    if v1_name.startswith("claim_") and cid is not None:
        record.update({k: _get(d, v, "str") for k, v in _IDENTITY.items()})
    return record
