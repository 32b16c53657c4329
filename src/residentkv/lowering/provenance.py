"""What a trace file says about where it came from, read in one bounded pass.

:func:`scan_file` hashes a trace and scans it in the same pass: its sha256 (and, for a file
that lies in the package's data, the git blob digest an editable install's index keeps), the
``stream_started`` event that opens it (:class:`Provenance`, the names as the trace types
them) and every claim's protection modes. Nothing here decides who emitted a trace: that is
what its root of trust says (:mod:`residentkv.trust.roots`, SPEC §7.2). The names a trace
types may only *demote* its evidence (another runtime than the row's, the simulator).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from residentkv.limits import MAX_JSON_DEPTH, MAX_LINE_BYTES, json_depth_ok
from residentkv.lowering.identity import (
    EmitterName,
    IdentityError,
    RuntimeId,
    pep503,
    plain_token,
)

PROVENANCE_EVENT = "stream_started"
#: residentkv's own simulator, by folded name: a name may only ever *demote* (a look-alike of
#: the simulator's name is cited too); it never decides who emitted a trace
SIMULATOR_EMITTERS: frozenset[str] = frozenset(
    pep503(n) for n in ("residentkv.microruntime", "microruntime"))
_BATCH = 4096


@dataclass(frozen=True)
class Provenance:
    """The ``stream_started`` event that opens a trace, as typed (identities parsed once)."""

    emitter: str
    emitter_version: str
    runtime: str
    runtime_version: str

    @property
    def emitter_name(self) -> EmitterName:
        return EmitterName.parse(self.emitter)

    @property
    def runtime_id(self) -> RuntimeId:
        return RuntimeId.parse(self.runtime)

    @property
    def release(self) -> tuple[str, str]:
        return self.runtime_id.key, self.runtime_version

    @property
    def simulated(self) -> bool:
        return pep503(self.emitter.strip()) in SIMULATOR_EMITTERS


@dataclass
class TraceFacts:
    """What one bounded pass over a trace file learns for the lowering checker."""

    provenance: Provenance | None = None
    provenance_problem: str | None = "the trace does not open with a stream_started event"
    #: claim id -> every protection_mode its claim_accepted events name
    modes: dict[str, set[str]] = field(default_factory=dict)
    #: the file's sha256, and its git blob digest when that was asked for
    sha256: str = ""
    git_blob: str | None = None
    _opened: bool = field(default=False, repr=False, compare=False)

    def fold(self, lines: list[bytes]) -> None:
        """Fold a batch of lines in (the provenance comes from the first non-blank line)."""
        for raw in lines:
            if not raw.strip():
                continue
            if not self._opened:
                self._opened = True
                self.provenance, self.provenance_problem = _provenance(raw)
            if b"claim_accepted" not in raw:
                continue
            event = _json(raw)
            if isinstance(event, dict) and event.get("event") == "claim_accepted":
                cid, mode = event.get("claim_id"), event.get("protection_mode")
                if isinstance(cid, str):
                    self.modes.setdefault(cid, set()).add(mode if isinstance(mode, str)
                                                          else "?")


_NO_START = "the trace does not open with a stream_started event"


def scan_trace(lines: list[bytes]) -> TraceFacts:
    """Provenance (first non-blank line) and claim modes of a trace's lines."""
    facts = TraceFacts()
    facts.fold(lines)
    return facts


def scan_file(path: Path, *, git_blob: bool = False) -> TraceFacts:
    """Hash and scan the trace at *path* in one bounded pass (``OSError`` propagates).

    With *git_blob* the git blob digest of the bytes is computed in the same pass.
    """
    facts = TraceFacts()
    h = hashlib.sha256()
    with path.open("rb") as fh:
        blob = None
        if git_blob:
            blob = hashlib.sha1(b"blob %d\0" % Path(path).stat().st_size)
        batch: list[bytes] = []
        for line in _bounded_lines(fh, h, blob):
            batch.append(line)
            if len(batch) >= _BATCH:
                facts.fold(batch)
                batch = []
        facts.fold(batch)
    facts.sha256 = h.hexdigest()
    facts.git_blob = blob.hexdigest() if blob is not None else None
    return facts


def _bounded_lines(fh: BinaryIO, h: Any, blob: Any) -> Iterator[bytes]:
    """The lines of *fh* (each cut at the line limit) while feeding every byte to the hashes."""
    partial = b""
    while chunk := fh.read(1 << 20):
        h.update(chunk)
        if blob is not None:
            blob.update(chunk)
        parts = (partial + chunk).split(b"\n")
        partial = parts.pop()[: MAX_LINE_BYTES + 1]
        yield from parts
    if partial:
        yield partial


def _json(raw: bytes) -> Any:
    if len(raw) > MAX_LINE_BYTES or not json_depth_ok(raw, MAX_JSON_DEPTH):
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def _provenance(raw: bytes) -> tuple[Provenance | None, str | None]:
    event = _json(raw)
    if not isinstance(event, dict) or event.get("event") != PROVENANCE_EVENT:
        return None, _NO_START
    emitter, runtime = _pair(event.get("emitter")), _pair(event.get("runtime"))
    if emitter is None or runtime is None:
        return None, "stream_started needs emitter {name, version} and runtime {name, version}"
    try:  # names and versions compare exactly: one that would need trimming names nothing
        RuntimeId.parse(runtime[0])
        for value, what in ((emitter[0], "emitter name"), (emitter[1], "emitter version"),
                            (runtime[1], "runtime version")):
            plain_token(value, what)
    except IdentityError as e:
        return None, f"stream_started: {e}"
    return Provenance(emitter[0], emitter[1], runtime[0], runtime[1]), None


def _pair(value: Any) -> tuple[str, str] | None:
    if not isinstance(value, dict):
        return None
    name, version = value.get("name"), value.get("version")
    if not (isinstance(name, str) and isinstance(version, str) and name.strip()
            and version.strip()):
        return None
    return name, version


def read_metadata(text: str) -> tuple[str, str] | None:
    """``(PEP 503 name, version)`` from a METADATA / PKG-INFO header, if it has both."""
    name = version = None
    for line in text.splitlines():
        if not line.strip():
            break  # the body (long description) starts after the first blank line
        key, _, value = line.partition(":")
        if key.strip().lower() == "name":
            name = value.strip()
        elif key.strip().lower() == "version":
            version = value.strip()
    if not name or not version:
        return None
    return pep503(name), version


def metadata_paths(names: list[str]) -> list[str]:
    """Member paths that hold packaging metadata (top-level dist-info METADATA or PKG-INFO)."""
    out = []
    for n in names:
        parts = Path(n).parts
        dist_info = len(parts) == 2 and parts[0].endswith(".dist-info")
        if (dist_info and parts[1] == "METADATA") or n == "PKG-INFO":
            out.append(n)
    return sorted(out)
