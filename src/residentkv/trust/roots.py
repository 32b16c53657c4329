"""Which root of trust, if any, stands behind one trace (SPEC §7.1).

* ``live`` -- this process produced exactly these bytes (the audit's own witness run registers
  each trace it wrote with :meth:`TraceTrust.add_live`);
* ``package`` -- the file lies inside the installed residentkv package's data and matches the
  digest the distribution lists for it (:mod:`residentkv.trust.package`);
* ``attested`` -- ``TRACE.intoto.json`` beside the trace is a DSSE envelope, signed by a key of
  the trust policy, of a Statement whose subject is the trace's sha256 and whose predicate
  equals the trace's own runtime, emitter, claims and modes -- and the key's policy entry lists
  that emitter and that runtime.

Anything else is *cited*. The checker demotes a cited trace's passing gate so that it may refuse
conformance but never grant it; the reason says what is missing and how to attest.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from securesystemslib.exceptions import VerificationError

from residentkv.errors import UserInputError
from residentkv.limits import MAX_FILE_BYTES, MAX_LINE_BYTES
from residentkv.lowering.provenance import TraceFacts, scan_trace
from residentkv.trust.envelope import open_envelope, read_envelope_bytes
from residentkv.trust.package import package_data_dir, package_match
from residentkv.trust.policy import TrustedKey, TrustPolicy
from residentkv.trust.statements import trace_statement_problem

__all__ = ["ATTESTATION_SUFFIX", "Grant", "Refusal", "Root", "TraceTrust", "trace_facts"]

#: the attestation of ``t.jsonl`` is ``t.jsonl.intoto.json`` (one DSSE envelope, JSON)
ATTESTATION_SUFFIX = ".intoto.json"
ATTEST_HELP = ("attest it: `residentkv attest TRACE --key KEY --artifact RUNTIME_WHEEL` writes "
               "TRACE.intoto.json; then check with `--trust POLICY` naming the key for its "
               "emitter and runtime")


class Root(StrEnum):
    """The three roots of trust a granting trace may rest on."""

    LIVE = "live"
    PACKAGE = "package"
    ATTESTED = "attested"


@dataclass(frozen=True)
class Grant:
    """A trace with a root of trust: *detail* names it (for reports)."""

    root: Root
    detail: str
    key: TrustedKey | None = None

    @property
    def label(self) -> str:
        return f"{self.root.value} ({self.detail})"


@dataclass(frozen=True)
class Refusal:
    """No root of trust: *reason* says why; *code* A030 (none) or A035 (a bad attestation)."""

    reason: str
    code: str = "A030"


def trace_facts(path: Path) -> tuple[str, TraceFacts]:
    """(sha256, facts) of a trace file in one bounded pass."""
    h = hashlib.sha256()
    facts: TraceFacts | None = None
    partial = b""
    batch: list[bytes] = []
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
            parts = (partial + chunk).split(b"\n")
            partial = parts.pop()[: MAX_LINE_BYTES + 1]
            batch += parts
            facts = _fold(facts, batch)
            batch = []
    facts = _fold(facts, [partial] if partial else [])
    return h.hexdigest(), facts


def _fold(facts: TraceFacts | None, lines: list[bytes]) -> TraceFacts:
    more = scan_trace(lines)
    if facts is None:
        return more
    for cid, modes in more.modes.items():
        facts.modes.setdefault(cid, set()).update(modes)
    return facts


@dataclass
class TraceTrust:
    """The roots of trust of one run: live traces, the package, and the trust policy."""

    policy: TrustPolicy | None = None
    #: sha256 -> what produced it in this run
    live: dict[str, str] = field(default_factory=dict)
    _seen: dict[tuple[Path, str], Grant | Refusal] = field(default_factory=dict)

    def add_live(self, path: Path, producer: str) -> str:
        """Register a trace this process just wrote (its bytes, wherever they are copied)."""
        sha, _ = trace_facts(path)
        self.live[sha] = producer
        return sha

    def root_of(self, path: Path, sha256: str) -> Grant | Refusal:
        """The root of the trace at *path* whose bytes hash to *sha256* (cached per file)."""
        key = (path, sha256)
        if key not in self._seen:
            self._seen[key] = self._decide(path, sha256)
        return self._seen[key]

    def _decide(self, path: Path, sha256: str) -> Grant | Refusal:
        if sha256 in self.live:
            return Grant(Root.LIVE, f"produced in this run by {self.live[sha256]}")
        # an attestation first: only a key can vouch for a runtime's own emitter
        attested = self._attested(path, sha256)
        if isinstance(attested, Grant):
            return attested
        how = self._package(path, sha256)
        if how is not None:
            return Grant(Root.PACKAGE, f"shipped in the residentkv package, matching its "
                                       f"{how} digest")
        return attested

    @staticmethod
    def _package(path: Path, sha256: str) -> str | None:
        """How the file is in the package root (read only when it lies in the package)."""
        try:
            if not path.resolve().is_relative_to(package_data_dir()):
                return None
            data = path.read_bytes() if path.stat().st_size <= MAX_FILE_BYTES else None
        except OSError:
            return None
        if data is None or hashlib.sha256(data).hexdigest() != sha256:
            return None
        return package_match(path, data)

    def _attested(self, path: Path, sha256: str) -> Grant | Refusal:
        sidecar = path.with_name(path.name + ATTESTATION_SUFFIX)
        if not sidecar.is_file():
            return Refusal(f"no root of trust: not produced in this run, not shipped in the "
                           f"residentkv package, and no attestation {sidecar.name} beside it")
        if self.policy is None:
            return Refusal(f"{sidecar.name} is not checked: no --trust policy was given, and "
                           "no key is trusted without one")
        try:
            statement, keyid = open_envelope(read_envelope_bytes(sidecar),
                                             self.policy.key_list(), str(sidecar))
        except VerificationError:
            return Refusal(f"{sidecar.name} is not signed by any key of {self.policy.path}",
                           "A035")
        except UserInputError as e:
            return Refusal(f"{sidecar.name}: {e.message}", "A035")
        got, facts = trace_facts(path)
        problem = (trace_statement_problem(statement, sha256, facts.provenance, facts.modes)
                   if got == sha256 else "the trace changed while it was checked")
        if problem is not None:
            return Refusal(f"{sidecar.name} does not vouch for this trace: {problem}", "A035")
        trusted = self.policy.keys[keyid]
        p = facts.provenance
        assert p is not None  # trace_statement_problem refuses a trace without provenance
        if not trusted.vouches_for(p.emitter, p.runtime):
            return Refusal(f"{sidecar.name} is signed by key {trusted.label!r}, which "
                           f"{self.policy.path} does not trust for emitter {p.emitter!r} on "
                           f"runtime {p.runtime!r}", "A035")
        return Grant(Root.ATTESTED, f"signed by key {trusted.label!r} ({keyid[:16]}) of "
                                    f"{self.policy.path}", trusted)
