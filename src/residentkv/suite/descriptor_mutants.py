"""Single mutations of suite descriptors: drop an anchor, break an anchor's hash, weaken an
obligation's status. Monotonicity (SPEC §7) says none of them may move a row to a stronger
positive class (1-4); a broken hash must also show as a failed verification."""

from __future__ import annotations

import copy
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from residentkv.errors import UserInputError
from residentkv.lowering.anchors import Verifier
from residentkv.lowering.check import open_sources, run_check
from residentkv.lowering.classify import POSITIVE, RANK
from residentkv.lowering.yamlio import load_yaml, plain
from residentkv.suite.case import SuiteCase
from residentkv.suite.runner import source_location

#: the status an obligation weakens to
WEAKER = {"satisfied": "partial", "partial": "absent", "unknown": "absent"}

Row = dict[str, Any]


@dataclass(frozen=True)
class DescriptorMutant:
    operator: str
    parent: str
    row_id: str
    description: str
    row: Row
    broken_anchor: str | None = None


@dataclass(frozen=True)
class DescriptorVerdict:
    mutant: DescriptorMutant
    killed: bool
    why: str


def _drop_anchor(row: Row) -> Iterator[tuple[str, Row, str | None]]:
    for name, ob in sorted(row.get("obligations", {}).items()):
        for aid in ob.get("evidence", []):
            m = copy.deepcopy(row)
            m["obligations"][name]["evidence"].remove(aid)
            cited = {a for o in m["obligations"].values() for a in o.get("evidence", [])}
            if aid not in cited:  # keep the row valid: an uncited anchor is a schema error
                m["anchors"].pop(aid, None)
            if not m["obligations"][name]["evidence"]:
                m["obligations"][name]["status"] = "unknown"
            yield f"drop anchor {aid} from {name}", m, None


def _break_hash(row: Row) -> Iterator[tuple[str, Row, str | None]]:
    for aid, anchor in sorted(row.get("anchors", {}).items()):
        digest = anchor.get("sha256")
        if anchor.get("kind") != "source" or not isinstance(digest, str) or not digest:
            continue
        m = copy.deepcopy(row)
        m["anchors"][aid]["sha256"] = ("1" if digest[0] == "0" else "0") + digest[1:]
        yield f"break the sha256 of anchor {aid}", m, aid


def _weaken(row: Row) -> Iterator[tuple[str, Row, str | None]]:
    for name, ob in sorted(row.get("obligations", {}).items()):
        weaker = WEAKER.get(ob.get("status"))
        if weaker is None:
            continue
        m = copy.deepcopy(row)
        m["obligations"][name]["status"] = weaker
        yield f"weaken {name} from {ob['status']} to {weaker}", m, None


OPERATORS = {"drop_anchor": _drop_anchor, "break_anchor_hash": _break_hash,
             "weaken_status": _weaken}


def _source(case_dir: Path, work: Path, rel: str) -> Path:
    base, rel = source_location(case_dir, rel)
    return (work if base == case_dir else base) / rel


class DescriptorParent:
    """A passing case's descriptor, copied with its evidence into a scratch folder."""

    def __init__(self, case_dir: Path, case: SuiteCase, scratch: Path) -> None:
        assert case.descriptor is not None
        self.name = f"{case.id}/{case.descriptor}"
        self.work = scratch / case.id
        # symlinks are copied as links, never followed: a link out of the suite must not
        # pull outside files (or the whole file system) into scratch
        shutil.copytree(case_dir, self.work, symlinks=True)
        text = (self.work / case.descriptor).read_text(encoding="utf-8")
        self.doc = plain(load_yaml(text, self.name))
        self.sources = [f"{n}={_source(case_dir, self.work, p)}"
                        for n, p in sorted(case.sources.items())]
        self.bundles = self.work / case.bundles if case.bundles else None
        self.verifier = Verifier(open_sources(self.sources))
        rows = self._check(self.doc["rows"]).rows
        ids = [r.id for r in rows]
        # monotonicity is about valid rows: mutating an invalid one may only repair it
        self.classes = {r.id: r.klass for r in rows
                        if r.verdict is not None and ids.count(r.id) == 1}

    def _check(self, rows: list[Row]) -> Any:
        path = self.work / "mutant.yaml"
        with path.open("w", encoding="utf-8") as fh:
            YAML(typ="safe", pure=True).dump({**self.doc, "rows": rows}, fh)
        return run_check([path], (), self.bundles, verifier=self.verifier)

    def mutants(self) -> Iterator[DescriptorMutant]:
        for row in self.doc.get("rows", []):
            if not isinstance(row, dict) or row.get("id") not in self.classes:
                continue
            for name, operator in OPERATORS.items():
                for description, mutated, broken in operator(row):
                    yield DescriptorMutant(name, self.name, row["id"], description, mutated,
                                           broken)

    def judge(self, m: DescriptorMutant) -> DescriptorVerdict:
        parent = self.classes[m.row_id]
        try:
            (result,) = self._check([m.row]).rows
        except (UserInputError, ValueError) as e:
            return DescriptorVerdict(m, True, f"mutant could not be evaluated ({e}): not stronger")
        if result.klass in POSITIVE and RANK[result.klass] < RANK[parent]:
            return DescriptorVerdict(m, False, f"{parent} -> {result.klass}: stronger")
        if m.broken_anchor is not None:
            anchor = next((a for a in result.anchors if a.id == m.broken_anchor), None)
            if anchor is not None and anchor.result == "verified":
                return DescriptorVerdict(m, False, f"anchor {m.broken_anchor} still verified")
        return DescriptorVerdict(m, True, f"{parent} -> {result.klass}")


def descriptor_mutants(cases: list[tuple[Path, SuiteCase]], scratch: Path) -> list[
        tuple[DescriptorParent, DescriptorMutant]]:
    """Every mutant of every valid row of the given (passing) descriptor cases."""
    out = []
    for folder, case in cases:
        if case.descriptor is None or not case.classes:
            continue
        parent = DescriptorParent(folder, case, scratch)
        out += [(parent, mutant) for mutant in parent.mutants()]
    return out
