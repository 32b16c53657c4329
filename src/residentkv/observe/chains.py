"""Chain reconstruction and counted presence: which runtime blocks hold which claimed positions.

A runtime never publishes a claim, only chains: each ``BlockStored`` names its parent block hash
and the token ids of its blocks. A claimed prefix's block *i* is the block whose tokens are the
claim's *i*-th block of tokens, whose parent is the claim's block *i - 1* (no parent for block
0), and which was stored under the claim's cache salt and LoRA — the keys the runtime mixes
into the hash, so one hash is one salt and one adapter. The index learns those hashes as the
chains arrive — from any medium, under any session — and counts, for each learned hash, its
physical copies per (source, hash, KV-cache group) on the device medium (SPEC §9.2). Blocks no
claim needs are never kept: a store below an unlearned parent, or a removal of an unlearned
hash, costs one dictionary lookup.

What the wire cannot say is kept as an interval, never guessed (:class:`Copies`):

- a store of a claimed chain from its root whose every block already has a certain copy may be
  a second physical copy or vLLM's report of a prefix-cache hit (``kv_cache_report_mode:
  full``; the two are identical on the wire): it adds a *possible* copy only;
- a store that names no medium may or may not be on the device: a possible copy;
- a removal that names no medium, or no KV-cache group where the hash has copies in several,
  may or may not have taken a copy: a *possible* removal;
- the session is not part of the hash, so the copies of one hash are shared physically: a
  removal names no session, and any removal may have taken a session-bound claim's copy.
  Copies stored under another session never count as the claim's (SPEC §9.2).

A position is *present* when a learned hash of it certainly has a copy of the claim's in every
group it needs, *absent* when in some needed group no such copy can be left, and *ambiguous*
otherwise. The groups a position needs are the claim's ``kv_groups``, or else every group its
hash was seen stored in on that source (a store never makes a position absent; a group that
drops it — a sliding window — does).

Every operation returns the claims it touched (their indices, one per claimed position touched,
in order); nothing changes state lazily.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import Any

import msgspec

from residentkv.observe.claims import ObservedClaim, block_key
from residentkv.observe.lazy import first_token
from residentkv.observe.wire import BlockHash

#: (source, block hash, KV-cache group)
CopyKey = tuple[int, BlockHash, int | None]
#: (source, block hash)
HashKey = tuple[int, BlockHash]
#: the claimed positions a learned hash holds: (claim index, position) pairs
Owners = tuple[tuple[int, int], ...]
#: what a store no claim needs touched (shared: most stores are such)
_NONE: tuple[int, ...] = ()


class Presence(IntEnum):
    """A claimed position on one source's device medium."""

    ABSENT = 0
    AMBIGUOUS = 1
    PRESENT = 2


