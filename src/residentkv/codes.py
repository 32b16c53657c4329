"""The registry of finding codes.

Codes are stable forever. The letter says the phase: ``L`` load/parse, ``D`` descriptor schema,
``A`` anchor, ``O`` obligation, ``T`` trace, ``S`` suite. ``residentkv explain CODE`` prints an
entry. Add entries; never renumber or reuse one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Code:
    """One finding code: what it means, why it matters, and an example."""

    id: str
    name: str
    summary: str
    why: str
    example: str

    @property
    def phase(self) -> str:
        return {
            "L": "load", "D": "descriptor", "A": "anchor", "O": "obligation",
            "T": "trace", "S": "suite", "E": "internal",
        }[self.id[0]]


_CODES: list[Code] = [
    Code("L001", "unreadable_input", "an input file could not be read",
         "nothing in an unreadable file can count as evidence",
         "residentkv trace check missing.jsonl"),
    Code("L002", "usage", "the command line is not valid for this command",
         "a misspelt option must not silently change what is checked",
         "residentkv trace check --gate observaton t.jsonl"),
    Code("T001", "invalid_json", "a trace line is not a JSON object",
         "a line that cannot be parsed is dropped from evidence, and the trace is not well formed",
         '{"schema": "residentkv.event/v1", "seq": 3,'),
    Code("T002", "unknown_event_type", "an event type that schema v1 does not define",
         "an unknown event cannot be interpreted, so it is never taken as evidence",
         '{"event": "claim_kept_promise", ...}'),
    Code("T003", "unknown_field", "a field that the event's v1 model does not define",
         "a misspelt field (blocking_claim_id) would otherwise hide a missing one",
         '{"event": "active_request_refused", "blocking_claim": ["c1"], ...}'),
    Code("T004", "missing_field", "a required envelope or event field is absent",
         "an event without its claim id or seq cannot be attributed or ordered",
         '{"event": "claim_restored", "seq": 4} (no ts_ns, source, claim_id, ...)'),
    Code("T005", "invalid_value", "a field has the wrong type or a value outside its domain",
         "a restored event with source 'maybe' says nothing checkable",
         '{"event": "claim_restored", "source": "maybe", ...}'),
    Code("T006", "non_increasing_seq", "seq is not strictly greater than the previous event's",
         "seq is the only ordering key; a duplicate or backwards seq makes order unknown",
         "line 7 has seq 5 after a line with seq 5"),
    Code("T007", "line_too_long", "a trace line exceeds the reader's line limit",
         "bounded memory: an unbounded line is refused rather than read",
         "a 2 MiB line with the default 1 MiB limit"),
    Code("T008", "not_text", "the trace is not UTF-8 text (binary data or a NUL byte)",
         "a binary file is not a trace, whatever its name",
         "residentkv trace check model.safetensors"),
    Code("T009", "empty_trace", "the trace holds no valid event",
         "no vacuous truth: an empty trace shows nothing",
         "an empty file, or a file of garbage lines"),
    Code("T010", "unreadable_trace", "the trace file does not exist or cannot be opened",
         "nothing can be checked in a file that cannot be read",
         "residentkv trace check does-not-exist.jsonl"),
    Code("T011", "no_claim_events", "the trace has no event for the requested claim",
         "a gate over zero events of the claim must fail, not pass vacuously",
         "residentkv trace check --claim c-404 t.jsonl"),
    Code("T012", "no_claims", "the trace names no claim at all",
         "with no claim there is nothing a gate could show; generic counters are not claims",
         "a trace of generic_counter events only"),
    Code("T013", "gate_failed", "a trace gate did not pass for a claim",
         "the run did not exhibit what the gate requires; the missing ids say which part",
         "failure_outcome for c-1: missing outcome_before_finish"),
    Code("E101", "internal_error", "residentkv hit a bug",
         "internal errors are never mistaken for a verdict",
         "rerun with --traceback and report the output"),
]

CODES: dict[str, Code] = {c.id: c for c in _CODES}


def lookup(code: str) -> Code:
    """The registry entry for *code* (case-insensitive); ``KeyError`` if unknown."""
    return CODES[code.upper()]
