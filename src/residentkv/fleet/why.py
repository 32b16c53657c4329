"""One line per fleet requirement id: why gate ``fleet_outcome`` reports it missing."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from residentkv.model.vocabulary import FleetRequirement as R

_WHY: dict[str, str] = {
    R.REPLICAS_IDENTIFIED: "a stream could not be read cleanly, does not open with "
                           "stream_started naming a replica, or names a replica another "
                           "stream already named",
    R.CLAIM_SINGLE_HOME: "a claim was accepted on more than one replica",
    R.ONE_OUTCOME_PER_CLAIMED_REQUEST: "a claim-carrying request did not get exactly one "
                                       "decision naming its claim before it finished on the "
                                       "replica that served it (or none was seen at all)",
    R.NO_CROSS_TENANT: "a claim was restored or reused for a request of another owner_scope "
                       "(or of no declared one)",
    R.LEGAL_TRANSITIONS: "a replica's stream holds a step of a claim, or of a request naming "
                         "it, that the automaton does not allow (the problem names "
                         "the replica, the seq, the state and the violation)",
}

#: fleet requirement id -> the one-line reason it is missing
WHY: Mapping[str, str] = MappingProxyType(_WHY)


def why_missing(requirement: str) -> str:
    """The one-line reason *requirement* is missing; raises KeyError for an unknown id."""
    return WHY[requirement]
