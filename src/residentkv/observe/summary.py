"""The end of an observation in the user's words: each claim's state, whatever it is.

A claim's line tells its history as the observer saw it, in order — each time it was held,
lost, possibly lost, and where the first gap stands — then how it stands at the end. A runtime
observed through its KV events never restores a claim (it has no notion of one), so a lost
claim's line says so plainly rather than in restore-cycle terms. After a gap the line never
says what the claim's state is: it says what made it unknown.
"""

from __future__ import annotations

from collections.abc import Iterable

from residentkv.observe.observer import ClaimStatus, ClaimView, Fact

_NEVER_RESTORED = "never restored: this runtime offers no restore"
#: changes told one by one before the rest is counted
_TOLD = 8


def _at(seq: int | None) -> str:
    return "" if seq is None else f" at batch {seq}"


def _history(v: ClaimView) -> list[str]:
    """The claim's history as phrases, in the order the observer saw it."""
    told: list[str] = []
    held = materialized = gapped = False
    for fact, seq in v.facts:
        if fact is Fact.MATERIALIZED:
            again = " again" if materialized else ""
            told.append(f"held{again}" + ("" if seq is None else f" from batch {seq}"))
            held = materialized = True
        elif fact is Fact.LOST:
            told.append(f"lost{_at(seq)} (a needed block removed, no outcome published)")
            held = False
        elif fact is Fact.AMBIGUOUS:
            told.append(f"possibly {'lost' if held else 'stored'}{_at(seq)} (the stream "
                        "could not tell whether a needed block kept a copy of the claim's: "
                        "presence_ambiguous, a gap)")
            gapped = True
        elif not gapped:
            gapped = True
            told.append(f"then part of the runtime's stream was not seen, starting at batch {seq}"
                        if fact is Fact.UNSEEN and seq is not None else
                        "then part of the runtime's stream was not seen" if fact is Fact.UNSEEN
                        else f"then the stream, though seen, could not tell{_at(seq)} whether "
                        "another claim's block kept a copy (presence_ambiguous, a gap)")
    if len(told) > _TOLD:
        told = [*told[:_TOLD], f"and {len(told) - _TOLD} more change(s)"]
    return told


def _ending(v: ClaimView) -> str:
    """How the claim stands when the observation ended."""
    status = v.status
    if status is ClaimStatus.UNKNOWN:
        return "its state since is unknown, never a pass"
    if status is ClaimStatus.PENDING:
        return ("never materialized: its needed blocks were never all seen stored on the "
                "device medium")
    if status is ClaimStatus.LOST:
        return _NEVER_RESTORED
    if status is ClaimStatus.AT_RISK:
        return "still held when the observation ended, with some footprint block removed"
    return "still held when the observation ended"


def claim_line(v: ClaimView) -> str:
    """One claim's state and history, e.g. ``c-soft (soft_priority): lost — held from batch
    3, lost at batch 7 (a needed block removed, no outcome published), never restored: this
    runtime offers no restore``."""
    c = v.claim
    head = f"{c.claim_id} ({c.claim.protection_mode.value}): {v.status.value}"
    return f"{head} — {', '.join([*_history(v), _ending(v)])}"


def summary(views: Iterable[ClaimView]) -> list[str]:
    """Every claim's line, in the claims file's order."""
    return [claim_line(v) for v in views]
