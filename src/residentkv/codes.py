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
    Code("T013", "duplicate_finish", "a request has a second request_finished",
         "a request finishes once: its first finish is the deadline of every outcome, and a "
         "second one could make a late outcome look timely",
         '{"event": "request_finished", "request_id": "r-2", ...} twice'),
    Code("T020", "duplicate_key", "a JSON object on a trace line names the same key twice",
         "with a key given twice, which value counts is the parser's choice, not the emitter's: "
         "v1 lines are strict JSON without duplicate keys",
         '{"outcome_claim_id": "c-OTHER", ..., "outcome_claim_id": "c-1"}'),
    Code("T021", "not_a_regular_file", "the trace is a device, FIFO, socket or other special file",
         "reading a special file may never end (/dev/zero) or block forever (a FIFO); "
         "use '-' to read standard input",
         "residentkv trace check /dev/zero"),
    Code("T022", "misplaced_provenance", "a stream_started event that is not the first event",
         "a stream's provenance is its first event; a second or late one would let a stream "
         "change who claims to have written it",
         "stream_started on line 9 of a trace that began on line 1"),
    Code("E101", "internal_error", "residentkv hit a bug",
         "internal errors are never mistaken for a verdict",
         "rerun with --traceback and report the output"),
    # --- lowering: descriptors (D), anchors (A), obligations and bundles (O) ---
    Code("D001", "descriptor_unreadable", "a descriptor file is not a YAML mapping of schema v1",
         "a file the checker cannot read as residentkv.descriptor/v1 says nothing checkable",
         "schema: residentkv.descriptor/v2"),
    Code("D002", "duplicate_key", "a YAML mapping repeats a key",
         "with two values for one key, which one the curator meant is unknown",
         "obligations: {claim_identity: ..., claim_identity: ...}"),
    Code("D003", "unknown_field", "a descriptor field that schema v1 does not define",
         "a misspelt field (evidance) would otherwise hide a missing one",
         "claim_identity: {status: absent, evidance: [a1]}"),
    Code("D004", "invalid_value", "a descriptor field has the wrong type or an unknown value",
         "a status or mechanism the checker does not know cannot be judged",
         "mechanism: nativ"),
    Code("D005", "missing_field", "a required descriptor field is absent",
         "a row without its boundary or an obligation cannot be judged",
         "a row without claim_scoped_outcomes"),
    Code("D006", "unknown_anchor", "an obligation cites an anchor id the row does not define",
         "evidence that does not exist cannot support anything",
         "claim_identity: {status: absent, evidence: [a9]} with no anchor a9"),
    Code("D007", "uncited_anchor", "an anchor that no obligation cites",
         "an uncited anchor is dead weight or a forgotten citation; either way it is a mistake",
         "anchors: {a4: {...}} and no obligation lists a4"),
    Code("D008", "empty_evidence", "an obligation with a definite status cites no evidence",
         "no vacuous truth: a status without evidence is an unsupported assertion",
         "claim_identity: {status: satisfied, evidence: []}"),
    Code("D009", "unsafe_path", "an anchor path is absolute or leaves its root (..)",
         "verification never reads outside the source root or the descriptor's directory",
         "path: ../../etc/passwd"),
    Code("D010", "duplicate_row_id", "two rows share an id",
         "reports and expectations are keyed by row id; a duplicate makes them ambiguous",
         "two rows with id vllm/prefix-caching/soft_priority"),
    Code("D011", "unknown_bundle", "a row lowers onto a protection mode with no obligation bundle",
         "without a bundle there is no list of obligations to check against",
         "lowers: best_effort"),
    Code("D012", "empty_descriptor", "a descriptor file holds no row",
         "no vacuous truth: zero rows is never a pass",
         "schema: residentkv.descriptor/v1\nrows: []"),
    Code("D013", "mode_not_described",
         "a row's mode is a bare word instead of a description of the runtime primitive",
         "mode says what the runtime offers; the protection mode goes in lowers, where it is "
         "checked against a bundle (a bare word here is usually a misplaced protection mode)",
         'mode: pinned (expected e.g. mode: "pin=True lookups with a pin-timeout monitor")'),
    Code("A001", "anchor_drifted", "the anchored file or symbol exists but its content changed",
         "evidence about other code is not evidence about this release (fail-closed)",
         "sha256 of KvCacheRetentionConfig differs from the descriptor's"),
    Code("A002", "anchor_missing", "the anchored file or symbol does not exist in the source",
         "a citation to nothing supports nothing",
         "path: vllm/v1/core/kv_cache_manager.py symbol: KVCacheManager.pin"),
    Code("A003", "anchor_unverifiable", "the anchor is well formed but cannot be checked here",
         "cited evidence may refuse conformance but never grants a positive class",
         "a source anchor for package sglang with no --source sglang=..."),
    Code("A004", "trace_gate_failed", "the trace gate named by a trace anchor did not pass",
         "a run that did not exhibit the obligation is no evidence for it",
         "a3: {kind: trace, gate: failure_outcome, ...} with missing refusal_attributed"),
    Code("A005", "path_refused", "an anchor or archive member path leaves its root",
         "verification never reads outside the source root (path traversal, zip slip)",
         "a wheel member named ../../evil.py"),
    Code("A006", "source_unreadable", "a source root or archive cannot be read",
         "nothing in an unreadable source can be verified",
         "--source vllm=missing.whl"),
    Code("A007", "symbol_unresolvable", "a Python file cannot be parsed to resolve a symbol",
         "a symbol that cannot be located cannot be hashed",
         "a .py file with a syntax error"),
    Code("A008", "gate_control_fired", "a negative control fired in the trace a trace anchor cites",
         "fallback recompute, wrong-claim or unclaimed failures are never claim evidence",
         "control fallback_recompute = true in a failure_outcome trace"),
    Code("O001", "bundle_invalid", "a bundle does not match schema residentkv.bundle/v1",
         "a bundle is the list of what must be shown; a malformed one cannot be trusted",
         "a bundle without a mode"),
    Code("O002", "bundle_empty", "an obligation bundle lists no obligation, or misses one of B1-B4",
         "no vacuous truth: an empty bundle would make every lowering conformant",
         "obligations: {}"),
    Code("O003", "unknown_requirement", "a bundle names a requirement id no listed gate reports",
         "a requirement nothing can check would be silently skipped",
         "requirements: [claim_kept]"),
    Code("O004", "unknown_gate", "a bundle names a trace gate that does not exist",
         "a gate that does not exist can never pass, or worse, be skipped",
         "gates: [[observaton]]"),
    Code("A009", "adapter_evidence_as_native",
         "a native row cites a trace emitted by a residentkv adapter",
         "adapter evidence shows the adapter, never the unmodified runtime (SPEC §7)",
         "mechanism: native with a trace whose events come from residentkv.vllm.scheduler"),
    Code("O010", "expect_mismatch", "the row's class differs from its expect field",
         "expect is checked, never trusted: a mismatch means the curator or the evidence changed",
         "expect: approximation_substrate, class: unknown_evidence"),
    Code("O011", "overclaim", "a row asserts conformance; its evidence reaches no conformant class",
         "asserting more than the evidence shows is the failure this checker exists to catch",
         "asserts: conformance, class: rejected_mapping"),
    Code("O012", "obligation_unestablished",
         "an obligation asserted satisfied lacks verified evidence the bundle accepts",
         "granting verdicts need verified evidence from a gate the bundle names (fail-closed)",
         "claim_scoped_outcomes: satisfied, evidence only a doc quote"),
    Code("O013", "obligation_refuted", "a required obligation is asserted absent or contradicted",
         "a mode whose bundle requires that obligation cannot be lowered conformantly",
         "hard_protected with claim_scoped_outcomes: absent"),
    Code("S001", "case_invalid", "a suite case folder has no valid case.yaml",
         "a case that cannot be read tests nothing; it fails the suite instead of being skipped",
         "a case folder with an empty case.yaml"),
]

CODES: dict[str, Code] = {c.id: c for c in _CODES}


def lookup(code: str) -> Code:
    """The registry entry for *code* (case-insensitive); ``KeyError`` if unknown."""
    return CODES[code.upper()]
