"""`make fleet` classifies the dynamo+residentkv row on the streams it has just written (SPEC §7.1
live root): positive from a run whose scenarios all held, never from a failing run's streams,
and only where each anchor names the stream of its claim's home in that run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from residentkv.adapters.dynamo.row import classify_row, runtime_sources
from residentkv.lowering.sources import SourceRoot
from residentkv.sources import cached_roots
from residentkv.sources.roots import runtimes_dir

RECORDED = runtimes_dir() / "traces" / "fleet"
#: where the recorded run placed each claim the row cites
HOMES = {"fleet-own-0": "B", "fleet-fail-0": "B"}


@pytest.fixture
def run_traces(tmp_path: Path) -> dict[str, Path]:
    """A run's streams, written outside the package (as `make fleet` writes them)."""
    folder = tmp_path / "traces"
    folder.mkdir()
    out = {}
    for name in ("A", "B"):
        out[name] = folder / f"replica-{name}.jsonl"
        shutil.copyfile(RECORDED / f"replica-{name}.jsonl", out[name])
    return out


@pytest.fixture
def sources(request: pytest.FixtureRequest) -> dict[str, SourceRoot]:
    """The vLLM release the traces were recorded on: installed (as in the fleet venv), else
    from the pinned release cache."""
    installed = runtime_sources()
    if installed:
        return installed
    return cached_roots(request.getfixturevalue("pinned_cache"))[0]


def test_a_run_that_held_grants_the_row_through_the_live_root(
        tmp_path: Path, run_traces: dict[str, Path], sources: dict[str, SourceRoot]) -> None:
    row = classify_row(tmp_path / "out", run_traces, HOMES, held=True, sources=sources)
    assert row.klass == "adapter_policy_evidence", row.reasons
    assert row.granted
    traces = {aid: a for aid, a in row.anchors.items() if a["kind"] == "trace"}
    assert traces and all((a["root"] or "").startswith("live") for a in traces.values())
    assert "live root" in row.line()


def test_a_failing_run_does_not_grant(tmp_path: Path, run_traces: dict[str, Path],
                                      sources: dict[str, SourceRoot]) -> None:
    row = classify_row(tmp_path / "out", run_traces, HOMES, held=False, sources=sources)
    assert not row.granted
    assert row.klass not in {"native_conformance", "adapter_policy_evidence",
                             "adapter_observational_evidence"}, row.reasons


def test_anchors_follow_the_claims_homes(tmp_path: Path, run_traces: dict[str, Path],
                                         sources: dict[str, SourceRoot]) -> None:
    """The same streams under swapped names: the anchors follow the homes, so the row still
    grants; with the homes not followed it would cite the wrong stream and fail."""
    swapped = {"A": run_traces["B"], "B": run_traces["A"]}
    row = classify_row(tmp_path / "out", swapped, {"fleet-own-0": "A", "fleet-fail-0": "A"},
                       held=True, sources=sources)
    assert row.klass == "adapter_policy_evidence", row.reasons
    wrong = classify_row(tmp_path / "out2", swapped, {}, held=True, sources=sources)
    assert not wrong.granted
