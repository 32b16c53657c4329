"""What a row may conclude from each of its anchors: one ordered list of row rules (SPEC §7,
§7.1, §7.2).

Each rule reads one anchor of one row (:class:`Evidence`) and returns a :class:`Demotion` or
nothing; :func:`weigh` applies :data:`ROW_RULES` in order, doing the shared checks once (the
anchor kinds and results a rule reads, native rows only) and asserting that every step only
weakens the result (verified > cited > none), so the monotonicity of SPEC §7 holds by
construction. The rules that read a root of trust come last (``trust=True``): the result just
before them is what the row would conclude were every trace rooted (the O015 note).

Who emitted a trace is what its root says (:class:`~residentkv.lowering.identity.TraceOrigin`);
whether an emitter is native to a runtime is whether its module ships in that runtime's own
distribution (:meth:`~residentkv.lowering.sources.SourceRoot.shipped_module`). An attested
root's word counts only as far as facts bear it out: the distribution it names for the
emitter, where the trust policy lets the signing key speak for that distribution or a
``RECORD`` shows it shipping the emitter's module; the runtime artifact it names, where that
is the verified ``--source`` of the release. The names a trace types only ever demote.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from residentkv.lowering.anchors import AnchorResult, AnchorState
from residentkv.lowering.descriptor import Anchor, Row, SourceAnchor
from residentkv.lowering.identity import EmitterName, RowTarget, RuntimeId, pep503
from residentkv.lowering.provenance import TraceFacts
from residentkv.lowering.sources import SourceRoot
from residentkv.trust.roots import Grant, Refusal, Root, TraceTrust

__all__ = ["ROW_RULES", "TRACE_FILE_RULES", "Demotion", "Evidence", "RowRule", "Weighed",
           "weigh"]

V, C, F, D = (AnchorState.VERIFIED, AnchorState.UNVERIFIABLE, AnchorState.FAILED,
              AnchorState.DRIFTED)


@dataclass(frozen=True)
class Demotion:
    """A weaker result for an anchor, with its code and the reason in words."""

    result: AnchorState
    code: str
    why: str


def cite(code: str, why: str) -> Demotion:
    """Demoted to cited evidence: it may refuse conformance, never grant."""
    return Demotion(C, code, why)


@dataclass(frozen=True)
class Evidence:
    """What the row rules may read about one anchor of one row."""

    anchor: Anchor
    row: Row
    #: the descriptor's verified releases (the source roots that verified a source anchor)
    releases: frozenset[tuple[str, str]]
    #: every source root given; the one a source anchor was read in
    sources: Mapping[str, SourceRoot]
    source_root: SourceRoot | None = None
    #: a trace anchor: its one scan, its resolved path, the run's roots of trust
    facts: TraceFacts | None = None
    path: Path | None = None
    trust: TraceTrust | None = None

    @cached_property
    def target(self) -> RowTarget | str:
        """What the row's runtime binds (or why it binds nothing)."""
        return RowTarget.parse(self.row.runtime.name, self.row.runtime.version)

    @cached_property
    def root(self) -> Grant | Refusal:
        """The trace's root of trust (computed once per run and file by :class:`TraceTrust`)."""
        if self.trust is None or self.path is None or self.facts is None:
            return Refusal("no root of trust was consulted for this trace")
        return self.trust.root_of(self.path, self.facts)

    @cached_property
    def native_file(self) -> str | None:
        """``NAME=ROOT: path`` of the rooted emitter's module as the runtime's own
        distribution ships it (its RECORD, verified in a source root given here), or None."""
        root = self.root
        if not isinstance(root, Grant):
            return None
        o = root.origin
        if o.emitter_dist is not None and o.emitter_dist != o.runtime:
            return None  # the root says another distribution ships it, whatever RECORD lists
        return self._shipped(o.emitter, o.runtime, o.runtime_version)

    @cached_property
    def distribution_fact(self) -> str | None:
        """Why the distribution an attested root names for the emitter counts (``None``: it
        does not, or the root names none): the policy lets the signing key speak for it, or
        that distribution's RECORD in a source root given here ships the emitter's module."""
        root = self.root
        if not isinstance(root, Grant) or root.origin.emitter_dist is None:
            return None
        dist = root.origin.emitter_dist
        if root.key is not None and root.key.speaks_for(dist):
            return (f"distribution {dist}: {root.key.label!r} may speak for it "
                    "(its distributions in the trust policy)")
        shipped = self._shipped(root.origin.emitter, dist, None)
        if shipped is not None:
            return (f"distribution {dist}: it ships the emitter's module ({shipped}, RECORD "
                    "digest verified)")
        return None

    @cached_property
    def artifact_fact(self) -> str | None:
        """``NAME=ROOT`` of a source root given here whose release artifact (archive, or an
        installed distribution's RECORD) is the one the attested root names, or None."""
        root = self.root
        if not isinstance(root, Grant) or root.origin.artifact_sha256 is None:
            return None
        o = root.origin
        for name, source in sorted(self.sources.items()):
            if o.artifact_sha256 in source.artifact_digests(o.runtime, o.runtime_version):
                return (f"runtime artifact sha256 {o.artifact_sha256[:16]}…: the source "
                        f"{name}={source.location} of {o.runtime} {o.runtime_version}")
        return None

    def _shipped(self, emitter: EmitterName, dist: RuntimeId,
                 version: str | None) -> str | None:
        """``NAME=ROOT: path`` of *emitter*'s module in *dist*'s RECORD in a source root."""
        for name, source in sorted(self.sources.items()):
            found = source.shipped_module(emitter, dist, version)
            if found is not None:
                return f"{name}={source.location}: {found}"
        return None


