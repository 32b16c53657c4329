"""Sign a trace, sign a verdict, and check either (``residentkv attest``, ``attest verify``)."""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from securesystemslib.signer._crypto_signer import CryptoSigner

from residentkv.errors import UsageError, UserInputError
from residentkv.jsontext import json_text
from residentkv.limits import regular_file
from residentkv.lowering.identity import IdentityError
from residentkv.sources.fetch import sha256_file
from residentkv.trust.envelope import (
    EnvelopeError,
    VerificationError,
    open_envelope,
    read_envelope_bytes,
    sign_statement,
)
from residentkv.trust.manifest import OWN_DISTRIBUTION
from residentkv.trust.policy import TrustPolicy
from residentkv.trust.roots import ATTESTATION_SUFFIX, Grant, TraceTrust, trace_facts
from residentkv.trust.statements import (
    TRACE_PREDICATE,
    VERDICT_PREDICATE,
    trace_statement,
    verdict_statement,
)
from residentkv.trust.verdicts import shown, verdict_problems

__all__ = ["INSTALLED", "Checked", "Kind", "artifact_digest", "attest_recorded", "attest_trace",
           "attest_verdict", "verify_attestation"]

_SHA = re.compile(r"(?:sha256:)?([0-9a-f]{64})")
#: ``--artifact installed``: the runtime distribution installed here (the one a run just used)
INSTALLED = "installed"


def artifact_digest(spec: str, runtime: str) -> str:
    """The runtime artifact's sha256 from ``--artifact``: ``sha256:HEX``, a wheel/sdist file,
    or ``installed`` (the sha256 of the installed distribution's RECORD, which lists the
    digest of every file it installed)."""
    m = _SHA.fullmatch(spec.strip().lower())
    if m:
        return m[1]
    if spec == INSTALLED:
        try:
            dist = importlib.metadata.distribution(runtime)
        except importlib.metadata.PackageNotFoundError:
            raise UsageError(f"--artifact installed: {runtime} is not installed here; give "
                             "the runtime's wheel or sha256:HEX") from None
        record = next((f for f in dist.files or () if f.name == "RECORD"
                       and f.parent.name.endswith(".dist-info")), None)
        if record is None:
            raise UsageError(f"--artifact installed: {runtime} has no RECORD to digest")
        # the file's own bytes (pip writes CRLF rows): what a source root of it digests
        return sha256_file(Path(str(record.locate())))
    path = Path(spec)
    if not path.is_file():
        raise UsageError(f"--artifact {spec!r}: expected sha256:HEX, a wheel or sdist file, "
                         "or 'installed'")
    return sha256_file(path)


def attest_trace(trace: Path, signer: CryptoSigner, artifact: str,
                 emitter_distribution: str | None = None) -> Path:
    """Sign *trace*'s Statement; write and return ``TRACE.intoto.json`` beside it.

    *emitter_distribution* is the distribution that ships the emitter, when the signer knows
    it (SPEC §7.2: an emitter is the runtime's own only if the runtime's distribution ships
    its module; otherwise the statement's distribution is the adapter the trace binds)."""
    regular_file(trace, "trace")  # a FIFO or a device is refused before it is opened
    try:
        sha, facts = trace_facts(trace)
    except OSError as e:
        raise UsageError(f"cannot read trace {trace}: {e.strerror or e}", path=str(trace)) \
            from None
    if facts.provenance is None:
        raise UserInputError(f"cannot attest: {facts.provenance_problem}; expected a trace "
                             "that opens with stream_started (emitter and runtime)",
                             code="A011", path=str(trace), line=1, col=1)
    digest = artifact_digest(artifact, facts.provenance.runtime)
    try:
        statement = trace_statement(trace.name, sha, facts.provenance, facts.modes, digest,
                                    emitter_distribution)
    except IdentityError as e:
        raise UsageError(f"--emitter-distribution: {e}") from None
    return _write(trace.with_name(trace.name + ATTESTATION_SUFFIX),
                  sign_statement(statement, signer))


def attest_recorded(traces: Iterable[Path], signer: CryptoSigner,
                    artifact: str = INSTALLED) -> list[Path]:
    """Sign the traces a run just recorded on the runtime installed here (``witness run
    --attest``, ``audit --live --attest``): one ``TRACE.intoto.json`` beside each, so that
    whoever trusts the key may later grant on them (SPEC §7.1 *attested*)."""
    return [attest_trace(t, signer, artifact, str(OWN_DISTRIBUTION)) for t in traces]


