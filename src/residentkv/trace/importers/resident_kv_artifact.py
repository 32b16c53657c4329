"""Dialect ``resident-kv-artifact``: traces of the research artifact's patched vLLM connector.

The artifact names events and fields its own way (``request_initialized``,
``offload_worker_transfer_finished``, ``resident_claim_restoration_failed``, ``event_sequence``,
``monotonic_ns``, ``resident_claim_id`` ...). Each foreign event maps to at most one v1 event and
its ``event_sequence`` becomes ``seq`` (gaps are kept). The artifact emits no acceptance event:
its own gates treat the first ``request_initialized`` carrying ``resident_claim`` metadata as
the claim's registration, so exactly that event becomes
``claim_accepted(registration=pre_registered)``; it is the only synthesized event and is listed
in the report. Nothing else is invented: a request finish whose status the artifact did not
record is imported with ``status: null``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from residentkv.errors import TraceReadError
from residentkv.findings import Finding
from residentkv.model.events import EVENT_MODELS, SCHEMA_ID, Envelope
from residentkv.trace.importers.base import ImportReport, ImportResult

DIALECT = "resident-kv-artifact"

_PREDICATE = re.compile(
    r"^(leading_prefix_at_least)\((\d+)\)$|^(contiguous_range)\((\d+),\s*(\d+)\)$"
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


def _claim_of(d: Fields) -> str | None:
    if not d.get("resident_claim"):
        return None
    cid = d.get("resident_claim_id") or d.get("claim_id")
    return str(cid) if cid else None


def _tiers(d: Fields) -> tuple[str, str]:
    t = d.get("transfer_type") or ["?", "?"]
    return str(t[0]), str(t[1])


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
            return "request_started", {"prompt_tokens": d.get("num_prompt_tokens")}, {
                "num_prompt_tokens"}
        return self._accept(cid, d)

    def _accept(self, cid: str, d: Fields) -> tuple[str, Fields, set[str]] | None:
        match = _PREDICATE.match(str(d.get("materialization_predicate", "")))
        if match is None:
            self.report.drop("request_initialized",
                             "claim registration without a parseable materialization_predicate")
            return None
        start, blocks = (0, int(match.group(2))) if match.group(1) else (
            int(match.group(4)), int(match.group(5)))
        predicate: Fields = {"id": d.get("predicate_id"), "kind": match.group(1) or
                             match.group(3), "blocks": blocks}
        if not match.group(1):
            predicate["start"] = start
        footprint = max(self.footprint.get(cid, 0), start + blocks)
        self.accepted.add(cid)
        self.report.synthesized.append({
            "seq": d.get("event_sequence"), "event": "claim_accepted",
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
        return "kv_lookup", {"hit_tokens": d.get("num_hit_tokens", 0),
                             "async_load": bool(d.get("will_load_async"))}, {
            "num_hit_tokens", "will_load_async"}

    def store_created(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        src, dst = _tiers(d)
        return "kv_store_started", {"job_id": d.get("job_id"), "from_tier": src,
                                    "to_tier": dst}, {"job_id", "transfer_type"}

    def load_created(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        src, dst = _tiers(d)
        return "kv_load_started", {"job_id": d.get("job_id"), "from_tier": src,
                                   "to_tier": dst, "generation": d.get(
                                       "restoration_generation")}, {
            "job_id", "transfer_type", "restoration_generation"}

    def transfer_finished(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        src, dst = _tiers(d)
        used = {"job_id", "transfer_type", "success", "transfer_size"}
        common = {"job_id": d.get("job_id"), "bytes": d.get("transfer_size"),
                  "success": bool(d.get("success"))}
        if src == "GPU":
            return "kv_store_finished", {**common, "from_tier": src, "to_tier": dst}, used
        injected = bool(d.get("injected_restoration_failure") or d.get("failure_injection_flag"))
        return "kv_load_finished", {**common, "injected": injected, "generation": d.get(
            "restoration_generation")}, used | {"injected_restoration_failure",
                                                "failure_injection_flag",
                                                "restoration_generation"}

    def offloaded(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        return "claim_offloaded", {
            "generation": d.get("offload_generation") or 0,
            "from_tier": d.get("cache_tier_from"), "to_tier": d.get("cache_tier_to"),
            "block_count": d.get("block_count_footprint", 0),
        }, {"offload_generation", "cache_tier_from", "cache_tier_to", "block_count_footprint"}

    def restore_required(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        return "claim_restore_required", {
            "generation": d.get("restoration_generation") or 0,
            "from_tier": d.get("cache_tier_from"), "to_tier": d.get("cache_tier_to"),
            "tokens": d.get("num_external_tokens", 0),
        }, {"restoration_generation", "cache_tier_from", "cache_tier_to", "num_external_tokens"}

    def worker_load_failed(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        return "kv_load_failed", {
            "invalid_block_ids": d.get("invalid_block_ids") or [], "job_id": d.get("job_id"),
            "injected": bool(d.get("failure_injection_flag")),
            "generation": d.get("restoration_generation"),
        }, {"invalid_block_ids", "job_id", "failure_injection_flag", "restoration_generation"}

    def restoration_failed(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        outcome = d.get("outcome_type")
        if outcome not in _OUTCOME_TYPES:
            self.report.drop("resident_claim_restoration_failed",
                             f"outcome_type {outcome!r} is not a v1 outcome type "
                             "(refusal | demotion | expiry | harm)")
            return None
        return "claim_restore_failed", {
            "generation": d.get("restoration_generation") or 0,
            "reason": d.get("restoration_failure_reason") or d.get("failure_reason") or "",
            "injected": bool(d.get("injected_restoration_failure")),
            "outcome_type": outcome, "outcome_claim_id": d.get("outcome_claim_id"),
        }, {"restoration_generation", "restoration_failure_reason", "failure_reason",
            "injected_restoration_failure", "outcome_type", "outcome_claim_id"}

    def restored(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        source = d.get("restoration_source")
        if source not in ("offload_tier", "fallback_recompute"):
            self.report.drop("resident_claim_restored", f"restoration_source {source!r}")
            return None
        return "claim_restored", {"generation": d.get("restoration_generation") or 0,
                                  "source": source}, {"restoration_generation",
                                                      "restoration_source"}

    def refused(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        self.report.assume("active_request_refused.arbiter = harness for refusals the "
                           "artifact marks native_scheduler_refusal=false and emits outside "
                           "the scheduler")
        return "active_request_refused", self._refusal(d, "harness"), {
            "outcome_claim_id", "blocking_claim_ids", "feasibility", "native_scheduler_refusal"}

    def scheduler_refused(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        return "active_request_refused", self._refusal(d, "scheduler_boundary"), {
            "outcome_claim_id", "blocking_claim_ids", "feasibility"}

    @staticmethod
    def _refusal(d: Fields, arbiter: str) -> Fields:
        return {"outcome_claim_id": d.get("outcome_claim_id"),
                "blocking_claim_ids": list(d.get("blocking_claim_ids") or []),
                "feasibility": d.get("feasibility") or "unknown", "arbiter": arbiter}

    def scheduler_failure(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        return "scheduler_load_failure", {
            "policy": d.get("scheduler_failure_policy"),
            "invalid_block_count": d.get("invalid_block_count", 0),
            "failed_tokens": d.get("total_scheduler_failed_tokens", 0),
            "finish_status": d.get("finish_status"),
        }, {"scheduler_failure_policy", "invalid_block_count", "total_scheduler_failed_tokens",
            "finish_status"}

    def request_finished(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        self.report.assume("request_finished.status = null: the artifact's connector-side "
                           "finish events do not record the request's status")
        return "request_finished", {"status": None, "finish_reason": None}, set()

    def counter(self, d: Fields) -> tuple[str, Fields, set[str]] | None:
        value = d.get("failure_count", d.get("request_failures", 0))
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


def _read_lines(path: Path, report: ImportReport) -> list[tuple[int, Fields]]:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TraceReadError(f"cannot open trace: {e.strerror or e}", code="T010",
                             path=str(path)) from None
    if b"\x00" in raw:
        raise TraceReadError("binary data, not a JSONL trace", code="T008", path=str(path))
    out = []
    for n, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            report.problems.append(Finding(code="T001", message=f"invalid JSON: {e.msg}",
                                           path=str(path), line=n, col=e.colno))
            continue
        if not isinstance(d, dict) or "event" not in d or "event_sequence" not in d:
            report.problems.append(Finding(code="T004", path=str(path), line=n,
                                           message="needs 'event' and 'event_sequence'"))
            continue
        out.append((n, d))
    return out


def import_artifact_trace(path: str | Path) -> ImportResult:
    """Import one artifact JSONL trace into v1 events, with a full report."""
    path = Path(path)
    report = ImportReport(dialect=DIALECT, path=str(path))
    lines = _read_lines(path, report)
    importer = _Importer(path, report)
    for _, d in lines:  # footprints appear after registration: learn them first
        cid = _claim_of(d)
        if cid and "block_count_footprint" in d:
            importer.footprint.setdefault(cid, int(d["block_count_footprint"]))
    events: list[Envelope] = []
    last_seq = -1
    for n, d in lines:
        report.events_in += 1
        event = _convert(importer, d, path, n)
        if event is None:
            continue
        if event.seq <= last_seq:
            report.problems.append(Finding(code="T006", path=str(path), line=n, message=(
                f"event_sequence {event.seq} is not greater than {last_seq}")))
            continue
        last_seq = event.seq
        events.append(event)
    report.events_out = len(events)
    return ImportResult(events=events, report=report)


def _convert(importer: _Importer, d: Fields, path: Path, line: int) -> Envelope | None:
    report = importer.report
    name = str(d["event"])
    mapper = _MAPPERS.get(name)
    if mapper is None:
        report.drop(name, _DROPPED.get(name, "no v1 event type corresponds to it"))
        return None
    mapped = mapper(importer, d)
    if mapped is None:
        return None
    v1_name, fields, used = mapped
    record = _envelope(d, v1_name)
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
        "seq": d["event_sequence"],
        "ts_ns": d.get("monotonic_ns", d.get("timestamp_ns", 0)),
        "source": _SOURCE.get(str(d["event"]), "artifact.connector"),
        "event": v1_name,
        "claim_id": cid,
        "request_id": d.get("request_id"),
    }
    if v1_name.startswith("claim_") and cid is not None:
        record.update({k: d.get(v) for k, v in _IDENTITY.items()})
    return record
