"""The words and records of a chaos run: what clients planned and saw, what the nemesis did.

A run's *history* holds only observations: every HTTP exchange as the client saw it (status,
headers, the claim outcome it was given, tokens), every fault as the nemesis applied it, and
every server incarnation as the harness started and stopped it. What the engine says is read
later from its own event sink; nothing here is derived from the trace or invented.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CLAIMED_KINDS",
    "REUSE_KINDS",
    "Exchange",
    "FaultKind",
    "FaultRecord",
    "History",
    "Incarnation",
    "Op",
    "OpKind",
    "RunSettings",
    "StopCause",
    "Transport",
]


class OpKind(StrEnum):
    """What one client request does."""

    #: the session registers its claim (the full claim)
    REGISTER = "register"
    #: the session reuses its claim by reference (``resident_claim_ref``)
    REUSE_REF = "reuse_ref"
    #: the session repeats its full claim (a reuse, or an answer about a known id)
    REUSE_FULL = "reuse_full"
    #: a request without a claim (ordinary traffic; it also pushes prefixes out of the device)
    UNCLAIMED = "unclaimed"
    #: a reference to another tenant's claim id under the sender's own owner scope
    FOREIGN_REF = "foreign_ref"
    #: another tenant's claim id quoted as a full claim with the sender's owner scope
    FOREIGN_FULL = "foreign_full"
    #: a registration sent by the nemesis to fill the host tier
    PRESSURE = "pressure"
    #: an unclaimed request under a cache salt of its own: the recompute every restored
    #: output is compared with (sent before the load, never counted in its figures)
    REFERENCE = "reference"


#: kinds whose request carries a claim or a claim reference
CLAIMED_KINDS = frozenset({OpKind.REGISTER, OpKind.REUSE_REF, OpKind.REUSE_FULL,
                           OpKind.FOREIGN_REF, OpKind.FOREIGN_FULL, OpKind.PRESSURE})
#: kinds that reuse the sender's own claim
REUSE_KINDS = frozenset({OpKind.REUSE_REF, OpKind.REUSE_FULL})


class FaultKind(StrEnum):
    """What the nemesis does."""

    #: a failure-injection rule (``once``) on a session's claim, through the control socket
    INJECT_FAILURE = "inject_failure"
    #: a ``corrupt`` rule: the claim's stored bytes are flipped before its next load
    CORRUPT_COPY = "corrupt_copy"
    #: a burst of registrations that fills the host tier; released at the fault's end
    HOST_TIER_PRESSURE = "host_tier_pressure"
    #: the operator releases a session's claim through the control socket
    OPERATOR_RELEASE = "operator_release"
    #: SIGKILL to vLLM's EngineCore process, then the server restarted on the same sink
    KILL_ENGINE = "kill_engine"
    #: SIGTERM to the API server, then the server restarted on the same sink
    TERMINATE_SERVER = "terminate_server"


class Transport(StrEnum):
    """Why an exchange has no HTTP response."""

    #: the connection was refused: nothing reached the server
    REFUSED = "connection_refused"
    #: the request was sent and the connection ended before a complete response
    LOST = "connection_lost"
    #: no response within the client's timeout
    TIMEOUT = "timeout"


class StopCause(StrEnum):
    """How a server incarnation ended."""

    KILLED_ENGINE = "killed_engine"
    TERMINATED = "terminated"
    FINAL_STOP = "final_stop"
    #: the harness attached to a server it did not start and leaves running
    ATTACHED = "attached"
    #: the server died on its own (not by the nemesis)
    DIED = "died"


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Op(_Record):
    """One planned client request (the generator's output; deterministic from the seed)."""

    op_id: int
    client: int
    kind: OpKind
    #: the sending session (``tenant:T/session:S``), or None for a client's unclaimed traffic
    session: str | None
    #: the session whose claim a foreign request names
    target_session: str | None = None
    stream: bool = False
    #: the key the prompt's tokens are derived from (with the seed)
    prompt: str
    #: seconds the client waits before sending it
    think_s: float = 0.0


class Exchange(_Record):
    """One HTTP exchange, as the client saw it."""

    op_id: int
    client: int
    kind: OpKind
    stream: bool
    session: str | None
    #: the owner scope and claim id the request carried, and how (``full`` or ``ref``)
    owner_scope: str | None = None
    claim_id: str | None = None
    claim_form: str | None = None
    prompt: str
    #: seconds since the run started when the request was sent
    sent_at: float
    latency_ms: float
    #: the server incarnation that was up (or last up) when it was sent
    incarnation: int
    #: the ``X-Request-Id`` the client sent (the middleware replaces it on claimed requests)
    request_id_sent: str
    #: the request's ticket as the response named it (``X-Request-Id`` header, body id or the
    #: refusal's ``request_id``); None when no response named one
    ticket: str | None = None
    status: int | None = None
    transport: Transport | None = None
    #: the claim outcome the response delivered (header, body or error), verbatim
    outcome: dict[str, Any] | None = None
    outcome_header: str | None = None
    claim_header: str | None = None
    should_retry_header: str | None = None
    #: whether the official ``openai`` client (default settings) would send it again
    would_retry: bool = False
    error_type: str | None = None
    error_message: str | None = None
    tokens: list[int] = Field(default_factory=list)
    finish_reason: str | None = None


class FaultRecord(_Record):
    """One fault of the schedule and what applying it did."""

    kind: FaultKind
    #: seconds of serving load after which the schedule applies it
    due_after_s: float
    #: the session it aims at (its claim at that moment is ``claim_id``)
    target_session: str | None = None
    claim_id: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    applied: bool = False
    #: what happened, in a sentence (pids, rules set, claims released, restart time)
    detail: str = ""


class Incarnation(_Record):
    """One server lifetime on the run's sink."""

    index: int
    started_at: float
    ready_at: float | None = None
    stopped_at: float | None = None
    stopped_by: StopCause | None = None
    pid: int | None = None
    log: str | None = None


class RunSettings(_Record):
    """Everything that decides a run besides the machine: seed, load, faults, deployment."""

    seed: int
    clients: int
    tenants: int
    sessions_per_tenant: int
    ops: int
    duration_s: float
    rate_per_client: float
    stream_share: float
    faults: tuple[FaultKind, ...]
    prompt_tokens: int
    max_tokens: int
    block_size: int
    model: str
    managed: bool
    base_url: str
    control_socket: str
    device_blocks: int | None = None
    host_tier_bytes: int | None = None
    shutdown_timeout_s: int | None = None


class History(_Record):
    """A whole run: settings, the planned ops, every exchange, fault and incarnation."""

    schema_: str = Field(default="residentkv.chaos-history/v1", alias="schema")
    settings: RunSettings
    sink: str
    ops: list[Op]
    exchanges: list[Exchange]
    faults: list[FaultRecord]
    incarnations: list[Incarnation]
    #: prompt key -> the greedy tokens of its recompute (a ``reference`` exchange)
    reference_tokens: dict[str, list[int]]
    #: seconds from the run's start to the first load request and to the end of the load
    load_started_at: float
    load_ended_at: float
    #: seconds of the load during which the server served (restarts excluded)
    load_served_s: float
    #: the harness stopped the deployment at the end (graceful SIGTERM); claims still open in
    #: the last stream then vanished, instead of being live
    stopped_at_end: bool

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    def to_json(self) -> dict[str, Any]:
        """The history's JSON form (``history.json``)."""
        return self.model_dump(mode="json", by_alias=True)