Check = Callable[[Evidence, AnchorResult], Demotion | None]


@dataclass(frozen=True)
class RowRule:
    """One rule: the anchors it reads, and the check that may demote one."""

    name: str
    check: Check
    kinds: frozenset[str] = frozenset({"trace"})
    reads: frozenset[AnchorState] = frozenset({V})
    #: reads the root of trust (applied after every rule that does not)
    trust: bool = False
    native_only: bool = False


# ------------------------------------------------------------------------ the rules


def _pinned(ev: Evidence, r: AnchorResult) -> Demotion | None:
    pin = getattr(ev.anchor, "sha256", None)
    if pin is not None and pin != r.sha256:
        return Demotion(D, "A001", f"the trace's sha256 is {r.sha256}, the anchor pins {pin}")
    if pin is None:
        return cite("A010", "the anchor does not pin the trace's sha256 (anyone could have "
                            "typed this file)")
    return None


def _provenance(ev: Evidence, r: AnchorResult) -> Demotion | None:
    if ev.facts is None or ev.facts.provenance is None:
        return cite("A011", (ev.facts.provenance_problem if ev.facts else None)
                    or "no provenance")
    return None


def _simulated(ev: Evidence, r: AnchorResult) -> Demotion | None:
    p = ev.facts.provenance if ev.facts else None
    if p is not None and p.simulated:
        return cite("A003", f"the trace is simulated (emitter {p.emitter!r}): evidence about "
                            "semantics, never about a runtime")
    return None


def _mode(ev: Evidence, r: AnchorResult) -> Demotion | None:
    if set(r.claim_modes) == {ev.row.lowers}:
        return None
    found = ", ".join(r.claim_modes) or "no claim_accepted"
    return Demotion(F, "A014", f"the claim's protection_mode is {found}; the row lowers "
                               f"{ev.row.lowers}: this trace is not evidence for this mode")


def _verified_release(ev: Evidence, r: AnchorResult) -> Demotion | None:
    p = ev.facts.provenance if ev.facts else None
    if p is None or p.release in ev.releases:
        return None
    return cite("A012", f"its runtime release {p.release[0]} {p.release[1]} is not a verified "
                        "source of this descriptor (give --source for it and anchor its code)")


def _anchor_version(ev: Evidence, r: AnchorResult) -> Demotion | None:
    a, root = ev.anchor, ev.source_root
    if not isinstance(a, SourceAnchor) or a.version is None or root is None:
        return None
    package = pep503(a.package)
    declared = ({root.version} if root.version is not None else
                {v for n, v in root.releases() if n == package})
    if not declared or a.version.strip() in declared:
        return None
    return Demotion(F, "A031", f"the anchor says {a.package} {a.version}, but its source root "
                               f"{root.name}={root.location} holds "
                               f"{', '.join(sorted(declared))}")


