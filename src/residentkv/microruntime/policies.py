"""Runtime policies: which claims a runtime can accept and what it does on a capacity conflict.

A policy is the runtime's behaviour, not the claim's promise. It answers three questions:

* can an accepted claim of this protection mode be honoured here (``accepts``)? A policy that
  cannot honour a mode rejects the claim at acceptance — it never accepts and then loses it;
* are a request's writes admitted to the prefix cache for future reuse (``admits_writes``)?
* when an active request cannot fit without taking blocks of protected claims, what happens
  (``on_conflict``): refuse it, defer it, demote the blocking claims, or offload them?

The six policies of SPEC §10 are in :data:`POLICIES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Protocol

from residentkv.model.claim import ProtectionMode

M = ProtectionMode


class RuntimeView(Protocol):
    """What a policy may ask of the runtime while it resolves a conflict."""

    def can_offload(self, claim_id: str) -> bool:
        """Whether the claim can move to the host tier now."""
        ...


class Decision(StrEnum):
    """What the runtime does with an active request that conflicts with protected claims."""

    REFUSE = "refuse"
    DEFER = "defer"
    DEMOTE = "demote"
    OFFLOAD = "offload"


@dataclass(frozen=True)
class Conflict:
    """An active request that fits the pool only if protected claims give up blocks."""

    request_id: str
    need: int
    shortfall: int
    blocking_claim_ids: tuple[str, ...]


class Policy:
    """Base policy: a plain prefix cache with no claim mechanism (``native``)."""

    name: ClassVar[str] = "native"
    #: Modes whose claims this runtime can accept and honour.
    modes: ClassVar[frozenset[ProtectionMode]] = frozenset()
    #: Modes whose device blocks are pinned (excluded from LRU eviction) while the claim lives.
    pinning: ClassVar[frozenset[ProtectionMode]] = frozenset(
        {M.HARD_PROTECTED, M.DEMOTABLE, M.EXPIRING, M.OFFLOADABLE}
    )

    def accepts(self, mode: ProtectionMode) -> str | None:
        """``None`` if a claim of *mode* can be accepted, else the reason it is rejected."""
        if mode in self.modes:
            return None
        if not self.modes:
            return (
                f"policy {self.name}: no future-reuse claim mechanism; the prefix is cached "
                "best-effort and is an ordinary eviction candidate"
            )
        supported = ", ".join(sorted(m.value for m in self.modes))
        return (
            f"policy {self.name} cannot honour protection_mode {mode.value} "
            f"(honours: {supported})"
        )

    def denies_future_reuse(self) -> bool:
        """Whether the runtime emits ``future_reuse_denied`` for claims it cannot admit."""
        return False

    def admits_writes(self, claimed: bool) -> bool:
        """Whether a finished request's newly written blocks stay cached for future reuse."""
        return True

    def on_conflict(self, runtime: RuntimeView, conflict: Conflict) -> Decision:
        """Resolve a conflict. Without pinned claims there is none; refuse defensively."""
        return Decision.REFUSE


class Native(Policy):
    """Prefix caching with LRU eviction and no claims (vLLM-like default)."""

    name = "native"


class WriteNoAdmit(Policy):
    """Writes of unclaimed (active) requests are not admitted to the cache.

    This keeps an active request's KV from polluting the cache afterwards, but its prefill still
    needs working blocks, so resident KV is still evicted (L2). It is not resident protection, so
    the claim is denied as a protected future-reuse object and rejected.
    """

    name = "write_no_admit"

    def accepts(self, mode: ProtectionMode) -> str | None:
        return (
            "policy write_no_admit: only declines to cache writes; it cannot keep resident KV, "
            "so the claim is not admitted as a protected future-reuse object"
        )

    def denies_future_reuse(self) -> bool:
        return True

    def admits_writes(self, claimed: bool) -> bool:
        return claimed


class HardExclude(Policy):
    """Claimed blocks are excluded from eviction; conflicting active work is refused."""

    name = "hard_exclude"
    modes = frozenset({M.HARD_PROTECTED, M.SOFT_PRIORITY})

    def on_conflict(self, runtime: RuntimeView, conflict: Conflict) -> Decision:
        return Decision.REFUSE


class DemoteOnConflict(Policy):
    """Claims are kept until a conflict; then the blocking claims are demoted before any loss."""

    name = "demote_on_conflict"
    modes = frozenset({M.DEMOTABLE, M.SOFT_PRIORITY})

    def on_conflict(self, runtime: RuntimeView, conflict: Conflict) -> Decision:
        return Decision.DEMOTE


class Expiring(Policy):
    """Claims are kept until they expire; conflicting active work waits for the expiry."""

    name = "expiring"
    modes = frozenset({M.EXPIRING, M.SOFT_PRIORITY})

    def on_conflict(self, runtime: RuntimeView, conflict: Conflict) -> Decision:
        return Decision.DEFER


class OffloadResident(Policy):
    """On a conflict the blocking claims move to the host tier; reuse requires a restore."""

    name = "offload_resident"
    modes = frozenset({M.OFFLOADABLE, M.SOFT_PRIORITY})

    def on_conflict(self, runtime: RuntimeView, conflict: Conflict) -> Decision:
        if all(runtime.can_offload(c) for c in conflict.blocking_claim_ids):
            return Decision.OFFLOAD
        return Decision.REFUSE


#: name -> policy class, in the order of SPEC §10.
POLICIES: dict[str, type[Policy]] = {
    p.name: p
    for p in (Native, WriteNoAdmit, HardExclude, DemoteOnConflict, Expiring, OffloadResident)
}

#: The protection mode a sweep or litmus claim uses under each policy.
CLAIM_MODE: dict[str, ProtectionMode] = {
    "native": M.HARD_PROTECTED,
    "write_no_admit": M.HARD_PROTECTED,
    "hard_exclude": M.HARD_PROTECTED,
    "demote_on_conflict": M.DEMOTABLE,
    "expiring": M.EXPIRING,
    "offload_resident": M.OFFLOADABLE,
}


def make_policy(name: str) -> Policy:
    """A policy instance by name (KeyError if unknown)."""
    return POLICIES[name]()