class Copies(msgspec.Struct, gc=False):
    """The copies of one block hash in one KV-cache group on one source's device medium, as
    counts of what the stream showed: stores that certainly (or possibly) added a copy, and
    removals that certainly (or possibly) took one; per session when a claim names one.

    Never tracked by the garbage collector (it holds no cycle): an index holds one per
    learned copy, and a full collection would walk every one."""

    certain: int = 0
    possible: int = 0
    removed: int = 0
    maybe_removed: int = 0
    #: session -> [certain, possible] stores under it (kept only when a claim names a session)
    sessions: dict[str | None, list[int]] | None = None

    def left(self) -> int:
        """Copies that may be left (0: none can be)."""
        return self.possible - self.removed

    def bounds(self, session: str | None) -> tuple[int, int]:
        """(fewest, most) copies left that are *session*'s (None: anyone's)."""
        if session is None:
            return self.certain - self.removed - self.maybe_removed, self.left()
        mine = (self.sessions or {}).get(session, (0, 0))
        others = self.possible - mine[1]
        most = min(mine[1] - max(0, self.removed - others), self.left())
        return mine[0] - self.removed - self.maybe_removed, most

    def presence(self, session: str | None) -> Presence:
        if session is None:                    # bounds(None), without its tuple: the hot case
            if self.possible - self.removed <= 0:
                return Presence.ABSENT
            fewer = self.certain - self.removed - self.maybe_removed
            return Presence.PRESENT if fewer > 0 else Presence.AMBIGUOUS
        fewest, most = self.bounds(session)
        if most <= 0:
            return Presence.ABSENT
        return Presence.PRESENT if fewest > 0 else Presence.AMBIGUOUS


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
        #: whether copies are counted per session (a claim names one)
        self._by_session = any(c.session_id is not None for c in self.claims)
        # tuples, not lists or sets, below: a tuple of numbers leaves the garbage collector's
        # view, and a full collection walks every object still in it
        #: learned hash -> its claimed positions
        self._known: dict[BlockHash, Owners] = {}
        #: claim index -> position -> learned hashes
        self.hashes: list[list[tuple[BlockHash, ...]]] = [[()] * len(c.blocks)
                                                          for c in self.claims]
        self._copies: dict[CopyKey, Copies] = {}
        #: (source, learned hash) -> the KV-cache groups it was stored in on the device medium
        self._groups: dict[HashKey, tuple[int | None, ...]] = {}
        #: block sizes the runtime published (a claim of another block size can never match)
        self.block_sizes: set[int] = set()

    @property
    def learned(self) -> int:
        """Hashes learned as claimed blocks."""
        return len(self._known)

    # -------------------------------------------------------------------------- events
    def stored(self, source: int, ev: Any) -> Sequence[int]:
        """Apply one ``BlockStored``; return the claims it touched."""
        self.block_sizes.add(ev.block_size)
        hashes = ev.block_hashes
        known = self._known
        parent = ev.parent_block_hash
        if not hashes or hashes[0] not in known:
            if parent is None:
                if first_token(ev.token_ids) not in self._first_tokens:
                    return _NONE               # a root no claim starts with
            elif parent not in known:
                return _NONE                   # below a block no claim needs
        walked = self._walk(ev, hashes, parent)
        medium = ev.medium
        if not walked or (medium is not None and medium != self.device_medium):
            return []
        return self._count(source, ev, walked, certain=medium is not None)

    def _walk(self, ev: Any, hashes: Sequence[BlockHash], parent: BlockHash | None
              ) -> list[tuple[BlockHash, Owners]]:
        """The store's blocks that are claimed positions, from its first, learning any it
        shows (the store's shape is checked first: a malformed one raises WireError)."""
        size = ev.block_size
        tokens = ev.tokens()
        keys = ev.extra()
        known = self._known
        above: Owners | None = None if parent is None else known.get(parent, ())
        walked: list[tuple[BlockHash, Owners]] = []
        for j, h in enumerate(hashes):
            owners = self._learn(h, known.get(h), above, tokens[j * size:(j + 1) * size], ev,
                                 keys, j)
            if not owners:
                break
            walked.append((h, owners))
            above = owners
        return walked

    def _count(self, source: int, ev: Any, walked: list[tuple[BlockHash, Owners]],
               *, certain: bool) -> list[int]:
        group = ev.group_idx
        copies = self._copies
        report = ev.parent_block_hash is None and all(
            (c := copies.get((source, h, group))) is not None and c.bounds(None)[0] > 0
            for h, _ in walked)
        adds = certain and not report
        session = ev.session_id
        touched: list[int] = []
        for h, owners in walked:
            count = copies.get((source, h, group))
            if count is None:
                count = copies[(source, h, group)] = Copies()
            count.possible += 1
            count.certain += adds
            if self._by_session:
                if count.sessions is None:
                    count.sessions = {}
                mine = count.sessions.setdefault(session, [0, 0])
                mine[0] += adds
                mine[1] += 1
            if certain:
                seen = self._groups.get((source, h), ())
                if group not in seen:
                    self._groups[(source, h)] = (*seen, group)
            touched += [c for c, _ in owners]
        return touched

    def _learn(self, h: BlockHash, owners: Owners | None, above: Owners | None,
               chunk: list[int], ev: Any, keys: Any, j: int) -> Owners | None:
        """The claimed positions *h* holds, adding any this store shows: a root matching a
        claim's first block, or a child of a claimed block matching the claim's next block —
        each stored under the claim's salt and LoRA (the session is not part of a hash: a
        copy's session is counted, not learned)."""
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
            if not ev.stored_under(keys, j, p == 0, claim.cache_salt, claim.lora_name):
                continue
            owners = self._known[h] = (*(owners or ()), (c, p))
            self.hashes[c][p] += (h,)
        return owners

    def removed(self, source: int, ev: Any) -> list[int]:
        """Apply one ``BlockRemoved``; return the claims it touched. A removal that
        names no medium, or no group where the hash has copies in several, possibly took a
        copy; one of a copy never seen stored is ignored."""
        known = self._known
        medium = ev.medium
        if medium is not None and medium != self.device_medium:
            return []
        touched: list[int] = []
        group = ev.group_idx
        for h in ev.block_hashes:
            owners = known.get(h)
            if owners is None:
                continue
            counts = self._candidates(source, h, group)
            exact = medium is not None and len(counts) == 1
            for count in counts:
                if exact:
                    count.removed += 1
                else:
                    count.maybe_removed += 1
            if counts:
                touched += [c for c, _ in owners]
        return touched

    def _candidates(self, source: int, h: BlockHash, group: int | None) -> list[Copies]:
        """The copy counts a removal of *h* in *group* (None: unnamed) may concern."""
        groups = {group} if group is not None else {None, *self._groups.get((source, h), ())}
        found = (self._copies.get((source, h, g)) for g in groups)
        return [c for c in found if c is not None and c.left() > 0]

    def cleared(self, source: int) -> list[int]:
        """Apply ``AllBlocksCleared``: every copy on *source* is gone."""
        touched: list[int] = []
        for (s, h, g), count in list(self._copies.items()):
            if s == source:
                del self._copies[(s, h, g)]
                if count.left() > 0:
                    touched += [c for c, _ in self._known[h]]
        self._groups = {k: v for k, v in self._groups.items() if k[0] != source}
        return touched

    def forget(self, source: int | None) -> None:
        """Drop what is known of *source*'s cache (every source for None) without reporting
        it: after an unseen window its state is unknown, not observed as lost."""
        if source is None:
            self._copies.clear()
            self._groups.clear()
            return
        self._copies = {k: v for k, v in self._copies.items() if k[0] != source}
        self._groups = {k: v for k, v in self._groups.items() if k[0] != source}

    # -------------------------------------------------------------------------- queries
    def positions(self, claim: int, source: int) -> list[Presence]:
        """Each position of *claim* on *source*'s device medium."""
        c = self.claims[claim]
        session = c.session_id
        copies = self._copies
        groups = self._groups
        absent = Presence.ABSENT
        out: list[Presence] = []
        for hashes in self.hashes[claim]:
            best = absent
            for h in hashes:
                needed = c.kv_groups if c.kv_groups is not None else groups.get((source, h), ())
                state = Presence.PRESENT if needed else absent
                for g in needed:               # the fewest copies of any group it needs
                    count = copies.get((source, h, g))
                    got = absent if count is None else count.presence(session)
                    if got < state:
                        state = got
                    if state is absent:
                        break
                if state > best:               # the most of any hash it was learned under
                    best = state
            out.append(best)
        return out