def _runtime_name(ev: Evidence, r: AnchorResult) -> Demotion | None:
    """The runtime the trace names must be the row's (a demotion only: who emitted it is the
    root's to say, below); a row that names no version binds no trace."""
    target, p = ev.target, ev.facts.provenance if ev.facts else None
    if isinstance(target, str):
        return cite("A032", target)
    if p is not None and p.runtime_id != target.runtime:
        return cite("A032", f"it was recorded on runtime {p.runtime!r} and the row describes "
                            f"{ev.row.runtime.name!r} (runtime {target.runtime})")
    if target.version is None:
        return cite("A032", f"the row names no version of {ev.row.runtime.name}, so no trace "
                            "is bound to it (name and version, both)")
    return None


def _row_release(ev: Evidence, r: AnchorResult) -> Demotion | None:
    """Evidence counts only for the release the row describes: a trace recorded on, or code
    of the row's own runtime read in, another release shows nothing about this one."""
    wanted = ev.row.runtime.version
    if wanted is None or isinstance(ev.target, str):
        return None
    p = ev.facts.provenance if ev.facts else None
    if r.kind == "trace":
        if p is None or p.runtime_version == wanted:
            return None
        return cite("A016", f"it was recorded on {p.runtime} {p.runtime_version} and "
                            f"the row describes {ev.row.runtime.name} {wanted}")
    a, root = ev.anchor, ev.source_root
    assert isinstance(a, SourceAnchor)
    own = {ev.target.runtime, ev.target.adapter}
    package = RuntimeId.maybe(a.package)
    if package is None or package not in own:
        return None
    known = a.version if a.version is not None else (root.version if root else None)
    read = ({known.strip()} if known is not None else
            {v for n, v in (root.releases() if root else set()) if n == package.key})
    if read == {wanted}:
        return None
    shown = ", ".join(sorted(read)) or "an undeclared release"
    return cite("A016", f"it was read in {a.package} {shown} and the row describes "
                        f"{ev.row.runtime.name} {wanted}")


def _rooted(ev: Evidence, r: AnchorResult) -> Demotion | None:
    root = ev.root
    if isinstance(root, Refusal):
        return cite(root.code, f"evidence cited, not trusted: {root.reason}")
    return None


def _distribution(ev: Evidence, r: AnchorResult) -> Demotion | None:
    """An attested root's word on which distribution ships the emitter counts only where the
    trust policy lets its key speak for that distribution, or that distribution's RECORD in
    a source root given here ships the emitter's module: a signer's say-so binds no row."""
    root = ev.root
    assert isinstance(root, Grant)
    o = root.origin
    if root.root is not Root.ATTESTED or o.emitter_dist is None:
        return None
    if ev.distribution_fact is not None:
        return None
    allowed = ", ".join(sorted(map(str, root.key.distributions))) if root.key else ""
    return cite("A054", f"its attestation says {o.emitter_dist} ships the emitter {o.emitter}, "
                        f"but the trust policy lets key {root.key.label if root.key else '?'!r} "
                        f"speak for {allowed or 'no distribution'} and no source root given "
                        f"here has {o.emitter_dist}'s RECORD listing "
                        f"{' or '.join(o.emitter.module_files()) or 'a module of that name'}")


def _artifact(ev: Evidence, r: AnchorResult) -> Demotion | None:
    """An attested trace names the runtime artifact it was recorded on: it must be the
    verified source of that release given here (its archive, or its installed RECORD)."""
    root = ev.root
    assert isinstance(root, Grant)
    o = root.origin
    if root.root is not Root.ATTESTED or ev.artifact_fact is not None:
        return None
    return cite("A055", f"its attestation names runtime artifact sha256 {o.artifact_sha256}, "
                        f"which is not the digest of any source of {o.runtime} "
                        f"{o.runtime_version} given here (its wheel or sdist, or an installed "
                        "distribution's RECORD)")


