"""The two judges the fleet verdicts use: the fleet view over every replica's stream, and the
single-stream ``observation`` gate on a claim's home stream."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from residentkv.fleet import FleetJudgement, judge_fleet

__all__ = ["failure_outcome_passes", "fleet_judgement", "observation_passes"]


def fleet_judgement(paths: Sequence[Path]) -> FleetJudgement:
    """Gate ``fleet_outcome`` (:func:`residentkv.fleet.judge_fleet`) over the replicas'
    streams."""
    return judge_fleet([str(p) for p in paths])


def _gate_passes(gate: str, path: Path, claim_id: str) -> bool:
    from residentkv.trace.gates import check_trace

    result = check_trace(path, gates=(gate,), claim_id=claim_id)
    return bool(result.results) and all(r.passed for r in result.results)


def observation_passes(path: Path, claim_id: str) -> bool:
    """Whether gate ``observation`` passes for *claim_id* on the stream at *path*."""
    return _gate_passes("observation", path, claim_id)


def failure_outcome_passes(path: Path, claim_id: str) -> bool:
    """Whether gate ``failure_outcome`` passes for *claim_id* on the stream at *path*."""
    return _gate_passes("failure_outcome", path, claim_id)
