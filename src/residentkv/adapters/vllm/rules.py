"""The connector's decisions and records, without vLLM or torch.

What a claim or a claim reference is worth on intake, whether a claim can be accepted, which
host-tier entry a request hits, what one job did across worker ranks, and the records the
scheduler side keeps per claim and per request: everything here is plain Python over the
request's numbers, so the rules are tested in the core test run. The vLLM-facing roles
(:mod:`~residentkv.adapters.vllm.scheduler`, :mod:`~residentkv.adapters.vllm.worker`) read
vLLM's objects and call these.

The jobs the scheduler side plans and the facts worker ranks report live here too (plain,
picklable dataclasses); :mod:`~residentkv.adapters.vllm.messages` carries them in vLLM's
metadata types.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, TypeAlias

from residentkv.adapters.vllm.host_tier import combine_digests, format_digest
from residentkv.model.claim import PredicateSpec, ProtectionMode, Registration, ResidentClaim

__all__ = [
    "DECIDED_KEPT",
    "LOWERED_MODES",
    "Budgets",
    "ClaimHit",
    "ClaimRecord",
    "Decision",
    "Decisions",
    "Finish",
    "Hit",
    "JobKind",
    "LoadFailure",
    "LoadJob",
    "LostHit",
    "Outcome",
    "OutcomeKind",
    "Problem",
    "Rejection",
    "RequestState",
    "Resolved",
    "StoreJob",
    "UnclaimedHit",
    "UnclaimedKey",
    "WorkerFact",
    "acceptance_problem",
    "budget_problem",
    "decided_problem",
    "held_claim_problem",
    "loss_fields",
    "ref_problem",
    "resolve_ref",
    "restorable_blocks",
    "started_fields",
    "stop_ending",
]

#: decided claim ids whose decision is remembered word for word; older ones only as "decided"
DECIDED_KEPT = 100_000
_REF_KEYS = frozenset({"claim_id", "owner_scope"})

JobKind = Literal["store", "load"]
#: an unclaimed (promise-free) entry's key: the request's cache salt and its prefix hashes
UnclaimedKey: TypeAlias = tuple[str | None, tuple[Hashable, ...]]


# ============================================================ jobs and facts


class LoadFailure(StrEnum):
    """Why a load failed, where a fixed word applies (``kv_load_failed.reason``)."""

    #: the bytes read back differ from the digest recorded at store (or no digest was kept)
    DIGEST_MISMATCH = "digest_mismatch"


@dataclass
class StoreJob:
    """Copy ``block_ids`` (device) into ``slots`` (host), on every rank."""

    job_id: int
    request_id: str
    claim_id: str | None
    block_ids: list[int]
    slots: list[int]
    generation: int | None = None
    identity: dict[str, str] | None = None
    predicate: PredicateSpec | None = None  # of the claim, for the materialization check
    digest: bool = False  # digest the stored blocks (the engine verifies content)


@dataclass
class LoadJob:
    """Copy ``slots`` (host) into ``block_ids`` (device) for a request about to run.

    ``inject`` and ``corrupt`` are the operator's failure injection, decided by the scheduler
    side when it planned the load (the rules live only there), so every rank fails the same
    job: ``inject`` skips the copy, ``corrupt`` flips bytes of the source slots in the host tier
    first. ``verify`` checks the bytes read back against the digests recorded at store (set
    when the store recorded one), before the load is reported to vLLM.
    """

    job_id: int
    request_id: str
    claim_id: str | None
    owner_scope: str | None
    block_ids: list[int]
    slots: list[int]
    generation: int | None = None
    async_load: bool = False
    lost: bool = False  # the planned source vanished: the load must fail
    inject: bool = False
    corrupt: bool = False
    verify: bool = False


@dataclass
class WorkerFact:
    """What one worker rank really did with one job.

    Times are the rank's ``time.monotonic_ns()`` (CLOCK_MONOTONIC: one clock for every process
    of the host), so the scheduler can write the fact with the time it happened.
    """

    kind: JobKind
    job_id: int
    rank: int
    success: bool
    started_ns: int
    finished_ns: int
    nbytes: int = 0
    injected: bool = False
    invalid_block_ids: list[int] = field(default_factory=list)
    #: the claim predicate evaluated on the computed positions (store of a claim only):
    #: (surviving, leading, required, holds)
    materialized: tuple[int, int, int, bool] | None = None
    #: store: this rank's digest of the stored blocks (raw XXH3-128), when it made one
    digest: bytes | None = None
    #: load: the bytes read back were checked against the stored digests and matched
    verified: bool = False
    #: load: why it failed, where a fixed word applies
    reason: LoadFailure | None = None


@dataclass
class Resolved:
    """One job's facts from every rank, folded: success only if every rank succeeded."""

    success: bool
    injected: bool
    nbytes: int
    started_ns: int
    finished_ns: int
    ranks: list[int]
    failed_ranks: list[int]
    invalid: set[int]
    materialized: tuple[int, int, int, bool] | None
    digest: str | None = None  # store: over every rank's share, in rank order
    verified: bool = False  # load: every rank checked its bytes against the stored digests
    reason: LoadFailure | None = None  # load: why a rank failed, where a fixed word applies

    @classmethod
    def fold(cls, facts: Sequence[WorkerFact]) -> Resolved:
        mats = [f.materialized for f in facts if f.materialized is not None]
        mat = None
        if mats:
            # Every rank evaluates the same positions; the claim holds only if it holds on all.
            surviving, leading, required, _ = mats[0]
            mat = (surviving, leading, required, all(m[3] for m in mats))
        shares = [f.digest for f in facts if f.digest is not None]
        digest = None
        if shares and len(shares) == len(facts):
            # one rank: its digest; several: one digest over theirs, in rank order
            digest = format_digest(shares[0] if len(shares) == 1 else combine_digests(shares))
        return cls(
            success=all(f.success for f in facts), injected=any(f.injected for f in facts),
            nbytes=sum(f.nbytes for f in facts),
            started_ns=min(f.started_ns for f in facts),
            finished_ns=max(f.finished_ns for f in facts), ranks=[f.rank for f in facts],
            failed_ranks=[f.rank for f in facts if not f.success],
            invalid={b for f in facts for b in f.invalid_block_ids}, materialized=mat,
            digest=digest, verified=all(f.verified for f in facts),
            reason=next((f.reason for f in facts if f.reason is not None), None))


