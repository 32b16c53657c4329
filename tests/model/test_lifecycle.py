import itertools

import pytest

from residentkv.errors import IllegalTransition
from residentkv.model.lifecycle import (
    TERMINAL_STATES,
    TRANSITIONS,
    ClaimLifecycle,
    ClaimState,
    LossKind,
    classify_loss,
)

S = ClaimState
ALL_FROM: list[ClaimState | None] = [None, *ClaimState]


def test_every_state_has_a_transition_row() -> None:
    assert set(TRANSITIONS) == set(ALL_FROM)


@pytest.mark.parametrize(
    "path",
    [
        [S.SUBMITTED, S.ACCEPTED, S.MATERIALIZED, S.OFFLOADED, S.RESTORE_REQUIRED, S.RESTORED,
         S.REUSED, S.RESTORE_REQUIRED, S.FAILED_CLOSED],
        [S.ACCEPTED, S.MATERIALIZED, S.EXPIRED],
        [S.ACCEPTED, S.MATERIALIZED, S.OFFLOADED, S.MATERIALIZED, S.DEMOTED],
        [S.SUBMITTED, S.REJECTED],
        [S.ACCEPTED, S.MATERIALIZED, S.HARMED],
    ],
)
def test_legal_paths(path: list[ClaimState]) -> None:
    lc = ClaimLifecycle("c")
    for state in path:
        lc.advance(state)
    assert lc.history == path


ILLEGAL = [
    (a, b) for a, b in itertools.product(ALL_FROM, ClaimState) if b not in TRANSITIONS[a]
]


@pytest.mark.parametrize(("src", "dst"), ILLEGAL)
def test_every_illegal_transition_raises_naming_both_states(
    src: ClaimState | None, dst: ClaimState
) -> None:
    lc = ClaimLifecycle("c-9")
    lc.state = src
    with pytest.raises(IllegalTransition) as info:
        lc.advance(dst)
    message = str(info.value)
    assert dst.value in message and (src.value if src else "(none)") in message
    assert "c-9" in message
    assert lc.state is src  # a refused transition changes nothing


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        (None, S.MATERIALIZED),            # lifecycle before acceptance
        (S.ACCEPTED, S.REUSED),            # reuse without materialization
        (S.OFFLOADED, S.RESTORED),         # restore without restore-required
        (S.MATERIALIZED, S.RESTORED),
        (S.FAILED_CLOSED, S.RESTORED),     # fallback after a failure is not a restore
        (S.EXPIRED, S.HARMED),             # loss after expiry is not harm
        (S.RELEASED, S.MATERIALIZED),      # no resurrection after a terminal state
        (S.RESTORE_REQUIRED, S.REUSED),    # reuse must follow the restore
    ],
)
def test_named_illegal_classes(src: ClaimState | None, dst: ClaimState) -> None:
    assert (src, dst) in ILLEGAL


def test_terminal_states_have_no_exit() -> None:
    for t in TERMINAL_STATES:
        assert TRANSITIONS[t] == frozenset()


@pytest.mark.parametrize(
    ("state", "before", "after", "kind"),
    [
        (S.MATERIALIZED, True, False, LossKind.HARM),
        (S.OFFLOADED, True, False, LossKind.HARM),
        (S.REUSED, True, False, LossKind.HARM),
        (S.MATERIALIZED, True, True, LossKind.NO_LOSS),       # predicate still holds
        (S.MATERIALIZED, False, False, LossKind.NO_LOSS),     # was never true
        (S.DEMOTED, True, False, LossKind.POST_RELEASE_LOSS),
        (S.EXPIRED, True, False, LossKind.POST_RELEASE_LOSS),
        (S.RELEASED, True, False, LossKind.POST_RELEASE_LOSS),
        (None, True, False, LossKind.NOT_A_CLAIM),
        (S.REJECTED, True, False, LossKind.NOT_A_CLAIM),
        (S.SUBMITTED, True, False, LossKind.NOT_A_CLAIM),
        (S.ACCEPTED, True, False, LossKind.NOT_MATERIALIZED),
    ],
)
def test_harm_rule(state: ClaimState | None, before: bool, after: bool, kind: LossKind) -> None:
    assert classify_loss(state, before, after) is kind
