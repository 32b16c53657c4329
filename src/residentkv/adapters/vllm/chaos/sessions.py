"""What the clients know of their own claims, and the request each planned op becomes.

A session holds one claim at a time. Its client learns only from the responses it receives:
a registration or reuse answered ``accepted``, ``offloaded`` or ``restored`` means the claim is
held; any other answer to its own claim (refused, rejected, no outcome at all, a connection
lost under the request) means it is not, and the session's next reuse becomes a registration
of a fresh claim id -- an id, once decided, is never registered again. A request that never
reached the server (connection refused) teaches nothing. A foreign request quotes another
session's current claim; before that session registered one it only references the id.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from residentkv.adapters.vllm.chaos.client import Request
from residentkv.adapters.vllm.chaos.generator import claim_body, claim_id, prompt_tokens
from residentkv.adapters.vllm.chaos.model import REUSE_KINDS, Exchange, Op, OpKind, Transport
from residentkv.adapters.vllm.config import CLAIM_PARAM, CLAIM_REF_PARAM

__all__ = ["HELD", "Sessions", "client_outcome"]

#: outcomes that tell the client its claim is held
HELD = frozenset({"accepted", "offloaded", "restored"})


def client_outcome(ex: Exchange) -> str | None:
    """The claim outcome the client was told: the body's (or refusal's) ``outcome``, else the
    ``x-residentkv-claim-outcome`` header."""
    if ex.outcome is not None and isinstance(ex.outcome.get("outcome"), str):
        return str(ex.outcome["outcome"])
    return ex.outcome_header


@dataclass
class _Session:
    version: int = 0
    held: bool = False


class Sessions:
    """Every session's current claim; shared by the client threads and the nemesis."""

    def __init__(self, seed: int, names: list[str], *, model: str, block_size: int,
                 prompt_len: int) -> None:
        self.seed = seed
        self.model = model
        self.block_size = block_size
        self.prompt_len = prompt_len
        self._state = {name: _Session() for name in names}
        self._lock = threading.Lock()

    def current_claim(self, session: str) -> str | None:
        """The id of the session's latest registered claim (None before its first)."""
        with self._lock:
            state = self._state[session]
            return claim_id(self.seed, session, state.version) if state.version else None

    def tokens(self, prompt: str) -> list[int]:
        """The prompt's token ids."""
        return prompt_tokens(self.seed, prompt, self.prompt_len)

    def _body(self, cid: str, owner: str, obj: str) -> dict[str, object]:
        return {CLAIM_PARAM: claim_body(cid, owner, obj, model=self.model,
                                        block_size=self.block_size)}

    def request(self, op: Op) -> Request:
        """The request *op* becomes now: a reuse of a claim not held becomes a registration."""
        tokens = self.tokens(op.prompt)
        if op.session is None or op.kind is OpKind.UNCLAIMED:
            return Request(op, tokens, None, None, None, None)
        owner = op.session
        if op.kind in (OpKind.FOREIGN_REF, OpKind.FOREIGN_FULL):
            target = op.target_session or ""
            current = self.current_claim(target)
            cid = current or claim_id(self.seed, target, 1)
            if op.kind is OpKind.FOREIGN_REF or current is None:
                # before the owner registered, only a reference: it can never register the id
                return self._ref(op.model_copy(update={"kind": OpKind.FOREIGN_REF}), tokens,
                                 owner, cid)
            return Request(op, tokens, owner, cid, "full", self._body(cid, owner, target))
        with self._lock:
            state = self._state[owner]
            if op.kind is OpKind.REGISTER or not state.held:
                state.version += 1
                state.held = False
                op = op.model_copy(update={"kind": OpKind.REGISTER})
            cid = claim_id(self.seed, owner, state.version)
        if op.kind is OpKind.REUSE_REF:
            return self._ref(op, tokens, owner, cid)
        return Request(op, tokens, owner, cid, "full", self._body(cid, owner, owner))

    @staticmethod
    def _ref(op: Op, tokens: list[int], owner: str, cid: str) -> Request:
        params = {CLAIM_REF_PARAM: {"claim_id": cid, "owner_scope": owner}}
        return Request(op, tokens, owner, cid, "ref", params)

    def learn(self, ex: Exchange) -> None:
        """Update the session from the answer its own claim got."""
        if ex.session is None or ex.kind not in (OpKind.REGISTER, *REUSE_KINDS):
            return
        if ex.transport is Transport.REFUSED:
            return
        with self._lock:
            state = self._state[ex.session]
            if ex.claim_id != claim_id(self.seed, ex.session, state.version):
                return  # an answer about an earlier claim of the session
            state.held = client_outcome(ex) in HELD