def _native(ev: Evidence, r: AnchorResult) -> Demotion | None:
    """A native row needs an emitter whose module ships inside the runtime's own distribution
    (its RECORD, verified in a source root given here); whatever it is named."""
    root = ev.root
    assert isinstance(root, Grant)
    o = root.origin
    if o.emitter_dist is not None and o.emitter_dist != o.runtime:
        return cite("A009", f"the {root.root.value} root says the emitter {o.emitter} ships in "
                            f"{o.emitter_dist}, not in {o.runtime}: adapter evidence never "
                            "shows native behaviour")
    if ev.native_file is None:
        return cite("A051", f"the emitter {o.emitter}'s module is not shown to ship in "
                            f"{o.runtime} {o.runtime_version}: no source root given here has "
                            f"that distribution's RECORD listing "
                            f"{' or '.join(o.emitter.module_files()) or 'a module of that name'}"
                            " with a digest its bytes match")
    return None


def _origin_bound(ev: Evidence, r: AnchorResult) -> Demotion | None:
    """The trace binds the row only when (runtime, adapter, version), as its root says, are
    the row's: an adapter's trace never binds another adapter's row, nor the runtime's."""
    root, target = ev.root, ev.target
    assert isinstance(root, Grant) and not isinstance(target, str)
    o = root.origin
    native = ev.native_file is not None
    got = o.target(native)
    if got == target:
        return None
    said = ("the emitter ships in the runtime itself" if native else
            f"the emitter ships in {o.emitter_dist}" if o.emitter_dist is not None else
            "the root names no distribution for the emitter and none is shown to be the "
            "runtime's")
    return cite("A052", f"its {root.root.value} root binds it to "
                        f"{got if got is not None else 'no row'} ({said}), and the row "
                        f"describes {target}")


#: the rules, in the order they apply (the first demotion of a verified result decides)
ROW_RULES: tuple[RowRule, ...] = (
    RowRule("pinned", _pinned),
    RowRule("provenance", _provenance),
    RowRule("simulated", _simulated),
    RowRule("mode", _mode),
    RowRule("verified release", _verified_release),
    RowRule("anchor version", _anchor_version, kinds=frozenset({"source"}),
            reads=frozenset({V, D})),
    RowRule("runtime name", _runtime_name),
    RowRule("row release", _row_release, kinds=frozenset({"trace", "source"})),
    RowRule("rooted", _rooted, trust=True),
    RowRule("native", _native, trust=True, native_only=True),
    RowRule("origin bound", _origin_bound, trust=True),
    RowRule("distribution", _distribution, trust=True),
    RowRule("artifact", _artifact, trust=True),
)


#: the rules no row changes (the trace file itself: pinned, with provenance, not simulated)
TRACE_FILE_RULES: tuple[RowRule, ...] = ROW_RULES[:3]


# ------------------------------------------------------------------------ applying them


@dataclass(frozen=True)
class Weighed:
    """An anchor's result as the row concludes it, and as it would were its trace rooted."""

    result: AnchorResult
    untrusted: AnchorResult


def demote(r: AnchorResult, d: Demotion) -> AnchorResult:
    """*r* weakened by *d* (asserted: a rule never strengthens a result)."""
    assert d.result.strength <= r.result.strength, (r.result, d)
    return r.model_copy(update={"result": d.result, "code": d.code,
                                "detail": f"{r.detail}, but {d.why}"})


def weigh(ev: Evidence, result: AnchorResult,
          rules: tuple[RowRule, ...] = ROW_RULES) -> Weighed:
    """Apply *rules* in order to *result* (see the module docstring)."""
    r = result
    untrusted: AnchorResult | None = None
    for rule in rules:
        if rule.trust and untrusted is None:
            untrusted = r
        if r.kind not in rule.kinds or r.result not in rule.reads \
                or (rule.native_only and ev.row.mechanism != "native"):
            continue
        d = rule.check(ev, r)
        if d is not None:
            r = demote(r, d)
    if r.kind == "trace" and r.verified and isinstance(ev.root, Grant):
        r = _granted(ev, r, ev.root)
    return Weighed(r, untrusted if untrusted is not None else r)


def _granted(ev: Evidence, r: AnchorResult, root: Grant) -> AnchorResult:
    """A granting trace names its root and every fact the grant rests on."""
    facts = list(root.facts)
    facts += [f for f in (ev.artifact_fact, ev.distribution_fact) if f is not None]
    shipped = ev.native_file
    if shipped is not None:
        facts.append(f"native: the emitter's module ships in {root.origin.runtime} "
                     f"{root.origin.runtime_version} ({shipped}, RECORD digest verified)")
    return r.model_copy(update={"root": root.label, "facts": tuple(facts)})
