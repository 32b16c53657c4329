"""Verdicts verified as verdicts (SPEC §7.2): a signed SLSA VSA counts only when it says
``PASSED`` and every resource it names is the file at hand.

The checks follow SLSA's own VSA verification: the predicate type, the verifier's id (this
tool's), the policy (its URI and the digest of the bundles it names), the resource URI (derived
from the subjects, and exactly the one the caller expects: a verifier always says which
resource the verdict must be about), the subjects' digests, each input attestation's digest,
and ``verificationResult``. A resource is the file
given on the command line with the same name, else the file at the path it names (bundles
named ``<package>/...`` are the installed package's). A missing file is a failure, never a
pass. Everything printed is a validated field, escaped (:func:`shown`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from residentkv.errors import UserInputError
from residentkv.limits import regular_file
from residentkv.lowering.bundles import shipped_bundle_dir
from residentkv.lowering.descriptor import CLASSES
from residentkv.printable import printable
from residentkv.trust.statements import ROWS_FIELD, VERIFIER_ID

__all__ = ["POLICY_URIS", "shown", "verdict_problems"]

#: the policies a residentkv verdict is issued under
POLICY_URIS: frozenset[str] = frozenset({"residentkv:check", "residentkv:audit"})
_HEX64 = re.compile(r"[0-9a-f]{64}")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
_PACKAGE_BUNDLES = "<package>/data/bundles/"
#: printed text is cut here (a row id of a megabyte says nothing more)
_SHOWN_CHARS = 200


def shown(value: object, limit: int | None = _SHOWN_CHARS) -> str:
    """*value* as one printable line (:func:`residentkv.printable.printable`), cut at *limit*
    characters (``None``: a sentence of this module's own, whose fields are cut)."""
    return printable(value, limit)


def _get(doc: Any, *path: str) -> Any:
    for key in path:
        doc = doc.get(key) if isinstance(doc, dict) else None
    return doc


def _named(items: Any, name_key: str) -> list[tuple[str, str]] | None:
    """``[(name, sha256)]`` of a list of ``{name_key: str, digest: {sha256: hex}}``."""
    if not isinstance(items, list):
        return None
    out = []
    for item in items:
        name, sha = _get(item, name_key), _get(item, "digest", "sha256")
        if not (isinstance(name, str) and name and isinstance(sha, str)
                and _HEX64.fullmatch(sha)):
            return None
        out.append((name, sha))
    return out


def verdict_problems(statement: dict[str, Any], resources: Sequence[Path] = (),
                     resource_uri: str | None = None) -> tuple[list[str], list[str]]:
    """``(problems, lines)``: why a signed verdict does not hold (empty: it holds), and the
    validated rows to print."""
    pred = statement.get("predicate")
    problems: list[str] = []
    subjects = _named(statement.get("subject"), "name")
    bundles = _named(_get(pred, "policy", "bundles"), "name")
    inputs = _named(_get(pred, "inputAttestations"), "uri")
    if not subjects:
        problems.append("its subjects are not a non-empty list of {name, digest.sha256}")
    if bundles is None or inputs is None:
        problems.append("its policy bundles or input attestations are not lists of "
                        "{name|uri, digest.sha256}")
    if _get(pred, "verifier", "id") != VERIFIER_ID:
        problems.append(f"its verifier.id is {shown(_get(pred, 'verifier', 'id'))}, "
                        f"expected {VERIFIER_ID}")
    policy_uri = _get(pred, "policy", "uri")
    if policy_uri not in POLICY_URIS:
        problems.append(f"its policy.uri is {shown(policy_uri)}, expected one of "
                        f"{', '.join(sorted(POLICY_URIS))}")
    if not isinstance(_get(pred, "timeVerified"), str) or not _TIME.fullmatch(
            _get(pred, "timeVerified")):
        problems.append("its timeVerified is not a UTC time (YYYY-MM-DDTHH:MM:SSZ)")
    uri = _get(pred, "resourceUri")
    if subjects and isinstance(policy_uri, str):
        derived = f"{policy_uri}:" + ",".join(n for n, _ in subjects)
        if uri != derived:
            problems.append(f"its resourceUri {shown(uri)} is not the one its subjects make "
                            f"({shown(derived)})")
    if resource_uri is None:  # which resource it must be about is the verifier's to say
        problems.append("no expected resourceUri was given to compare its resourceUri with "
                        "(--resource-uri)")
    elif uri != resource_uri:
        problems.append(f"its resourceUri is {shown(uri)}, expected {shown(resource_uri)}")
    if bundles is not None:
        digest = hashlib.sha256("".join(sorted(s for _, s in bundles)).encode()).hexdigest()
        if _get(pred, "policy", "digest", "sha256") != digest:
            problems.append("its policy digest is not the digest of the bundles it names")
    result = _get(pred, "verificationResult")
    if result != "PASSED":
        problems.append(f"its verificationResult is {shown(result)}, not PASSED")
    for name, sha in subjects or []:
        problems += _resource_problem("descriptor", name, sha, resources)
    for name, sha in bundles or []:
        problems += _resource_problem("bundle", name, sha, resources)
    for uri_, sha in inputs or []:
        kind, _, where = uri_.partition(":")
        if kind == "source":
            where = where.partition("=")[2]
        problems += _resource_problem(kind or "input", where, sha, resources)
    rows, bad_rows = _rows(pred)
    if bad_rows:
        problems.append(bad_rows)
    return problems, rows


def _rows(pred: Any) -> tuple[list[str], str | None]:
    rows = _get(pred, ROWS_FIELD)
    if not isinstance(rows, list):
        return [], f"its {ROWS_FIELD} is not a list of rows"
    lines = []
    for r in rows:
        rid, klass = _get(r, "id"), _get(r, "class")
        if not isinstance(rid, str) or klass not in CLASSES:
            return [], f"a row of {ROWS_FIELD} has no string id or no known class"
        lines.append(f"  {shown(rid)}: {klass}")
    return lines, None


def _resource_problem(kind: str, name: str, sha: str, given: Sequence[Path]) -> list[str]:
    """Why the file a verdict names does not match its digest (empty: it matches)."""
    path = _locate(name, given)
    if path is None:
        return [f"{kind} {shown(name)}: not found (give it on the command line)"]
    try:
        regular_file(path, kind)
        h = hashlib.sha256()
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
    except (UserInputError, OSError) as e:
        return [f"{kind} {shown(name)}: {shown(getattr(e, 'message', e))}"]
    if h.hexdigest() != sha:
        return [f"{kind} {shown(name)}: {shown(path)} has sha256 {h.hexdigest()}, the verdict "
                f"names {sha}"]
    return []


def _locate(name: str, given: Sequence[Path]) -> Path | None:
    """The file given with *name*'s file name, else the file at the path *name* names."""
    base = Path(name).name
    for g in given:
        if g.name == base:
            return g
    if name.startswith(_PACKAGE_BUNDLES):
        shipped = Path(str(shipped_bundle_dir())) / name.removeprefix(_PACKAGE_BUNDLES)
        return shipped if shipped.exists() else None
    p = Path(name)
    return p if p.exists() else None
