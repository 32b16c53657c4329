"""Obligation bundles: per protection mode, what a conformant lowering must bind.

A bundle is versioned YAML (``residentkv.bundle/v1``). For each of B1-B4 it lists the trace
requirement ids that refine it and the alternatives of evidence that can satisfy it: each
alternative is a list of gate names that must *all* pass (``[[lifecycle], [observation,
failure_outcome]]``), or ``source`` where a verified source anchor may satisfy it. Shipped
bundles live in ``residentkv/data/bundles``; ``--bundles DIR`` adds or replaces them. Shipped
and user bundles go through the same loader and the same checks: an empty bundle, a missing
obligation, an unknown gate or an unknown requirement id is an error (no vacuous truth).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from residentkv.findings import Finding
from residentkv.limits import read_bounded
from residentkv.lowering.yamlio import (
    DescriptorError,
    load_yaml,
    locate,
    plain,
    validation_findings,
)
from residentkv.model.vocabulary import OBLIGATION_SHORT, OutcomeType
from residentkv.model.vocabulary import OBLIGATIONS as OBLIGATIONS
from residentkv.trace.gates import REQUIREMENTS

BUNDLE_SCHEMA = "residentkv.bundle/v1"
SHORT = OBLIGATION_SHORT
SOURCE = "source"
#: obligations only a trace can show (SPEC §7.1): no source or doc alternative for them
BEHAVIOURAL: frozenset[str] = frozenset({"B3", "B4"})


def gate_requirements() -> Mapping[str, tuple[str, ...]]:
    """gate name -> requirement ids it reports (the trace gates' own table)."""
    return REQUIREMENTS


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BundleObligation(_Frozen):
    """One of B1-B4 refined: requirement ids and the evidence alternatives that satisfy it."""

    refines: Literal["B1", "B2", "B3", "B4"]
    summary: str = Field(min_length=1)
    requirements: list[str] = Field(min_length=1)
    satisfied_by: list[list[str]] = Field(min_length=1)

    def gates(self) -> set[str]:
        """Every gate named in any alternative."""
        return {g for alt in self.satisfied_by for g in alt if g != SOURCE}


class Bundle(_Frozen):
    """The obligations of one protection mode."""

    schema_: Literal["residentkv.bundle/v1"] = Field(alias="schema")
    mode: str = Field(min_length=1)
    version: int = Field(ge=1)
    summary: str = Field(min_length=1)
    outcomes: list[OutcomeType] = Field(min_length=1)
    obligations: dict[str, BundleObligation]
    source: str = "(inline)"
    digest: str = ""


def _semantic_findings(bundle: Bundle, root: Any, path: str) -> list[Finding]:
    """Empty/missing obligations, unknown gates, unknown requirement ids — each located."""
    out: list[Finding] = []
    missing = [o for o in OBLIGATIONS if o not in bundle.obligations]
    extra = [o for o in bundle.obligations if o not in OBLIGATIONS]
    if missing or extra:
        line, col = locate(root, ("obligations",))
        out.append(Finding(
            code="O002", path=path, line=line, col=col,
            message=f"bundle {bundle.mode!r} obligations: missing {missing or 'none'}, "
                    f"unknown {extra or 'none'}; expected exactly {list(OBLIGATIONS)}",
            help="a bundle must refine all four of B1-B4 (no vacuous truth)"))
    known = gate_requirements()
    for name, ob in bundle.obligations.items():
        out += _gate_findings(name, ob, known, root, path)
    return out


def _gate_findings(
    name: str, ob: BundleObligation, known: Mapping[str, tuple[str, ...]], root: Any, path: str
) -> list[Finding]:
    out: list[Finding] = []
    for i, alt in enumerate(ob.satisfied_by):
        if ob.refines in BEHAVIOURAL and SOURCE in alt:
            line, col = locate(root, ("obligations", name, "satisfied_by", i))
            out.append(Finding(
                code="O014", path=path, line=line, col=col,
                message=f"{name} ({ob.refines}): alternative {alt} admits source evidence; "
                        f"{ob.refines} is behaviour, shown only by a passing trace gate",
                help="a bundle may tighten the evidence it admits, never admit source or doc "
                     "evidence for B3 or B4: list trace gates only"))
            continue
        bad = [g for g in alt if g != SOURCE and g not in known]
        if bad or not alt:
            line, col = locate(root, ("obligations", name, "satisfied_by", i))
            out.append(Finding(
                code="O004", path=path, line=line, col=col,
                message=f"{name}: alternative {alt} names unknown gate(s) {bad}; "
                        f"expected gates from {sorted(known)} or 'source'",
                help="fix the gate name; an empty alternative is not allowed"))
    reportable = {r for g in ob.gates() for r in known.get(g, ())}
    for j, req in enumerate(ob.requirements):
        if req not in reportable:
            line, col = locate(root, ("obligations", name, "requirements", j))
            out.append(Finding(
                code="O003", path=path, line=line, col=col,
                message=f"{name}: requirement {req!r} is reported by none of the gates "
                        f"{sorted(ob.gates())}; expected a requirement id of those gates",
                help="see the gate contract for each gate's requirement ids"))
    return out


def parse_bundle(text: str, path: str) -> Bundle:
    """Parse and check one bundle; any problem raises :class:`DescriptorError` (exit code 2)."""
    root = load_yaml(text, path, code="O001")
    if not isinstance(root, dict):
        raise DescriptorError("bundle is not a YAML mapping; expected schema/mode/obligations",
                              code="O001", path=path, line=1, col=1)
    try:
        bundle = Bundle.model_validate(
            {**plain(root), "source": path,
             "digest": hashlib.sha256(text.encode()).hexdigest()})
    except ValidationError as e:
        # every schema problem of a bundle is a bundle finding, whatever pydantic called it
        findings = validation_findings(e, root, path, default="O001")
        raise _as_error([f.model_copy(update={"code": "O001"}) for f in findings]) from None
    if not bundle.obligations:
        line, col = locate(root, ("obligations",))
        raise _as_error([Finding(code="O002", path=path, line=line, col=col,
                                 message="bundle has an empty obligation list; expected B1-B4",
                                 help="no vacuous truth: list all four obligations")])
    problems = _semantic_findings(bundle, root, path)
    if problems:
        raise _as_error(problems)
    return bundle


def _as_error(findings: list[Finding]) -> DescriptorError:
    first = findings[0]
    rest = "".join("\n" + f.render() for f in findings[1:])
    return DescriptorError(f"{first.message}{rest}", code=first.code, path=first.path,
                           line=first.line, col=first.col, help=first.help)


def _bundle_files(folder: Traversable | Path) -> Iterable[Traversable | Path]:
    return sorted((f for f in folder.iterdir() if f.name.endswith((".yaml", ".yml"))),
                  key=lambda f: f.name)


def shipped_bundle_dir() -> Traversable:
    """The bundles shipped in the package (read through importlib.resources)."""
    return resources.files("residentkv").joinpath("data", "bundles")


def load_bundles(extra_dir: str | Path | None = None) -> dict[str, Bundle]:
    """Shipped bundles, then those of *extra_dir*: a user bundle replaces a shipped one only
    when it requires, obligation by obligation, at least what the shipped one does (SPEC
    §7.2); anything weaker is refused with a located error (O016)."""
    found: dict[str, Bundle] = {}
    for f in _bundle_files(shipped_bundle_dir()):
        b = parse_bundle(f.read_text(encoding="utf-8"), f"<package>/data/bundles/{f.name}")
        found[b.mode] = b
    if extra_dir is not None:
        floor = _b4_floor(found.values())
        for mode, (user, text) in _load_dir(Path(extra_dir)).items():
            drops = (loosenings(user, found[mode]) if mode in found
                     else _new_mode_loosenings(user, floor))
            if drops:
                raise _loosened(user, text, drops)
            found[mode] = user
    return found


#: one way a user bundle requires less than the shipped one: (obligation or None, what)
Drop = tuple[str | None, str]


def loosenings(user: Bundle, shipped: Bundle) -> list[Drop]:
    """Every requirement of *shipped* that *user* drops (empty: *user* only tightens).

    Per obligation: the same B-number it refines; every requirement id kept; every evidence
    alternative at least one of the shipped alternatives (a superset of its gates). The
    outcome types a bundle accepts may only shrink.
    """
    drops: list[Drop] = []
    extra = sorted(set(user.outcomes) - set(shipped.outcomes))
    if extra:
        accepted = ", ".join(shipped.outcomes)
        drops.append((None, f"outcomes admit {', '.join(extra)}, which the shipped "
                            f"{shipped.mode} bundle does not accept ({accepted})"))
    for name, base in shipped.obligations.items():
        mine = user.obligations.get(name)
        if mine is None:
            continue  # a missing obligation is already an error of the bundle itself
        if mine.refines != base.refines:
            drops.append((name, f"refines {mine.refines}, the shipped bundle {base.refines}"))
        lost = [r for r in base.requirements if r not in mine.requirements]
        if lost:
            drops.append((name, f"drops requirement(s) {', '.join(lost)}"))
        for alt in mine.satisfied_by:
            if not any(set(alt) >= set(b) for b in base.satisfied_by):
                drops.append((name, f"admits {alt}, which requires less than every shipped "
                                    f"alternative ({_alts(base.satisfied_by)})"))
    return drops


def _b4_floor(shipped: Iterable[Bundle]) -> frozenset[str]:
    """The gates some shipped bundle admits for B4: a new mode's B4 needs one of them."""
    return frozenset(g for b in shipped for ob in b.obligations.values() if ob.refines == "B4"
                     for alt in ob.satisfied_by for g in alt)


def _new_mode_loosenings(user: Bundle, floor: frozenset[str]) -> list[Drop]:
    """A mode no shipped bundle covers still shows B4 only on an outcome gate."""
    return [(name, f"admits {alt} for B4, which holds none of the outcome gates "
                   f"({', '.join(sorted(floor))}) any shipped bundle requires for B4")
            for name, ob in user.obligations.items() if ob.refines == "B4"
            for alt in ob.satisfied_by if not set(alt) & floor]


def _alts(alts: list[list[str]]) -> str:
    return " or ".join("[" + ", ".join(a) + "]" for a in alts)


def _loosened(user: Bundle, text: str, drops: list[Drop]) -> DescriptorError:
    root = load_yaml(text, user.source, code="O016")
    findings = []
    for name, what in drops:
        loc: tuple[str, ...] = ("obligations", name) if name else ("outcomes",)
        line, col = locate(root, loc)
        findings.append(Finding(
            code="O016", path=user.source, line=line, col=col,
            message=f"bundle {user.mode!r}{' ' + name if name else ''}: {what}; a user "
                    "bundle may only tighten what the shipped bundle requires",
            help="require at least what the shipped bundle requires, or name a "
                 "new mode"))
    return _as_error(findings)


def _load_dir(folder: Path) -> dict[str, tuple[Bundle, str]]:
    if not folder.is_dir():
        raise DescriptorError(f"--bundles {folder}: not a directory; expected a folder of YAML "
                              "bundles", code="L001", path=str(folder))
    out: dict[str, tuple[Bundle, str]] = {}
    files = list(_bundle_files(folder))
    if not files:
        raise DescriptorError("no *.yaml bundle in the directory; expected at least one",
                              code="O002", path=str(folder))
    for f in files:
        try:
            text = read_bounded(Path(str(f)), "bundle").decode("utf-8")
        except UnicodeDecodeError as e:
            raise DescriptorError(f"cannot read bundle: {e}", code="L001", path=str(f)) from None
        b = parse_bundle(text, str(f))
        out[b.mode] = (b, text)
    return out
