"""The package's manifest of recorded runs (SPEC §7.2, *package*).

``data/recorded.json`` lists the traces the package ships as recorded evidence -- the vLLM
witness's and the fleet's runs -- each with its sha256, what recorded it, its emitter (name,
version, and the distribution that ships it: residentkv) and its runtime (name, version).
The manifest is itself package data, matched against the package's digest index like every
trace it lists. Suite cases and examples are hand-written and are not in it: cited, never
granting. ``python -m residentkv.audit.refresh`` rewrites the witness entries when it ships
new witness traces; :func:`entry_for` builds an entry from a trace's own first event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from residentkv.jsontext import write_json
from residentkv.limits import json_depth_ok, read_bounded
from residentkv.lowering.identity import EmitterName, RuntimeId, TraceOrigin
from residentkv.lowering.provenance import scan_file
from residentkv.trust.package import package_data_dir, package_match

__all__ = ["MANIFEST", "MANIFEST_SCHEMA", "OWN_DISTRIBUTION", "Recorded", "entry_for",
           "recorded", "write_manifest"]

MANIFEST = "recorded.json"
MANIFEST_SCHEMA = "residentkv.recorded/v1"
#: the distribution that ships residentkv's own emitters (the witness, the fleet connector)
OWN_DISTRIBUTION = RuntimeId.parse("residentkv")


@dataclass(frozen=True)
class Recorded:
    """One manifest entry: a recorded trace of the package and who emitted it."""

    path: Path
    sha256: str
    recorded_by: str
    origin: TraceOrigin


def _origin(entry: dict[str, Any]) -> TraceOrigin:
    e, r = entry["emitter"], entry["runtime"]
    return TraceOrigin(EmitterName.parse(e["name"]), e["version"],
                       RuntimeId.parse(e["distribution"]), RuntimeId.parse(r["name"]),
                       r["version"])


@lru_cache(maxsize=1)
def _load() -> tuple[dict[Path, Recorded], str | None]:
    """``({resolved path: entry}, problem)`` of the shipped manifest; an unusable manifest
    (edited, unlisted, malformed) lists nothing (fail-closed) and says why."""
    data_dir = package_data_dir()
    path = data_dir / MANIFEST
    try:
        raw = read_bounded(path, "recorded-trace manifest", 1 << 20)
    except Exception as e:
        return {}, f"the manifest {MANIFEST} cannot be read: {e}"
    if package_match(path, raw) is None:
        return {}, f"the manifest {MANIFEST} does not match the package's digest index"
    try:
        doc = json.loads(raw) if json_depth_ok(raw) else None
        if not isinstance(doc, dict) or doc.get("schema") != MANIFEST_SCHEMA:
            raise ValueError(f"schema is not {MANIFEST_SCHEMA}")
        out = {}
        for entry in doc["traces"]:
            where = (data_dir / entry["path"]).resolve()
            if not where.is_relative_to(data_dir):
                raise ValueError(f"{entry['path']} lies outside the package data")
            out[where] = Recorded(where, str(entry["sha256"]), str(entry["recorded_by"]),
                                  _origin(entry))
    except (ValueError, KeyError, TypeError) as e:
        return {}, f"the manifest {MANIFEST} is malformed: {e}"
    return out, None


def recorded(path: Path) -> Recorded | str:
    """The manifest entry of the package file at *path*, or why it has none."""
    entries, problem = _load()
    if problem is not None:
        return problem
    found = entries.get(path.resolve())
    if found is None:
        return ("it ships in the package but is not a recorded run (not in the package's "
                f"{MANIFEST}: suite cases and examples are hand-written)")
    return found


def entry_for(trace: Path, recorded_by: str) -> dict[str, Any]:
    """A manifest entry for a package trace residentkv's own emitter wrote (its first event
    names emitter and runtime; the emitter ships in residentkv)."""
    facts = scan_file(trace)
    p = facts.provenance
    if p is None:
        raise ValueError(f"{trace}: {facts.provenance_problem}")
    return {"path": trace.resolve().relative_to(package_data_dir()).as_posix(),
            "sha256": facts.sha256, "recorded_by": recorded_by,
            "emitter": {"name": p.emitter, "version": p.emitter_version,
                        "distribution": str(OWN_DISTRIBUTION)},
            "runtime": {"name": p.runtime, "version": p.runtime_version}}


def write_manifest(entries: list[dict[str, Any]], *, replace: str | None = None,
                   dest: Path | None = None) -> Path:
    """Write the manifest: *entries* plus the current ones not recorded by *replace*."""
    path = dest or package_data_dir() / MANIFEST
    kept: list[dict[str, Any]] = []
    if path.is_file():
        kept = [e for e in json.loads(path.read_text(encoding="utf-8"))["traces"]
                if e.get("recorded_by") != replace]
    traces = sorted([*kept, *entries], key=lambda e: e["path"])
    write_json(path, {"schema": MANIFEST_SCHEMA, "traces": traces}, indent=1)
    _load.cache_clear()
    return path
