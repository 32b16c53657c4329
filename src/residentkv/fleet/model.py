"""The result of gate ``fleet_outcome``: a value with a deterministic JSON form.

Both implementations (the reference :mod:`residentkv.fleet.semantics` and the streaming
:mod:`residentkv.fleet.gate`) return a :class:`FleetJudgement`; renderers read its JSON form and
never re-evaluate anything.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from residentkv.findings import location, render_line
from residentkv.model.vocabulary import FLEET_GATE, FLEET_REQUIREMENTS
from residentkv.trace.gates import IllegalStep

FLEET_SCHEMA = "residentkv.fleet-check/v1"

Decision = Literal["accepted", "rejected", "reused", "refused"]
ClaimStatus = Literal["held", "ended", "lost"]

BOUNDARY = (
    "shows what these replicas' streams recorded about claim homes, one decision per "
    "claim-carrying request and tenant isolation, ordering events across streams by ts_ns on "
    "the assumption that every replica stamps them from one clock (as on one host); not what "
    "happened in streams that were not given, nor that each claim's lifecycle within its "
    "replica meets a single-stream gate's chain (run `residentkv trace check` on each stream "
    "for that); each stream's legality under the automaton is judged"
)


class FleetProblem(BaseModel):
    """A located finding of the fleet check: an input problem or a requirement violation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str
    name: str
    requirement: str
    message: str
    path: str | None = None
    line: int | None = None
    col: int | None = None
    request_id: str | None = None
    claim_id: str | None = None
    #: requirement legal_transitions: the replica whose stream holds the illegal step, and the
    #: step (seq, event, the state it met, the violation and why)
    replica: str | None = None
    illegal: IllegalStep | None = None

    @property
    def location(self) -> str:
        """``path:line:col`` with the parts that are known."""
        return location(self.path, self.line, self.col)

    def render(self) -> str:
        """``path:line:col: error[CODE name]: message``."""
        return render_line(self.code, self.name, self.message, path=self.path, line=self.line,
                           col=self.col)


class FleetStream(BaseModel):
    """One replica's stream as the fleet view read it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    replica: str | None
    events: int
    #: opened and holding at least one valid event (otherwise nothing in it could be judged)
    usable: bool


class FleetLoss(BaseModel):
    """Where a lost claim was found missing: a later request rejected on another replica."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    replica: str | None
    path: str
    request_id: str
    line: int
    ts_ns: int


class FleetClaim(BaseModel):
    """An accepted claim: the replica that holds it (its home) and its status at the end."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    claim_id: str
    #: the replica that holds the claim: where it was first accepted
    home: str | None
    home_path: str
    owner_scope: str | None
    #: held: open at the end of its home stream; ended: released, expired, demoted, failed
    #: closed or harmed there; lost: held, then rejected on another replica afterwards (harm)
    status: ClaimStatus
    #: the request that found a lost claim gone (rejected on another replica)
    lost_by_request: str | None = None
    lost_by: FleetLoss | None = None


class FleetRequest(BaseModel):
    """A claim-carrying request: which replica served it and what it was told."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    replica: str | None
    path: str
    request_id: str
    claim_ref: str
    #: the one decision kind naming its claim; None when there was none, or more than one
    decision: Decision | None
    #: whether the request met one_outcome_per_claimed_request
    passed: bool
    line: int


class FleetJudgement(BaseModel):
    """The verdict of gate ``fleet_outcome`` over several replicas' streams.

    ``missing`` lists the requirement ids not met (sorted); each has at least one located
    ``problems`` entry saying where and why. ``claims`` and ``requests`` are findings (what the
    fleet recorded), not failures: a ``lost`` claim is harm the fleet observed.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    gate: str = FLEET_GATE
    passed: bool
    missing: list[str]
    problems: list[FleetProblem]
    #: problems found, including reader problems beyond those kept in ``problems``
    problem_count: int
    streams: list[FleetStream]
    claims: list[FleetClaim]
    requests: list[FleetRequest]
    boundary: str = BOUNDARY

    @property
    def evaluated(self) -> bool:
        """Whether every stream could be read and held events (else the CLI exits 2)."""
        return bool(self.streams) and all(s.usable for s in self.streams)

    @property
    def harm(self) -> list[FleetClaim]:
        """The claims the fleet lost."""
        return [c for c in self.claims if c.status == "lost"]

    def to_json(self) -> dict[str, Any]:
        """The canonical JSON-able form (the one every report renders)."""
        from residentkv import __version__

        doc = self.model_dump(mode="json")
        doc["schema"] = FLEET_SCHEMA
        doc["tool"] = {"name": "residentkv", "version": __version__}
        doc["requirements"] = list(FLEET_REQUIREMENTS)
        doc["evaluated"] = self.evaluated
        return doc
