"""What a row may conclude from an anchor once its *binding* is checked (SPEC §7.1).

* a trace grants only with a root of trust (:func:`root_view`), and for a *native* row only
  when that root is a key the user trusts for the runtime's own emitter (:func:`native_root_view`);
* a trace is evidence only for the runtime the row names, by name and version, both
  (:func:`runtime_name_view`; the version half is :func:`residentkv.lowering.anchors.
  runtime_release_view`);
* a source anchor's ``version:`` is never trusted over the metadata of the root it was read in
  (:func:`anchor_version_view`).

Each view only ever weakens a result (verified -> cited or failed), so the monotonicity of
SPEC §7 holds.
"""

from __future__ import annotations

from residentkv.lowering.anchors import AnchorResult
from residentkv.lowering.descriptor import Anchor, Runtime, SourceAnchor
from residentkv.lowering.provenance import (
    Provenance,
    normalise_name,
    row_runtimes,
    runtime_identity,
)
from residentkv.lowering.sources import SourceRoot
from residentkv.trust.roots import Grant, Refusal, Root

__all__ = ["anchor_version_view", "native_root_view", "native_shape_view", "root_view",
           "runtime_name_view"]


def _cite(result: AnchorResult, code: str, why: str) -> AnchorResult:
    """A passing result demoted to cited evidence (it may refuse conformance, never grant)."""
    return result.model_copy(update={"result": "unverifiable", "code": code,
                                     "detail": f"{result.detail}, but {why}"})


def root_view(result: AnchorResult, root: Grant | Refusal) -> AnchorResult:
    """A verified trace keeps granting only on a root of trust; the report names the root."""
    if result.kind != "trace" or result.result != "verified":
        return result
    if isinstance(root, Grant):
        return result.model_copy(update={"root": root.label})
    return result.model_copy(update={
        "result": "unverifiable", "code": root.code,
        "detail": f"evidence cited, not trusted: {root.reason} ({result.detail})"})


def native_root_view(result: AnchorResult, root: Grant | Refusal,
                     runtime: Runtime) -> AnchorResult:
    """A native row needs the runtime's own emitter, vouched for by a trusted key.

    Never a name found in source text: only an attestation whose key the trust policy lists for
    this emitter *and* this runtime, of an emitter that is not residentkv's and is named after
    the runtime. Live and package traces are residentkv's own recordings (an adapter's).
    """
    result = native_shape_view(result)
    if result.kind != "trace" or result.result != "verified" or result.provenance is None:
        return result
    p = result.provenance
    wanted = row_runtimes(runtime.name)
    if not (isinstance(root, Grant) and root.root is Root.ATTESTED and root.key is not None):
        return _cite(result, "A013", f"a native row needs a trace attested by a key trusted "
                                     f"for {p['runtime']}'s own emitter; this one's root is "
                                     f"{root.root.value if isinstance(root, Grant) else 'none'}")
    key = root.key
    if not (normalise_name(p["emitter"]) in key.emitters
            and wanted & key.runtimes):
        return _cite(result, "A013", f"key {key.label!r} is not trusted for emitter "
                                     f"{p['emitter']!r} as the own emitter of {runtime.name} "
                                     "(the emitter must be named after the runtime, and the "
                                     "policy must list both)")
    return result


def native_shape_view(result: AnchorResult) -> AnchorResult:
    """What no key can change for a native row: an adapter's trace never shows native
    behaviour (A009), and the emitter must be named after the runtime (A013)."""
    if result.kind != "trace" or result.result != "verified" or result.provenance is None:
        return result
    p = result.provenance
    if p["emitter_kind"] == "adapter":
        return _cite(result, "A009", f"the trace was emitted by an adapter ({p['emitter']}): "
                     "adapter evidence never shows native behaviour")
    prov = Provenance(p["emitter"], p["emitter_version"], p["runtime"], p["runtime_version"])
    if not prov.runtime_owns_emitter():
        return _cite(result, "A013", f"its emitter {p['emitter']!r} is not named after the "
                                     f"runtime {p['runtime']!r}")
    return result


def runtime_name_view(result: AnchorResult, runtime: Runtime) -> AnchorResult:
    """A trace recorded on another runtime (by name) shows nothing about this row's, and a row
    that names no version binds no trace."""
    if result.kind != "trace" or result.result != "verified" or result.provenance is None:
        return result
    got = runtime_identity(result.provenance["runtime"])
    if got not in row_runtimes(runtime.name):
        return _cite(result, "A032", f"it was recorded on runtime "
                                     f"{result.provenance['runtime']!r} and the row describes "
                                     f"{runtime.name!r}")
    if runtime.version is None:
        return _cite(result, "A032", f"the row names no version of {runtime.name}, so no trace "
                                     "is bound to it (name and version, both)")
    return result


def anchor_version_view(result: AnchorResult, anchor: Anchor,
                        root: SourceRoot | None) -> AnchorResult:
    """An anchor whose ``version:`` disagrees with what its root declares is an error: the
    text was read in another release than the anchor says (A031)."""
    if not isinstance(anchor, SourceAnchor) or anchor.version is None or root is None \
            or result.result not in ("verified", "drifted"):
        return result
    package = runtime_identity(anchor.package)
    declared = ({root.version} if root.version is not None else
                {v for n, v in root.releases() if runtime_identity(n) == package})
    if not declared or anchor.version.strip() in declared:
        return result
    return result.model_copy(update={
        "result": "failed", "code": "A031",
        "detail": f"the anchor says {anchor.package} {anchor.version}, but its source root "
                  f"{root.name}={root.location} holds {', '.join(sorted(declared))}"})
