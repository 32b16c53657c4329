"""The end of an observation in the user's words: each claim's state, whatever it is.

A runtime observed through its KV events never restores a claim (it has no notion of one), so
a lost claim's line says so plainly rather than in restore-cycle terms.
"""

from __future__ import annotations

from collections.abc import Iterable

from residentkv.observe.observer import ClaimStatus, ClaimView, Fact

_NEVER_RESTORED = "never restored: this runtime offers no restore"


def claim_line(v: ClaimView) -> str:
    """One claim's state and history, e.g. ``c-soft (soft_priority): lost — held from batch
    3 until batch 7, lost at batch 7, never restored: this runtime offers no restore``."""
    c = v.claim
    head = f"{c.claim_id} ({c.claim.protection_mode.value}): {v.status.value}"
    held_from = v.first(Fact.MATERIALIZED)
    if held_from is None and not any(f is Fact.MATERIALIZED for f, _ in v.facts):
        story = ("never materialized: its needed blocks were never all seen stored on the "
                 "device medium")
    else:
        start = "held" if held_from is None else f"held from batch {held_from}"
        lost = v.last(Fact.LOST)
        if v.losses and not v.holds:
            at = "" if lost is None else f" until batch {lost}, lost at batch {lost}"
            story = f"{start}{at} (a needed block removed, no outcome published), " \
                    f"{_NEVER_RESTORED}"
        elif v.state_fact() is Fact.AMBIGUOUS:
            maybe = v.last(Fact.AMBIGUOUS)
            story = (f"{start}, then possibly lost"
                     + ("" if maybe is None else f" at batch {maybe}")
                     + ": a needed block was removed and the copies left may only be the "
                     "runtime's reports of cache hits (the wire does not say which)")
        elif v.losses:
            story = f"{start}, lost {v.losses} time(s) and stored again, held at the end"
        else:
            story = f"{start}, still held when the observation ended"
    unseen = v.first(Fact.UNSEEN)
    if v.status is ClaimStatus.UNKNOWN:
        where = "" if unseen is None else f" (after batch {unseen})"
        story += (f"; then part of the runtime's stream was not seen{where}: its state since "
                  "is unknown, never a pass")
    return f"{head} — {story}"


def summary(views: Iterable[ClaimView]) -> list[str]:
    """Every claim's line, in the claims file's order."""
    return [claim_line(v) for v in views]