# ============================================================ records


#: ``engine_stopped``: the engine stopped under the request (its claim ends with the stop)
OutcomeKind = Literal["accepted", "offloaded", "restored", "refused", "fallback_recompute",
                      "engine_stopped"]


@dataclass(frozen=True)
class Outcome:
    """A request's current claim outcome: what happened, why (where it failed), and the
    ``seq`` of the event that says so."""

    kind: OutcomeKind
    reason: str | None = None
    seq: int | None = None

    def params(self, claim_id: str) -> dict[str, object]:
        """The outcome as the caller reads it (``kv_transfer_params``)."""
        return {"claim_id": claim_id, "outcome": self.kind, "reason": self.reason,
                "seq": self.seq}


@dataclass(frozen=True)
class Rejection:
    """A claim or reference the engine did not take; ``claim_id`` is what the request sent
    (any JSON value, or None)."""

    claim_id: object
    reason: str
    seq: int

    def params(self) -> dict[str, object]:
        return {"claim_id": self.claim_id, "outcome": "rejected", "reason": self.reason,
                "seq": self.seq}


@dataclass(frozen=True)
class ClaimHit:
    """The request restores an accepted claim's prefix."""

    claim_id: str
    blocks: int


@dataclass(frozen=True)
class UnclaimedHit:
    """The request restores an ordinary (promise-free) offloaded prefix."""

    key: UnclaimedKey
    blocks: int


@dataclass(frozen=True)
class LostHit:
    """vLLM counted a hit whose source vanished before allocation: the load must fail."""


Hit: TypeAlias = ClaimHit | UnclaimedHit | LostHit


@dataclass(frozen=True)
class Finish:
    """vLLM's finish of a request: its status name, whether it counts as served, the reason."""

    status: str
    served: bool
    reason: str | None


