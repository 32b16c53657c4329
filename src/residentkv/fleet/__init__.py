"""The fleet view: several replicas' event streams judged together (gate ``fleet_outcome``).

Several replicas of a runtime sit behind a KV-aware router, each writing its own
``residentkv.event/v1`` stream. :func:`judge_fleet` reads them (streaming, one pass each) and
decides whether every replica is identified, every claim has one home, every claim-carrying
request got exactly one decision naming its claim from the replica that served it, and no claim
crossed tenants; it also records each claim's home and status (a claim *lost* between replicas
is harm) and each claim-carrying request's replica and decision. :func:`reference_fleet` is the
executable reference semantics the streaming gate must equal. docs/fleet-view.md explains every
requirement id and the one-clock assumption.
"""

from residentkv.fleet.gate import FleetGate, judge_fleet
from residentkv.fleet.model import (
    BOUNDARY,
    FLEET_SCHEMA,
    FleetClaim,
    FleetJudgement,
    FleetLoss,
    FleetProblem,
    FleetRequest,
    FleetStream,
)
from residentkv.fleet.semantics import reference_fleet
from residentkv.fleet.why import WHY, why_missing

__all__ = [
    "BOUNDARY",
    "FLEET_SCHEMA",
    "WHY",
    "FleetClaim",
    "FleetGate",
    "FleetJudgement",
    "FleetLoss",
    "FleetProblem",
    "FleetRequest",
    "FleetStream",
    "judge_fleet",
    "reference_fleet",
    "why_missing",
]
