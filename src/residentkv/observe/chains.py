"""Chain reconstruction and counted presence: which runtime blocks hold which claimed positions.

A runtime never publishes a claim, only chains: each ``BlockStored`` names its parent block hash
and the token ids of its blocks. A claimed prefix's block *i* is the block whose tokens are the
claim's *i*-th block of tokens, whose parent is the claim's block *i - 1* (no parent for block
0), and which was stored under the claim's cache salt and LoRA (and session, when the claim
names one). The index learns those hashes as the chains arrive — from any medium — and counts,
for each learned hash, its physical copies per (source, hash, KV-cache group) on the device
medium (SPEC §9.2). Blocks no claim needs are never kept: a store below an unlearned parent, or
a removal of an unlearned hash, costs one dictionary lookup.

A copy count is an interval ``[certain, possible]``: a store of a claimed chain from its root
whose every claimed block is already present may be a second physical copy or vLLM's report of
a prefix-cache hit (``kv_cache_report_mode: full``; the two are identical on the wire), so it
raises only ``possible``. A position is *present* when a learned hash of it has a certain copy
in every group the claim needs, *absent* when some needed group has no possible copy, and
*ambiguous* otherwise.

Every operation returns the claimed positions it touched (a list); nothing changes state lazily.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from residentkv.observe.claims import ObservedClaim, block_key
from residentkv.observe.lazy import first_token
from residentkv.observe.wire import BlockHash, WireError

#: (source, block hash, KV-cache group)
CopyKey = tuple[int, BlockHash, int | None]


class Presence(IntEnum):
    """A claimed position on one source's device medium."""

    ABSENT = 0
    AMBIGUOUS = 1
    PRESENT = 2


@dataclass(frozen=True, slots=True)
class Touch:
    """A learned block of claim *claim* (an index) at *position* changed on *source*."""

    claim: int
    position: int
    block_hash: BlockHash
    source: int


