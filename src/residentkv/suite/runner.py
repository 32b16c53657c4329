"""Run suite cases: a case passes only if row classes, finding codes and gate results all
match exactly what its ``case.yaml`` states. Failing for another reason is a failure too."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.resources import as_file, files
from pathlib import Path

from residentkv.errors import UserInputError
from residentkv.lowering.check import run_check
from residentkv.lowering.descriptor import unsafe_path
from residentkv.lowering.sources import confined
from residentkv.suite.case import CaseError, SuiteCase, TraceExpectation, load_case
from residentkv.suite.files import case_file_problems
from residentkv.trace.gates import GateResult, check_trace
from residentkv.trust.policy import load_policy
from residentkv.trust.roots import TraceTrust


@dataclass(frozen=True)
class CaseResult:
    """What running one case showed, and every way it differed from its expectations."""

    id: str
    path: str
    case: SuiteCase | None
    mismatches: tuple[str, ...]
    classes: dict[str, str] = field(default_factory=dict)
    codes: frozenset[str] = frozenset()
    gate_results: tuple[GateResult, ...] = ()

    @property
    def passed(self) -> bool:
        return self.case is not None and not self.mismatches


def shipped_suite() -> Path:
    """The suite shipped in the package (data/suite)."""
    with as_file(files("residentkv.data") / "suite") as path:
        return Path(path)


SHARED = "_shared"
SHARED_PREFIX = "shared:"


def case_folders(root: Path) -> Iterator[Path]:
    """Every case folder under *root* (a folder per case; files at the top and the suite's
    ``_shared`` folder of common evidence are not cases)."""
    if not root.is_dir():
        raise UserInputError("suite folder not found", code="L001", path=str(root))
    yield from sorted(p for p in root.iterdir() if p.is_dir()
                      and not p.name.startswith((".", SHARED)))


def _escapes(folder: Path) -> str | None:
    """Why a case folder is not really inside its suite (a symlink out of it), or ``None``."""
    try:
        real = folder.resolve()
    except (OSError, RuntimeError):
        return "the case folder is a symlink loop"
    return None if real.is_relative_to(folder.parent.resolve()) else (
        f"S002: the case folder resolves to {real}, outside the suite (symlinks are not "
        "followed out of it)")


def source_location(folder: Path, rel: str) -> tuple[Path, str]:
    """Where a case's source root lives: in the case folder, or ``shared:NAME`` in the
    suite's ``_shared`` folder (one toy tree serves every case that does not alter it).

    A shared path is given relative to the suite folder itself, so confining it confines it
    to the suite: a ``_shared`` that is a link (to ``/``, say) never turns ``shared:etc``
    into ``/etc``.
    """
    if rel.startswith(SHARED_PREFIX):
        return folder.parent, f"{SHARED}/{rel.removeprefix(SHARED_PREFIX)}"
    return folder, rel


def _shared_link(folder: Path) -> str | None:
    """Why the suite's ``_shared`` folder cannot be used (it is a link), or ``None``.

    Refused whatever the link points at: the same answer for every target, so a case's
    result says nothing about what lies outside the suite.
    """
    shared = folder.parent / SHARED
    if shared.is_symlink():
        return (f"S002: {shared} is a symbolic link; the suite's shared folder must be a "
                "folder inside the suite (links are never followed out of it)")
    return None


def run_case(folder: Path, bundles_dir: Path | None = None) -> CaseResult:
    """Evaluate one case folder against its case.yaml."""
    escape = _escapes(folder)
    if escape is not None:
        return CaseResult(folder.name, str(folder), None, (escape,))
    refused = case_file_problems(folder)
    if refused:  # nothing of the case is read (or later copied) past a refused file
        return CaseResult(folder.name, str(folder), None, tuple(refused))
    try:
        case = load_case(folder)
    except CaseError as e:
        detail = [f.render() for f in e.findings] or [str(e)]
        return CaseResult(folder.name, str(folder), None, tuple(detail))
    except UserInputError as e:
        return CaseResult(folder.name, str(folder), None, (str(e),))
    mismatches: list[str] = []
    if not (folder / "README.md").is_file():
        mismatches.append("no README.md saying why the mapping is wrong (or right)")
    if case.bundles is not None:
        bundles_dir = _inside(folder, case.bundles, "bundles", mismatches)
    classes, codes = _descriptor(folder, case, bundles_dir, mismatches)
    results: list[GateResult] = []
    for expectation in case.traces:
        results += _trace(folder, expectation, codes, mismatches)
    if case.descriptor is not None and classes != case.classes:
        mismatches.append(f"classes: expected {dict(sorted(case.classes.items()))}, "
                          f"got {dict(sorted(classes.items()))}")
    if set(case.codes) != codes:
        mismatches.append(f"codes: expected {sorted(case.codes)}, got {sorted(codes)}")
    return CaseResult(case.id, str(folder), case, tuple(mismatches), classes,
                      frozenset(codes), tuple(results))


def _inside(folder: Path, rel: str, what: str, mismatches: list[str]) -> Path | None:
    """``folder/rel`` when it resolves inside *folder* (symlinks included), else a mismatch."""
    problem = unsafe_path(rel)
    if problem:
        mismatches.append(f"S002: {what} {rel!r}: {problem}")
        return None
    path = confined(folder.resolve(), rel)
    if path is None:
        mismatches.append(f"S002: {what} {rel!r} resolves outside {folder} (a symlink out of "
                          "the case is never followed)")
        return None
    if not path.exists():
        mismatches.append(f"{what} {rel!r} does not exist in the case folder")
        return None
    return path


def _descriptor(folder: Path, case: SuiteCase, bundles_dir: Path | None,
                mismatches: list[str]) -> tuple[dict[str, str], set[str]]:
    if case.descriptor is None:
        return {}, set()
    path = _inside(folder, case.descriptor, "descriptor", mismatches)
    sources = []
    for name, rel in sorted(case.sources.items()):
        shared_link = _shared_link(folder) if rel.startswith(SHARED_PREFIX) else None
        if shared_link is not None:
            mismatches.append(shared_link)
            continue
        root = _inside(*source_location(folder, rel), f"source {name}", mismatches)
        if root is not None:
            sources.append(f"{name}={root}")
    policy = None
    if case.trust is not None:
        policy = _inside(*source_location(folder, case.trust), "trust", mismatches)
    if path is None:
        return {}, set()
    try:
        trust = TraceTrust(policy=load_policy(policy) if policy is not None else None)
        result = run_check([path], sources, bundles_dir, trust=trust)
    except UserInputError as e:  # a file-level problem is an observable outcome with a code
        return {}, {e.code}
    classes = {row.id: row.klass for row in result.rows}
    codes = {f.code for row in result.rows for f in row.findings}
    return classes, codes


def _trace(folder: Path, exp: TraceExpectation, codes: set[str],
           mismatches: list[str]) -> list[GateResult]:
    path = _inside(folder, exp.path, "trace", mismatches)
    if path is None:
        return []
    try:
        check = check_trace(path, list(exp.gates), exp.claim)
    except UserInputError as e:
        codes.add(e.code)
        mismatches.append(f"{exp.path}: could not be read: {e}")
        return []
    codes.update(p.code for p in check.problems)
    by_gate = {r.gate: r for r in check.results}
    for gate, want in exp.gates.items():
        got = "pass" if by_gate[gate].passed else "fail"
        if got != want:
            mismatches.append(f"{exp.path} {gate} for {exp.claim}: expected {want}, got {got} "
                              f"(missing {', '.join(by_gate[gate].missing) or '-'})")
    for gate, want_missing in exp.missing.items():
        if sorted(want_missing) != by_gate[gate].missing:
            mismatches.append(f"{exp.path} {gate} missing: expected {sorted(want_missing)}, "
                              f"got {by_gate[gate].missing}")
    if exp.controls is not None:
        fired = sorted({k for r in check.results for k, v in r.controls.items() if v})
        if sorted(exp.controls) != fired:
            mismatches.append(f"{exp.path} controls: expected {sorted(exp.controls)}, "
                              f"got {fired}")
    return list(check.results)