@dataclass
class ClaimRecord:
    """An accepted claim as the scheduler side holds it."""

    claim: ResidentClaim
    salt: str | None
    hashes: tuple[Hashable, ...]
    slots: list[int]
    identity: dict[str, str]
    resident_request: str
    generation: int = 0
    offloaded: bool = False
    store_planned: bool = False
    closed: bool = False  # failed_closed: no further restores are attempted
    digest: str | None = None  # content digest its store recorded; loads verify against it
    #: the last materialization the worker ranks reported: (surviving, leading, required, holds)
    materialized: tuple[int, int, int, bool] | None = None
    #: a restore cycle is open (restore required, neither restored nor failed yet)
    cycle_open: bool = False
    #: monotonic ns at which the claim expires (``expires_after_s`` after its acceptance)
    deadline_ns: int | None = None
    #: an ending asked for while a request still carried the claim: (event, reason), written
    #: when the last such request finishes (an ending inside a restore cycle would be illegal)
    ending: tuple[str, str] | None = None

    @property
    def held_materialized(self) -> bool:
        """Whether a materialization that holds was reported (what makes a loss harm)."""
        return self.materialized is not None and self.materialized[3]

    def serves(self, salt: str | None, hashes: Sequence[Hashable], prompt_tokens: int,
               block_size: int) -> bool:
        """Whether a request with this cache salt, prefix hashes and prompt can restore the
        claim: it is offloaded and open, and the request has the same salt and prefix, with
        the whole footprint before its last prompt token."""
        n = self.claim.footprint_blocks
        return (self.offloaded and not self.closed and self.ending is None and salt == self.salt
                and tuple(hashes[:n]) == self.hashes
                and n <= restorable_blocks(prompt_tokens, block_size))


@dataclass
class RequestState:
    """What the scheduler side knows of one running request."""

    request_id: str
    claim_id: str | None = None
    rejected: Rejection | None = None
    hit: Hit | None = None
    stored_unclaimed: bool = False
    open_jobs: set[int] = field(default_factory=set)
    last_outcome: Outcome = Outcome("accepted")
    fallback: bool = False
    looked_up: bool = False
    restored_gen: int | None = None
    restore_required_ns: int | None = None
    reuse_dispatched: bool = False
    reused: bool = False
    pending_finish: Finish | None = None

    def params(self) -> dict[str, object] | None:
        """The request's claim outcome as the caller reads it, if it carried a claim."""
        if self.rejected is not None:
            return self.rejected.params()
        if self.claim_id is None:
            return None
        return self.last_outcome.params(self.claim_id)


# ============================================================ decisions (the sink is the journal)


@dataclass(frozen=True)
class Decision:
    """How a claim id was decided in this sink, and how it ended: what a later request naming
    the id is told (a claim id is decided once, across incarnations)."""

    accepted: bool
    #: the rejection's reason, or how the accepted claim ended ("harmed (engine_restarted)")
    detail: str | None = None

    def describe(self) -> str:
        if not self.accepted:
            return f"rejected ({self.detail})"
        return self.detail or "accepted"


#: what a claim id whose decision is no longer remembered word for word is told
FORGOTTEN = Decision(accepted=True, detail="its decision is no longer kept")