class ChainIndex:
    """Learned claimed blocks and their copies on the device medium, per source."""

    def __init__(self, claims: Sequence[ObservedClaim], device_medium: str | None) -> None:
        self.claims = list(claims)
        self.device_medium = device_medium
        self._roots: dict[bytes, list[int]] = {}
        for i, c in enumerate(self.claims):
            self._roots.setdefault(c.blocks[0], []).append(i)
        #: the first token of every claim's first block: most roots are rejected on it
        self._first_tokens = {c.first_token for c in self.claims}
        #: learned hash -> [(claim index, position)]
        self._known: dict[BlockHash, list[tuple[int, int]]] = {}
        #: claim index -> position -> learned hashes
        self.hashes: list[list[list[BlockHash]]] = [[[] for _ in c.blocks] for c in self.claims]
        self._copies: dict[CopyKey, list[int]] = {}
        #: source -> groups that stored a learned block on the device medium
        self._groups: dict[int, set[int | None]] = {}
        #: block sizes the runtime published (a claim of another block size can never match)
        self.block_sizes: set[int] = set()

    @property
    def learned(self) -> int:
        """Hashes learned as claimed blocks."""
        return len(self._known)

    # -------------------------------------------------------------------------- events
    def stored(self, source: int, ev: Any) -> list[Touch]:
        """Apply one ``BlockStored``; return the claimed positions it touched."""
        size = ev.block_size
        self.block_sizes.add(size)
        hashes = ev.block_hashes
        if not hashes:
            return []
        known = self._known
        parent = ev.parent_block_hash
        if hashes[0] not in known:
            if parent is None:
                if first_token(ev.token_ids) not in self._first_tokens:
                    return []                  # a root no claim starts with
            elif parent not in known:
                return []                      # below a block no claim needs
        if size <= 0:
            raise WireError(f"BlockStored with block_size {size}")
        tokens = ev.tokens()
        mappable = len(tokens) == len(hashes) * size
        above: list[tuple[int, int]] | None = None if parent is None else known.get(parent, [])
        walked: list[tuple[BlockHash, list[tuple[int, int]]]] = []
        for j, h in enumerate(hashes):
            owners = known.get(h)
            if mappable:
                owners = self._learn(h, owners, above, tokens[j * size:(j + 1) * size], ev, j)
            if not owners:
                break
            walked.append((h, owners))
            above = owners
        if not walked or ev.medium != self.device_medium:
            return []
        group = ev.group_idx
        self._groups.setdefault(source, set()).add(group)
        copies = self._copies
        maybe_report = parent is None and all(
            copies.get((source, h, group), (0, 0))[0] > 0 for h, _ in walked)
        touched: list[Touch] = []
        for h, owners in walked:
            count = copies.setdefault((source, h, group), [0, 0])
            count[1] += 1
            if not maybe_report:
                count[0] += 1
            touched += [Touch(c, p, h, source) for c, p in owners]
        return touched

    def _learn(self, h: BlockHash, owners: list[tuple[int, int]] | None,
               above: list[tuple[int, int]] | None, chunk: list[int], ev: Any,
               j: int) -> list[tuple[int, int]] | None:
        """The claimed positions *h* holds, adding any this store shows: a root matching a
        claim's first block, or a child of a claimed block matching the claim's next block —
        each stored under the claim's salt, LoRA and session."""
        if above is None:
            candidates = [(c, 0) for c in self._roots.get(block_key(chunk), ())]
        else:
            if not above:
                return owners
            key = block_key(chunk)
            candidates = [(c, p + 1) for c, p in above
                          if p + 1 < len(self.claims[c].blocks)
                          and self.claims[c].blocks[p + 1] == key]
        for c, p in candidates:
            if owners is not None and (c, p) in owners:
                continue
            claim = self.claims[c]
            if claim.session_id is not None and ev.session_id != claim.session_id:
                continue
            if not ev.stored_under(j, p == 0, claim.cache_salt, claim.lora_name):
                continue
            if owners is None:
                owners = self._known[h] = []
            owners.append((c, p))
            self.hashes[c][p].append(h)
        return owners

    def removed(self, source: int, ev: Any) -> list[Touch]:
        """Apply one ``BlockRemoved``; return the claimed positions it touched."""
        known = self._known
        if ev.medium != self.device_medium:
            return []
        touched: list[Touch] = []
        group = ev.group_idx
        for h in ev.block_hashes:
            owners = known.get(h)
            if owners is None:
                continue
            count = self._copies.get((source, h, group))
            if count is None or count[1] == 0:
                continue                       # a removal of a copy never seen stored
            count[1] -= 1
            count[0] = min(max(count[0] - 1, 0), count[1])
            touched += [Touch(c, p, h, source) for c, p in owners]
        return touched

    def cleared(self, source: int) -> list[Touch]:
        """Apply ``AllBlocksCleared``: every copy on *source* is gone."""
        touched: list[Touch] = []
        for (s, h, _), count in self._copies.items():
            if s == source and count[1]:
                count[0] = count[1] = 0
                touched += [Touch(c, p, h, source) for c, p in self._known[h]]
        return touched

    def forget(self, source: int | None) -> None:
        """Drop what is known of *source*'s cache (every source for None) without reporting
        it: after an unseen window its state is unknown, not observed as lost."""
        self._copies = {k: v for k, v in self._copies.items()
                        if source is not None and k[0] != source}
        if source is None:
            self._groups.clear()
        else:
            self._groups.pop(source, None)

    # -------------------------------------------------------------------------- queries
    def sources(self) -> set[int]:
        """Sources with a copy of a learned block."""
        return set(self._groups)

    def positions(self, claim: int, source: int) -> list[Presence]:
        """Each position of *claim* on *source*'s device medium."""
        c = self.claims[claim]
        needed = c.kv_groups if c.kv_groups is not None else self._groups.get(source, {None})
        copies = self._copies
        out: list[Presence] = []
        for hashes in self.hashes[claim]:
            best = Presence.ABSENT
            for h in hashes:
                state = Presence.PRESENT
                for g in needed:
                    certain, possible = copies.get((source, h, g), (0, 0))
                    if possible == 0:
                        state = Presence.ABSENT
                        break
                    if certain == 0:
                        state = Presence.AMBIGUOUS
                best = max(best, state)
            out.append(best)
        return out
