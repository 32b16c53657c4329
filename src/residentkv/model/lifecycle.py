"""The per-claim lifecycle state machine and the harm rule (SPEC §2).

Legal transitions are data (:data:`TRANSITIONS`); anything else raises
:class:`~residentkv.errors.IllegalTransition` naming both states.
"""

from __future__ import annotations

from enum import StrEnum

from residentkv.errors import IllegalTransition


class ClaimState(StrEnum):
    SUBMITTED = "submitted"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    MATERIALIZED = "materialized"
    OFFLOADED = "offloaded"
    RESTORE_REQUIRED = "restore_required"
    RESTORED = "restored"
    REUSED = "reused"
    RELEASED = "released"
    DEMOTED = "demoted"
    EXPIRED = "expired"
    HARMED = "harmed"
    FAILED_CLOSED = "failed_closed"


S = ClaimState

#: States after which the claim makes no further promise.
TERMINAL_STATES: frozenset[ClaimState] = frozenset(
    {S.REJECTED, S.RELEASED, S.DEMOTED, S.EXPIRED, S.HARMED, S.FAILED_CLOSED}
)

#: States in which the runtime holds responsibility for the claimed KV.
RESPONSIBLE_STATES: frozenset[ClaimState] = frozenset(
    {S.MATERIALIZED, S.OFFLOADED, S.RESTORE_REQUIRED, S.RESTORED, S.REUSED}
)

_ENDINGS = frozenset({S.RELEASED, S.DEMOTED, S.EXPIRED})

#: Legal transitions; ``None`` is "no event seen yet". A claim held in a slower tier stays
#: there after a reuse, so a reused claim may require another restore (a new generation).
TRANSITIONS: dict[ClaimState | None, frozenset[ClaimState]] = {
    None: frozenset({S.SUBMITTED, S.ACCEPTED, S.REJECTED}),
    S.SUBMITTED: frozenset({S.ACCEPTED, S.REJECTED}),
    S.ACCEPTED: frozenset({S.MATERIALIZED}) | _ENDINGS,
    S.MATERIALIZED: frozenset({S.MATERIALIZED, S.OFFLOADED, S.REUSED, S.HARMED}) | _ENDINGS,
    S.OFFLOADED: frozenset({S.MATERIALIZED, S.RESTORE_REQUIRED, S.HARMED}) | _ENDINGS,
    S.RESTORE_REQUIRED: frozenset({S.RESTORED, S.FAILED_CLOSED, S.HARMED}),
    S.RESTORED: frozenset({S.REUSED, S.OFFLOADED, S.HARMED}) | _ENDINGS,
    S.REUSED: frozenset(
        {S.MATERIALIZED, S.OFFLOADED, S.RESTORE_REQUIRED, S.REUSED, S.HARMED}
    ) | _ENDINGS,
    **{t: frozenset() for t in TERMINAL_STATES},
}


class LossKind(StrEnum):
    """How a loss of claimed KV must be read."""

    HARM = "harm"
    POST_RELEASE_LOSS = "post_release_loss"
    NOT_A_CLAIM = "not_a_claim"
    NOT_MATERIALIZED = "not_materialized"
    NO_LOSS = "no_loss"


def classify_loss(state: ClaimState | None, before_holds: bool, after_holds: bool) -> LossKind:
    """The harm rule.

    Only an accepted, materialized, unreleased claim whose predicate goes from true to false is
    harmed. Loss after demotion, expiry or release is post-release loss; loss of KV nobody
    claimed (or a rejected claim) is ordinary eviction.
    """
    if state in _ENDINGS:
        return LossKind.POST_RELEASE_LOSS
    if state is None or state in {S.SUBMITTED, S.REJECTED}:
        return LossKind.NOT_A_CLAIM
    if state is S.ACCEPTED:
        return LossKind.NOT_MATERIALIZED
    if state in RESPONSIBLE_STATES and before_holds and not after_holds:
        return LossKind.HARM
    return LossKind.NO_LOSS


class ClaimLifecycle:
    """Tracks one claim's state and refuses illegal transitions."""

    __slots__ = ("claim_id", "history", "keep_history", "state")

    def __init__(self, claim_id: str, *, keep_history: bool = True) -> None:
        self.claim_id = claim_id
        self.state: ClaimState | None = None
        self.keep_history = keep_history
        self.history: list[ClaimState] = []

    def advance(self, to_state: ClaimState) -> None:
        """Move to *to_state* or raise :class:`IllegalTransition`."""
        if to_state not in TRANSITIONS[self.state]:
            raise IllegalTransition(self.claim_id, self.state, to_state.value)
        self.state = to_state
        if self.keep_history:
            self.history.append(to_state)