def attest_verdict(doc: Mapping[str, Any], command: str, signer: CryptoSigner,
                   out: Path) -> Path:
    """Sign a SLSA VSA over a check/audit result and write it to *out*."""
    return _write(out, sign_statement(verdict_statement(doc, command), signer))


def _write(path: Path, envelope: dict[str, Any]) -> Path:
    try:
        path.write_text(json_text(envelope, indent=1), encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}", path=str(path)) from None
    return path


class Kind(StrEnum):
    """What ``attest verify`` is asked to verify: each kind is one statement predicate type."""

    VERDICT = "verdict"
    TRACE = "trace"

    @property
    def predicate(self) -> str:
        return VERDICT_PREDICATE if self is Kind.VERDICT else TRACE_PREDICATE

    @property
    def label(self) -> str:
        return "a signed verdict" if self is Kind.VERDICT else "a trace attestation"


@dataclass(frozen=True)
class Checked:
    """What ``attest verify`` established about one attestation file (lines escaped)."""

    kind: str  # "trace", "verdict" or "unknown"
    ok: bool
    lines: list[str]


def verify_attestation(path: Path, policy: TrustPolicy, kind: Kind = Kind.VERDICT,
                       resources: Sequence[Path] = (),
                       resource_uri: str | None = None) -> Checked:
    """Check one attestation of *kind* against *policy*.

    The statement's predicate type says what it is; a statement of the other kind is refused
    (``ok=False``), whoever signed it: a trace attestation never passes for a verdict, nor a
    verdict for a trace attestation. A trace attestation is checked exactly as ``check``
    would: the trace beside it (``X.intoto.json`` -> ``X``) must hash to its subject, match
    its predicate, and be by a key trusted for its emitter and runtime. A verdict is verified
    as a verdict (:func:`residentkv.trust.verdicts.verdict_problems`): a key the policy lets
    sign verdicts, result ``PASSED``, its ``resourceUri`` exactly *resource_uri*, and every
    resource it names matching the file given (*resources*) or found at the path it names.
    Unreadable or malformed files raise (exit 2); a signature, binding or verdict that does
    not hold is ``ok=False`` (exit 1).
    """
    data = read_envelope_bytes(path)
    try:
        statement, keyid = open_envelope(data, policy.key_list(), str(path))
    except VerificationError as e:
        return Checked("unknown", False, [f"{shown(path)}: not signed by any key of "
                                          f"{shown(policy.path)} ({shown(e)})"])
    found = next((k for k in Kind if statement.get("predicateType") == k.predicate), None)
    if found is None:
        raise EnvelopeError(f"predicateType {shown(statement.get('predicateType'))}; expected "
                            f"{TRACE_PREDICATE} or {VERDICT_PREDICATE}", path=str(path))
    if found is not kind:
        return Checked(found.value, False, [
            f"{shown(path)}: {found.label} (predicateType {found.predicate}), not "
            f"{kind.label}: refused [A056] (verify it with --kind {found.value})"])
    if kind is Kind.TRACE:
        return _trace_checked(path, policy)
    key = policy.keys[keyid]
    if not key.verdicts:
        return Checked("verdict", False, [f"{shown(path)}: signed by key {shown(key.label)}, "
                                          f"which {shown(policy.path)} does not trust for "
                                          "verdicts"])
    problems, lines = verdict_problems(statement, resources, resource_uri)
    head = f"{shown(path)}: verdict signed by key {shown(key.label)}"
    if problems:
        return Checked("verdict", False, [f"{head}, but it does not hold:",
                                          *(f"  {shown(p, None)}" for p in problems)])
    return Checked("verdict", True, [f"{head}: PASSED", *lines])


def _trace_checked(path: Path, policy: TrustPolicy) -> Checked:
    if not path.name.endswith(ATTESTATION_SUFFIX):
        raise EnvelopeError(f"a trace attestation is named TRACE{ATTESTATION_SUFFIX}, "
                            "beside its trace", path=str(path))
    trace = path.with_name(path.name.removesuffix(ATTESTATION_SUFFIX))
    if not trace.exists():
        raise UserInputError(f"the trace {trace.name} is not beside its attestation",
                             code="L001", path=str(trace))
    regular_file(trace, "trace")
    _, facts = trace_facts(trace)
    root = TraceTrust(policy=policy).root_of(trace, facts)
    if isinstance(root, Grant):
        return Checked("trace", True, [f"{shown(trace)}: {shown(root.label)}"])
    return Checked("trace", False, [f"{shown(trace)}: {shown(root.reason)}"])
