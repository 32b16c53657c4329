"""The ``dynamo+residentkv`` row, classified on the fleet run's own traces (SPEC §7.1, *live*).

The curated row (``data/descriptors/runtimes/dynamo_residentkv_adapter.yaml``) cites the
replica streams of one recorded run, shipped in the package. A fleet run checks the same row on
the streams it has just written: the shipped descriptor is copied beside copies of this run's
streams, each trace anchor is pointed at the stream of its claim's home in this run (the router,
not the harness, decides where a claim lands) and pinned to the bytes written, and the row is
classified with a live root of trust for those bytes. Only a run whose scenarios all held gives
that root: the streams of a failing run are cited evidence (they may refuse, never grant).
"""

from __future__ import annotations

import importlib.util
import io
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from residentkv.lowering.anchors import Verifier
from residentkv.lowering.check import run_check
from residentkv.lowering.sources import SourceRoot, open_root
from residentkv.lowering.trace_pins import pin_trace_digests
from residentkv.lowering.yamlio import round_trip_yaml
from residentkv.sources.roots import runtimes_dir

__all__ = ["ROW_FILE", "RowVerdict", "classify_row", "runtime_sources"]

ROW_FILE = "dynamo_residentkv_adapter.yaml"
TRACE_DIR = Path("traces") / "fleet"
PRODUCER = "the fleet replicas this run started (make fleet)"
#: the classes that grant (SPEC §7: 1-3)
POSITIVE = frozenset({"native_conformance", "adapter_policy_evidence",
                      "adapter_observational_evidence"})


@dataclass(frozen=True)
class RowVerdict:
    """The row's class on this run's traces, and what each anchor rested on."""

    row_id: str
    klass: str
    expect: str | None
    live: bool
    descriptor: str
    #: anchor id -> its verification result and, for a trace, its root of trust (or None)
    anchors: dict[str, dict[str, str | None]] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)

    @property
    def granted(self) -> bool:
        """Positive (a class that grants) and what the row expects."""
        return self.klass in POSITIVE and self.klass == self.expect

    def line(self) -> str:
        roots = ", ".join(f"{aid}: {a['root'] or a['result']}"
                          for aid, a in self.anchors.items() if a["kind"] == "trace")
        how = "live root" if self.live else "no live root (the run failed)"
        return (f"{self.row_id}: {self.klass} (expect {self.expect}) from this run's traces, "
                f"{how}; {roots}")

    def to_json(self) -> dict[str, Any]:
        return {"row": self.row_id, "class": self.klass, "expect": self.expect,
                "granted": self.granted, "live": self.live, "descriptor": self.descriptor,
                "anchors": self.anchors, "reasons": self.reasons}


def runtime_sources() -> dict[str, SourceRoot]:
    """The vLLM the workers ran (the installed one) as the row's source root, when present."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:
        return {}
    return {"vllm": open_root("vllm", Path(spec.origin).parent.parent)}


def classify_row(out: Path, traces: Mapping[str, Path], homes: Mapping[str, str | None], *,
                 held: bool, sources: Mapping[str, SourceRoot]) -> RowVerdict:
    """Classify the row on *traces* (replica name -> this run's stream).

    *homes* maps each claim to the replica that holds it in this run (the fleet view's
    ``claims``); *held* says whether every scenario held (only then are the streams live).
    The descriptor and the trace copies are written under ``out/row``.
    """
    from residentkv.trust.roots import TraceTrust

    trust = TraceTrust()
    folder = trust.live.create(out / "row")  # a folder this run creates empty (SPEC §7.2)
    (folder / TRACE_DIR).mkdir(parents=True, exist_ok=True)
    copies = {}
    for name, path in traces.items():
        copies[name] = folder / TRACE_DIR / f"replica-{name}.jsonl"
        shutil.copyfile(path, copies[name])
    desc = folder / ROW_FILE
    shutil.copyfile(runtimes_dir() / ROW_FILE, desc)
    _aim_at_homes(desc, {c: h for c, h in homes.items() if h in copies})
    pin_trace_digests(desc)
    if held:
        for copy in copies.values():
            trust.add_live(copy, PRODUCER)
    (row,) = run_check([desc], verifier=Verifier(dict(sources)), trust=trust).rows
    return RowVerdict(
        row_id=row.id, klass=row.klass, expect=row.expect, live=held, descriptor=str(desc),
        anchors={a.id: {"kind": a.kind, "result": a.result, "root": a.root}
                 for a in row.anchors},
        reasons=list(row.reasons))


def _aim_at_homes(descriptor: Path, homes: Mapping[str, str | None]) -> None:
    """Point each trace anchor at the stream of its claim's home (comments and layout kept)."""
    yaml = round_trip_yaml()
    doc: Any = yaml.load(descriptor.read_text(encoding="utf-8"))
    for row in doc.get("rows") or []:
        for anchor in (row.get("anchors") or {}).values():
            if not isinstance(anchor, dict) or anchor.get("kind") != "trace":
                continue
            home = homes.get(str(anchor.get("claim")))
            if home is not None:
                anchor["path"] = (TRACE_DIR / f"replica-{home}.jsonl").as_posix()
    buf = io.StringIO()
    yaml.dump(doc, buf)
    descriptor.write_text(buf.getvalue(), encoding="utf-8")
