"""Which root of trust, if any, stands behind one trace, and what it vouches for (SPEC §7.1,
§7.2).

:data:`VOUCHES` is the one table of what each root vouches for. A root decides *who emitted*
a trace (:class:`~residentkv.lowering.identity.TraceOrigin`) from its own facts, never from
a name inside the trace or a resemblance between names:

* ``live`` -- this run's processes wrote exactly these bytes (the digest their writer
  recorded) into a folder the run created itself (:class:`~residentkv.trust.live.LiveRoot`);
  the emitter is residentkv's own;
* ``package`` -- the file is a recorded run the package lists in its manifest
  (:mod:`residentkv.trust.manifest`), matching the package's digest index; emitter and runtime
  as the manifest lists them (and the trace says the same);
* ``attested`` -- ``TRACE.intoto.json`` beside the trace is a DSSE envelope, signed by a key of
  the trust policy, of a Statement whose subject is the trace's sha256 and whose predicate
  equals the trace's own runtime, emitter, claims and modes -- and the key's policy entry lists
  that emitter and that runtime. Emitter and runtime distribution are the statement's; its
  emitter distribution and runtime artifact count only as the row rules bear them out (the
  policy's ``distributions`` or a ``RECORD``; the verified source of the release:
  :mod:`residentkv.lowering.rules`).

Anything else is *cited*: it may refuse conformance, never grant it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from securesystemslib.exceptions import VerificationError

from residentkv.errors import UserInputError
from residentkv.lowering.identity import TraceOrigin
from residentkv.lowering.provenance import TraceFacts, scan_file
from residentkv.trust.envelope import open_envelope, read_envelope_bytes
from residentkv.trust.live import LiveFile, LiveRoot
from residentkv.trust.manifest import OWN_DISTRIBUTION, Recorded, recorded
from residentkv.trust.package import package_data_dir, package_digest_match
from residentkv.trust.policy import TrustedKey, TrustPolicy
from residentkv.trust.statements import statement_origin, trace_statement_problem

__all__ = ["ATTESTATION_SUFFIX", "VOUCHES", "Grant", "Refusal", "Root", "TraceTrust",
           "trace_facts"]

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


#: what each root vouches for: the bytes, and who emitted them (SPEC §7.2)
VOUCHES: dict[Root, str] = {
    Root.LIVE: "bytes this run's own processes wrote into a folder the run created itself, "
               "matching the digest their writer recorded as it wrote them; emitter: "
               "residentkv's own, runtime: what the run recorded",
    Root.PACKAGE: "a recorded run the package lists in its manifest (witness, fleet), matching "
                  "the package's digest index; emitter and runtime: the manifest's",
    Root.ATTESTED: "bytes whose sha256 a trusted key signed; emitter (name, version) and "
                   "runtime distribution: the signed statement's, for a key the policy trusts "
                   "for both; the emitter's distribution only where the policy lets that key "
                   "speak for it (else a RECORD must show it), the runtime artifact only where "
                   "it is the verified source of that release",
}


@dataclass(frozen=True)
class Grant:
    """A trace with a root of trust: who emitted it (*origin*) and the facts cited."""

    root: Root
    detail: str
    origin: TraceOrigin
    key: TrustedKey | None = None

    @property
    def label(self) -> str:
        return f"{self.root.value} ({self.detail})"

    @property
    def facts(self) -> tuple[str, ...]:
        o = self.origin
        dist = f", shipped by {o.emitter_dist}" if o.emitter_dist is not None else ""
        return (f"root {self.root.value}: {VOUCHES[self.root]}",
                f"emitter {o.emitter} {o.emitter_version}{dist} (as the {self.root.value} "
                "root says)",
                f"runtime {o.runtime} {o.runtime_version} (as the {self.root.value} root says)")


@dataclass(frozen=True)
class Refusal:
    """No root of trust: *reason* says why; *code* A030 (none), A035 (a bad attestation) or
    A053 (a recorded run of the package that is not what its manifest says)."""

    reason: str
    code: str = "A030"


def trace_facts(path: Path) -> tuple[str, TraceFacts]:
    """(sha256, facts) of a trace file in one bounded pass."""
    facts = scan_file(path)
    return facts.sha256, facts


@dataclass
class TraceTrust:
    """The roots of trust of one run: live files, the package, and the trust policy."""

    policy: TrustPolicy | None = None
    live: LiveRoot = field(default_factory=LiveRoot)
    _seen: dict[tuple[Path, str], Grant | Refusal] = field(default_factory=dict)

    def add_live(self, path: Path, producer: str, written_sha256: str | None = None) -> str:
        """Record a trace this run just wrote into one of its own folders (with the digest
        its writer recorded, when the producer hands it back)."""
        return self.live.record(path, producer, written_sha256).sha256

    def root_of(self, path: Path, facts: TraceFacts) -> Grant | Refusal:
        """The root of the trace at *path* whose one scan gave *facts* (cached per file)."""
        key = (path.resolve(), facts.sha256)
        if key not in self._seen:
            self._seen[key] = self._decide(path, facts)
        return self._seen[key]

    def _decide(self, path: Path, facts: TraceFacts) -> Grant | Refusal:
        live = self.live.recorded(path, facts.sha256)
        if live is not None:
            return self._live(facts, live)
        attested = self._attested(path, facts)
        if isinstance(attested, Grant):
            return attested
        packaged = self._package(path, facts)
        if isinstance(packaged, Grant) or (packaged is not None and attested.code != "A035"):
            return packaged
        return attested

    @staticmethod
    def _live(facts: TraceFacts, live: LiveFile) -> Grant | Refusal:
        p = facts.provenance
        if p is None:
            return Refusal(f"written by this run ({live.producer}) but "
                           f"{facts.provenance_problem}")
        origin = TraceOrigin(p.emitter_name, p.emitter_version, OWN_DISTRIBUTION,
                             p.runtime_id, p.runtime_version)
        return Grant(Root.LIVE, f"written in this run by {live.producer}; "
                                f"{live.digest_taken}", origin)

    @staticmethod
    def _package(path: Path, facts: TraceFacts) -> Grant | Refusal | None:
        """The package root, when the file lies in the package's data (else ``None``)."""
        try:
            if not path.resolve().is_relative_to(package_data_dir()):
                return None
        except OSError:
            return None
        how = package_digest_match(path, facts.sha256, facts.git_blob)
        if how is None:
            return None
        entry = recorded(path)
        if isinstance(entry, str):  # hand-written (a suite case, an example): no root at all
            return Refusal(f"no root of trust: {entry}")
        problem = _manifest_problem(entry, facts)
        if problem is not None:
            return Refusal(problem, "A053")
        return Grant(Root.PACKAGE, f"a recorded run ({entry.recorded_by}) the residentkv "
                                   f"package lists, matching its {how} digest", entry.origin)

    def _attested(self, path: Path, facts: TraceFacts) -> Grant | Refusal:
        sidecar = path.with_name(path.name + ATTESTATION_SUFFIX)
        if not sidecar.is_file():
            return Refusal(f"no root of trust: not written by this run, not a recorded run "
                           f"of the residentkv package, and no attestation {sidecar.name} "
                           "beside it")
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
        problem = trace_statement_problem(statement, facts.sha256, facts.provenance,
                                          facts.modes)
        if problem is not None:
            return Refusal(f"{sidecar.name} does not vouch for this trace: {problem}", "A035")
        origin = statement_origin(statement)
        trusted = self.policy.keys[keyid]
        if not trusted.vouches_for(origin.emitter, origin.runtime):
            return Refusal(f"{sidecar.name} is signed by key {trusted.label!r}, which "
                           f"{self.policy.path} does not trust for emitter "
                           f"{str(origin.emitter)!r} on runtime {str(origin.runtime)!r}",
                           "A035")
        return Grant(Root.ATTESTED, f"signed by key {trusted.label!r} ({keyid[:16]}) of "
                                    f"{self.policy.path}", origin, trusted)


def _manifest_problem(entry: Recorded, facts: TraceFacts) -> str | None:
    """Why a listed package trace is not what its manifest entry says (``None``: it is)."""
    p = facts.provenance
    if entry.sha256 != facts.sha256:
        return f"its sha256 is {facts.sha256}, the package manifest lists {entry.sha256}"
    if p is None:
        return f"the package manifest lists it, but {facts.provenance_problem}"
    o = entry.origin
    if (p.emitter_name, p.runtime_id, p.runtime_version) != \
            (o.emitter, o.runtime, o.runtime_version):
        return (f"the trace says emitter {p.emitter} on {p.runtime} {p.runtime_version}, the "
                f"package manifest {o.emitter} on {o.runtime} {o.runtime_version}")
    return None
