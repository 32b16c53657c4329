"""The validated configuration of :class:`ResidentClaimConnector` (no torch/vLLM needed).

It arrives as ``KVTransferConfig.kv_connector_extra_config`` and is checked once, when vLLM
constructs the connector; a bad value stops the engine at start with one message naming every
problem, instead of surfacing as a wrong trace later.

Failure injection is operator configuration only: it is read from here (or set by the
in-process operator API of the witness harness), never from a request, so a client cannot make
its own or anyone else's claim fail.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    model_validator,
)

from residentkv.errors import UserInputError

__all__ = [
    "CLAIM_PARAM",
    "CLAIM_REF_PARAM",
    "ConnectorConfig",
    "ConnectorConfigError",
    "InjectionRule",
    "parse_connector_config",
]

#: ``kv_transfer_params`` key of a request's full claim (a registration, or a reuse of it)
CLAIM_PARAM = "resident_claim"
#: ``kv_transfer_params`` key of a reuse by reference, ``{"claim_id", "owner_scope"}``: unlike
#: a repeated full claim it can never register anything, so a replica that does not hold the
#: claim answers ``not held`` instead of quietly accepting it as new (replicas behind a router)
CLAIM_REF_PARAM = "resident_claim_ref"


class ConnectorConfigError(UserInputError):
    """The connector's configuration is invalid (raised at engine start)."""

    code = "L101"


class InjectionRule(BaseModel):
    """Fail the host-tier load of one claim, one owner's claims, or unclaimed offloads.

    Exactly one selector is set. ``once`` fails the first matching load and is then spent;
    ``persistent`` fails every matching load (so a retried load cannot succeed by accident);
    ``corrupt`` raises no I/O error at all: before the first matching load reads them, it flips
    bytes of the stored slots in the host tier (wrong content, which the load's digest check
    catches), and is then spent -- the tier keeps the wrong bytes.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    claim_id: str | None = Field(default=None, min_length=1)
    owner_scope: str | None = Field(default=None, min_length=1)
    unclaimed: bool = False
    mode: Literal["once", "persistent", "corrupt"] = "persistent"

    @model_validator(mode="after")
    def _one_selector(self) -> InjectionRule:
        chosen = [n for n, v in (("claim_id", self.claim_id), ("owner_scope", self.owner_scope),
                                 ("unclaimed", self.unclaimed or None)) if v is not None]
        if len(chosen) != 1:
            raise ValueError(
                "an injection rule names exactly one of claim_id, owner_scope, unclaimed=true"
                f" (got {', '.join(chosen) or 'none'})"
            )
        return self

    @property
    def single_use(self) -> bool:
        """Whether the rule is spent by its first match."""
        return self.mode != "persistent"

    @property
    def corrupts(self) -> bool:
        """Whether the rule corrupts the stored bytes instead of failing the load's copy."""
        return self.mode == "corrupt"

    def matches(self, claim_id: str | None, owner_scope: str | None) -> bool:
        """Whether a load of (*claim_id*, *owner_scope*) is selected by this rule."""
        if self.unclaimed:
            return claim_id is None
        if self.claim_id is not None:
            return claim_id == self.claim_id
        return claim_id is not None and owner_scope == self.owner_scope


class ConnectorConfig(BaseModel):
    """What an operator configures: host-tier size, event sink, injection, claim budget."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host_tier_bytes: int = Field(
        gt=0, description="bytes of the bounded host KV tier, per worker rank")
    event_sink: str = Field(min_length=1, description="JSONL file receiving every v1 event")
    failure_injection: tuple[InjectionRule, ...] = ()
    per_owner_claim_blocks: int | None = Field(
        default=None, gt=0, description="most blocks one owner_scope may hold claimed"
    )
    per_owner_claims: int | None = Field(
        default=None, gt=0, description="most live claims one owner_scope may hold"
    )
    per_owner_claim_bytes: int | None = Field(
        default=None, gt=0,
        description="most host-tier bytes (all ranks) one owner_scope may hold claimed",
    )
    load_mode: Literal["async", "sync"] = Field(
        default="async",
        description="async: vLLM's async-load protocol (copy issued after the forward launch, "
        "completion reported by get_finished); "
        "sync: copies in start_load_kv before the forward that reads them",
    )
    offload_unclaimed: bool = Field(
        default=False,
        description="also offload requests without a claim (ordinary host caching, no promise)",
    )
    control_socket: str | None = Field(
        default=None, min_length=1,
        description="unix socket path for operator control while serving (mode 0600)",
    )
    # strict: a string such as "no" must not switch verification off by coercion
    verify_content: StrictBool = Field(
        default=True,
        description="digest every stored block and verify the bytes read back at load; "
        "false only to measure or demonstrate what verification buys (a corrupted tier then "
        "restores wrong KV unnoticed)",
    )
    replica: str | None = Field(
        default=None, min_length=1, pattern=r"\S",
        description="name of this serving replica, written in the stream's stream_started "
        "(the fleet view tells replicas' streams apart by it)",
    )


def _format_errors(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(config)"
        lines.append(f"  {loc}: {err['msg']}")
    return "\n".join(lines)


def parse_connector_config(extra: dict[str, Any] | None) -> ConnectorConfig:
    """Validate ``kv_connector_extra_config``; raise :class:`ConnectorConfigError` naming
    every problem."""
    if not isinstance(extra, dict):
        raise ConnectorConfigError(
            f"kv_connector_extra_config must be a mapping, got {type(extra).__name__}"
        )
    try:
        return ConnectorConfig.model_validate(extra)
    except ValidationError as exc:
        raise ConnectorConfigError(
            "invalid ResidentClaimConnector configuration (kv_connector_extra_config):\n"
            + _format_errors(exc)
        ) from None
