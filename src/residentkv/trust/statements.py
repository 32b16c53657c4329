"""The in-toto Statements residentkv signs: one over a trace, one over a verdict.

*Trace* (predicate ``https://residentkv.dev/attestation/trace/v1``): the subject is the trace
file's sha256; the predicate binds the runtime distribution (name, version, artifact digest),
the emitter (name, version) and every claim with its protection modes -- all of which must
equal what the trace itself says, so a signature over one trace never vouches for another.

*Verdict* (predicate ``https://slsa.dev/verification_summary/v1``, SLSA VSA 1.0): the subjects
are the descriptors checked; ``policy`` names the bundles by digest and the residentkv
version, ``inputAttestations`` the traces and sources (by digest), and ``verificationResult``
is ``PASSED`` only when the check exited 0. Each row's class is in
``residentkv.dev/rows`` (the VSA lets a verifier add its own fields) -- so a CI job can publish a
verdict that anyone holding its public key can check without re-running it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from residentkv import __version__
from residentkv.lowering.identity import EmitterName, IdentityError, RuntimeId, TraceOrigin
from residentkv.lowering.provenance import Provenance
from residentkv.trust.envelope import STATEMENT_TYPE

__all__ = [
    "TRACE_PREDICATE",
    "VERDICT_PREDICATE",
    "statement_origin",
    "trace_statement",
    "trace_statement_problem",
    "verdict_statement",
]

TRACE_PREDICATE = "https://residentkv.dev/attestation/trace/v1"
VERDICT_PREDICATE = "https://slsa.dev/verification_summary/v1"
VERIFIER_ID = "https://residentkv.dev/verifier/check"
ROWS_FIELD = "residentkv.dev/rows"
_HEX64 = re.compile(r"[0-9a-f]{64}")


def _claims(modes: Mapping[str, set[str]]) -> dict[str, list[str]]:
    return {cid: sorted(m) for cid, m in sorted(modes.items())}


def trace_statement(name: str, sha256: str, provenance: Provenance,
                    modes: Mapping[str, set[str]], artifact_sha256: str,
                    emitter_distribution: str | None = None) -> dict[str, Any]:
    """The Statement a trace attestation signs (see the module docstring).

    *emitter_distribution* names the distribution that ships the emitter, when the signer
    knows it: without it the trace binds only a row of a runtime whose own distribution is
    shown to ship the emitter (SPEC §7.2)."""
    emitter: dict[str, Any] = {"name": provenance.emitter,
                               "version": provenance.emitter_version}
    if emitter_distribution is not None:
        emitter["distribution"] = str(RuntimeId.parse(emitter_distribution))
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": name, "digest": {"sha256": sha256}}],
        "predicateType": TRACE_PREDICATE,
        "predicate": {
            "runtime": {"name": provenance.runtime, "version": provenance.runtime_version,
                        "artifact": {"sha256": artifact_sha256}},
            "emitter": emitter,
            "claims": _claims(modes),
            "attested_with": {"name": "residentkv", "version": __version__},
        },
    }


def _get(doc: Any, *path: str) -> Any:
    for key in path:
        doc = doc.get(key) if isinstance(doc, dict) else None
    return doc


def trace_statement_problem(statement: dict[str, Any], sha256: str,
                            provenance: Provenance | None,
                            modes: Mapping[str, set[str]]) -> str | None:
    """Why a signed Statement does not vouch for this trace (``None`` when it does)."""
    if statement.get("predicateType") != TRACE_PREDICATE:
        return f"its predicateType is not {TRACE_PREDICATE}"
    subjects = statement.get("subject")
    digests = [_get(s, "digest", "sha256") for s in subjects] if isinstance(subjects,
                                                                              list) else []
    if sha256 not in digests:
        return f"it covers {', '.join(map(str, digests)) or 'no digest'}, not this trace ({sha256})"
    if provenance is None:
        return "the trace carries no stream_started provenance to compare with"
    pred = statement.get("predicate")
    names = [_get(pred, "runtime", "name"), _get(pred, "emitter", "name")]
    if not all(isinstance(n, str) and n for n in names):
        return "it names no runtime or no emitter"
    dist = _get(pred, "emitter", "distribution")
    try:
        runtime = RuntimeId.parse(names[0])
        if dist is not None:
            RuntimeId.parse(dist)
    except IdentityError as e:
        return f"its runtime or emitter distribution is not a distribution name: {e}"
    want = {
        "runtime name": (runtime, provenance.runtime_id),
        "runtime version": (_get(pred, "runtime", "version"), provenance.runtime_version),
        "emitter name": (EmitterName.parse(names[1]), provenance.emitter_name),
        "emitter version": (_get(pred, "emitter", "version"), provenance.emitter_version),
        "claims and modes": (_get(pred, "claims"), _claims(modes)),
    }
    for what, (signed, seen) in want.items():
        if signed != seen:
            return f"its {what} is {signed!r}, the trace's is {seen!r}"
    artifact = _get(pred, "runtime", "artifact", "sha256")
    if not isinstance(artifact, str) or not _HEX64.fullmatch(artifact):
        return "it names no runtime artifact digest (sha256)"
    return None


def statement_origin(statement: dict[str, Any]) -> TraceOrigin:
    """Who emitted the trace, as a checked trace Statement says (after
    :func:`trace_statement_problem` found no problem)."""
    pred = statement["predicate"]
    dist = _get(pred, "emitter", "distribution")
    return TraceOrigin(EmitterName.parse(pred["emitter"]["name"]),
                       str(pred["emitter"]["version"]),
                       RuntimeId.parse(dist) if isinstance(dist, str) else None,
                       RuntimeId.parse(pred["runtime"]["name"]),
                       str(pred["runtime"]["version"]),
                       str(pred["runtime"]["artifact"]["sha256"]))


def verdict_statement(doc: Mapping[str, Any], command: str) -> dict[str, Any]:
    """A SLSA VSA over a ``check``/``audit`` result (its canonical JSON, *doc*)."""
    inputs = doc.get("inputs", [])
    descriptors = [i for i in inputs if i.get("kind") == "descriptor"]
    bundles = [i for i in inputs if i.get("kind") == "bundle"]
    others = [i for i in inputs if i.get("kind") not in ("descriptor", "bundle")]
    rows = [{"id": r["id"], "path": r.get("path"), "class": r["class"],
             "expect": r.get("expect"),
             "roots": sorted({a["root"] for a in r.get("anchors", []) if a.get("root")})}
            for r in doc.get("rows", [])]
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": d["path"], "digest": {"sha256": d["sha256"]}} for d in descriptors],
        "predicateType": VERDICT_PREDICATE,
        "predicate": {
            "timeVerified": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "resourceUri": f"residentkv:{command}:" + ",".join(d["path"] for d in descriptors),
            "verifier": {"id": VERIFIER_ID, "version": {"residentkv": __version__}},
            "policy": {"uri": f"residentkv:{command}",
                       "digest": {"sha256": hashlib.sha256(
                           "".join(sorted(b["sha256"] for b in bundles)).encode()).hexdigest()},
                       "bundles": [{"name": b["path"], "digest": {"sha256": b["sha256"]}}
                                   for b in bundles]},
            "inputAttestations": [{"uri": f"{i['kind']}:{i['path']}",
                                   "digest": {"sha256": i["sha256"]}} for i in others
                                  if len(str(i.get("sha256", ""))) == 64],
            "verificationResult": "PASSED" if doc.get("exit_code") == 0 else "FAILED",
            "verifiedLevels": [],
            ROWS_FIELD: rows,
            "residentkv.dev/summary": doc.get("summary", {}),
        },
    }