class Decisions:
    """Every claim id this sink decided (accepted, or rejected naming it), across incarnations.

    The newest :data:`DECIDED_KEPT` keep their decision; an id that leaves that memory sets the
    bits of a Bloom filter (16 Mi bits, 7 hashes: about 1 in 2,000 false positives at a million
    ids), so an id whose decision was forgotten is still known as decided -- fail closed: a
    false positive turns a new claim id down ("decided before"), it never decides one twice.
    """

    _BITS = 1 << 24
    _HASHES = 7

    def __init__(self, kept: int = DECIDED_KEPT) -> None:
        self.kept = kept
        self._recent: OrderedDict[str, Decision] = OrderedDict()
        self._bloom = bytearray(self._BITS // 8)

    def _positions(self, claim_id: str) -> list[int]:
        # the process's own string hash (the filter lives in memory, one process, one seed),
        # two of them combined (Kirsch-Mitzenmacher)
        h1, h2 = hash(claim_id), hash((claim_id, 1)) | 1
        return [(h1 + i * h2) % self._BITS for i in range(self._HASHES)]

    def record(self, claim_id: str, decision: Decision) -> None:
        """Remember *claim_id*'s decision (or its ending: a later record replaces it)."""
        recent = self._recent
        if claim_id in recent:
            recent.move_to_end(claim_id)
        recent[claim_id] = decision
        if len(recent) > self.kept:
            # the oldest leaves the exact memory; the filter keeps knowing it was decided
            forgotten, _ = recent.popitem(last=False)
            for pos in self._positions(forgotten):
                self._bloom[pos >> 3] |= 1 << (pos & 7)

    def get(self, claim_id: str) -> Decision | None:
        """The decision of *claim_id*; :data:`FORGOTTEN` if only the filter knows it; None if
        this sink never decided it."""
        found = self._recent.get(claim_id)
        if found is not None:
            return found
        if all(self._bloom[pos >> 3] & (1 << (pos & 7)) for pos in self._positions(claim_id)):
            return FORGOTTEN
        return None

    def __len__(self) -> int:
        return len(self._recent)


@dataclass(frozen=True)
class Budgets:
    """Per-owner budgets over the live claims of one ``owner_scope`` (None: unbounded)."""

    claims: int | None = None
    blocks: int | None = None
    bytes: int | None = None


def loss_fields(materialized: tuple[int, int, int, bool] | None,
                footprint: int) -> dict[str, Any]:
    """``claim_harmed``'s predicate results: the last known one before, and after a stop the
    honest one -- nothing of the claim survives the host tier's death."""
    surviving, leading, required, holds = materialized or (0, 0, footprint, False)
    return {"before": {"surviving": surviving, "leading": leading, "required": required,
                       "holds": holds},
            "after": {"surviving": 0, "leading": 0, "required": required, "holds": False}}


def stop_ending(*, held_materialized: bool, cycle_open: bool, lost: bool) -> str:
    """The event that ends a live claim when its stream closes: ``claim_harmed`` when its KV
    is lost (the engine stops or died) and a materialization held -- or when a restore cycle
    is open, where nothing else may end it -- else ``claim_released`` (a claim never
    materialized holds nothing to lose; a sink swap lets the claim go)."""
    if cycle_open or (lost and held_materialized):
        return "claim_harmed"
    return "claim_released"


# ============================================================ rules


@dataclass(frozen=True)
class Problem:
    """Why a claim or reference is rejected: a short kind (the metric label), the reason
    written in the trace, and whether the rejection may name the claim."""

    kind: str
    reason: str
    name_claim: bool = True


def restorable_blocks(prompt_tokens: int, block_size: int) -> int:
    """Full prompt blocks before the last prompt token: vLLM always computes that token, so
    only these blocks can be restored."""
    return max(prompt_tokens - 1, 0) // block_size


def started_fields(named: object) -> dict[str, str | None]:
    """``request_started``'s owner and, for a request carrying a claim or a reference,
    ``claim_ref``: recorded before any decision, so the stream says which claim a request asked
    for even when its rejection does not name the claim."""
    if named is None:
        return {"owner_scope": None}
    owner = named.get("owner_scope") if isinstance(named, dict) else None
    cid = named.get("claim_id") if isinstance(named, dict) else None
    return {"owner_scope": owner if isinstance(owner, str) else None,
            "claim_ref": cid if isinstance(cid, str) and cid else None}


def ref_problem(ref: object) -> str | None:
    """What is wrong with a ``resident_claim_ref`` value, if anything."""
    if not isinstance(ref, dict):
        return f"must be an object {{claim_id, owner_scope}}, got {type(ref).__name__}"
    cid, owner = ref.get("claim_id"), ref.get("owner_scope")
    if not isinstance(cid, str) or not cid:
        return "claim_id must be a non-empty string"
    if not isinstance(owner, str) or not owner:
        # The owner is what keeps one tenant's reference off another tenant's claim.
        return "owner_scope must be a non-empty string"
    extra = sorted(str(k) for k in ref.keys() - _REF_KEYS)
    if extra:
        return f"unknown field(s) {', '.join(extra)} (a reference is claim_id and owner_scope)"
    return None


def _ending_problem(known: ClaimRecord) -> Problem | None:
    """A held claim that no request may use any more: failed closed, or ending."""
    cid = known.claim.claim_id
    if known.closed:
        return Problem("failed_closed", f"claim {cid!r} has failed closed", name_claim=False)
    if known.ending is not None:
        word = "released" if known.ending[0] == "claim_released" else "expired"
        return Problem("ending", f"claim {cid!r} is ending: {word} ({known.ending[1]})",
                       name_claim=False)
    return None


def held_claim_problem(known: ClaimRecord, claim: ResidentClaim) -> Problem | None:
    """A claim submitted again under an accepted claim's id: a reuse of it (None), or why
    not."""
    if known.claim != claim:
        # Naming the accepted claim here would smear another submission's rejection onto it;
        # the reason carries the id instead.
        return Problem("conflict", f"claim_id {claim.claim_id!r} is already bound to a "
                       "different claim", name_claim=False)
    return _ending_problem(known)


def decided_problem(claim_id: str, decision: Decision) -> Problem:
    """A registration (or full-claim reuse) of an id this sink decided before and no longer
    holds: answered with that decision or the loss, never a second acceptance. Unnamed: the
    claim's history already holds its one decision."""
    return Problem("decided", f"claim {claim_id!r} was decided before: {decision.describe()}; "
                   "a claim id is decided once -- register the claim under a new claim id",
                   name_claim=False)


def resolve_ref(ref: object, claims: Mapping[str, ClaimRecord],
                decisions: Decisions) -> str | Problem:
    """A reuse by reference: the claim id it reuses, or why not. It can only reuse a claim
    this engine holds for that owner; it never registers one, and its rejection never names a
    claim: a request that may not own the claim must not decide it (SPEC §9.1), and the
    request's ``claim_ref`` already says which claim it asked for."""
    problem = ref_problem(ref)
    if problem is not None or not isinstance(ref, dict):
        return Problem("invalid", f"invalid claim reference: {problem}", name_claim=False)
    cid, owner = str(ref["claim_id"]), ref["owner_scope"]
    known = claims.get(cid)
    if known is None:
        past = decisions.get(cid)
        return Problem("not_held", f"not held: claim {cid!r} is not held by this engine"
                       + (f" ({past.describe()})" if past is not None else ""),
                       name_claim=False)
    if known.claim.owner_scope != owner:
        # Another owner's request; the holder's owner_scope is not disclosed.
        return Problem("conflict", f"claim_id {cid!r} is bound to another owner_scope",
                       name_claim=False)
    return _ending_problem(known) or cid


def budget_problem(claim: ResidentClaim, claims: Mapping[str, ClaimRecord], budgets: Budgets,
                   block_bytes: int) -> Problem | None:
    """Whether accepting *claim* would take its owner over one of its budgets (over the owner's
    open claims, slots held included); the reason names the budget."""
    mine = [c for c in claims.values()
            if c.claim.owner_scope == claim.owner_scope and not c.closed]
    blocks = sum(c.claim.footprint_blocks for c in mine)
    asks = claim.footprint_blocks
    owner = claim.owner_scope
    if budgets.claims is not None and len(mine) + 1 > budgets.claims:
        return Problem("budget", f"budget per_owner_claims exceeded: owner {owner!r} holds "
                       f"{len(mine)} claims, budget {budgets.claims}")
    if budgets.blocks is not None and blocks + asks > budgets.blocks:
        return Problem("budget", f"budget per_owner_claim_blocks exceeded: owner {owner!r} "
                       f"holds {blocks} blocks, asks {asks}, budget {budgets.blocks}")
    if budgets.bytes is not None and (blocks + asks) * block_bytes > budgets.bytes:
        return Problem("budget", f"budget per_owner_claim_bytes exceeded: owner {owner!r} "
                       f"holds {blocks * block_bytes} bytes, asks {asks * block_bytes}, budget "
                       f"{budgets.bytes}")
    return None


#: the modes this connector lowers: the host tier keeps the claim until it ends (offloadable),
#: and until its duration has passed (expiring: ``claim_expired`` before the KV leaves)
LOWERED_MODES = frozenset({ProtectionMode.OFFLOADABLE, ProtectionMode.EXPIRING})


def acceptance_problem(claim: ResidentClaim, *, prompt_tokens: int, hashed_blocks: int,
                       block_size: int, model_names: set[str], budgets: Budgets,
                       block_bytes: int, claims: Mapping[str, ClaimRecord]) -> Problem | None:
    """Why this engine cannot accept a new claim for a request of *prompt_tokens* tokens whose
    first *hashed_blocks* prefix block hashes are known, if it cannot. *budgets* are the
    per-owner budgets over the open *claims*; a block is *block_bytes* in the host tier."""
    if claim.registration is not Registration.PRE_REGISTERED:
        return Problem("registration",
                       "registration post_hoc: a claim named after the fact cannot be accepted")
    if claim.protection_mode not in LOWERED_MODES:
        return Problem("protection_mode", f"protection_mode {claim.protection_mode.value} is "
                       "not offered by this connector (it lowers offloadable and expiring)")
    ci = claim.cache_identity
    if ci.block_size != block_size:
        return Problem("block_size", f"cache_identity.block_size {ci.block_size} != engine "
                       f"block size {block_size}")
    if ci.model_id not in model_names:
        return Problem("model", f"cache_identity.model_id {ci.model_id!r} is not served by this "
                       "engine")
    full = restorable_blocks(prompt_tokens, block_size)
    if claim.footprint_blocks > full:
        return Problem("footprint", f"footprint_blocks {claim.footprint_blocks} exceeds the "
                       f"{full} full prompt blocks of the request")
    if hashed_blocks < claim.footprint_blocks:
        return Problem("footprint", "the request's prefix block hashes are not available")
    return budget_problem(claim, claims, budgets, block_bytes)
