"""The live table of an observation: one row per claim, redrawn while events arrive."""

from __future__ import annotations

import time
from collections.abc import Iterable

from rich.console import Console
from rich.live import Live
from rich.table import Table

from residentkv.observe.observer import ClaimStatus, ClaimView, Observer

_STYLE = {ClaimStatus.HELD: "green", ClaimStatus.AT_RISK: "yellow", ClaimStatus.LOST: "red",
          ClaimStatus.UNKNOWN: "magenta", ClaimStatus.PENDING: "dim"}


def claims_table(views: Iterable[ClaimView], *, batches: int, gaps: int,
                 now: float | None = None) -> Table:
    """The claims as a table: state, stored positions, predicate, losses, last change."""
    now = time.time() if now is None else now
    table = Table(title=f"residentkv observe — {batches} batches, {gaps} gaps",
                  title_justify="left")
    for col in ("claim", "mode", "state", "stored", "needs", "losses", "last change"):
        table.add_column(col)
    for v in views:
        c = v.claim
        p = c.claim.predicate
        needs = (f"leading ≥ {p.blocks}" if p.start is None
                 else f"{p.start}..{p.start + p.blocks - 1}")
        ago = "-" if v.last_change is None else f"{max(0.0, now - v.last_change):.0f}s ago"
        table.add_row(c.claim_id, c.claim.protection_mode.value,
                      f"[{_STYLE[v.status]}]{v.status.value}[/]",
                      f"{v.stored}/{len(c.blocks)}", needs, str(v.losses), ago)
    return table


class LiveView:
    """A rich ``Live`` display of the observer's claims (on standard error)."""

    def __init__(self, observer: Observer, console: Console | None = None) -> None:
        self.observer = observer
        self.live = Live(self._table(), console=console or Console(stderr=True),
                         auto_refresh=False, transient=False)

    def _table(self) -> Table:
        o = self.observer
        return claims_table(o.views, batches=o.batches, gaps=o.gaps)

    def start(self) -> None:
        self.live.start()

    def tick(self) -> None:
        """Redraw with the current state."""
        self.live.update(self._table(), refresh=True)

    def stop(self) -> None:
        self.tick()
        self.live.stop()
