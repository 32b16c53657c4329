"""What an answer of the engine's control socket means, in the operator's words.

The socket answers with data (a count, a status, an outcome or ``null``); ``residentkv witness
control`` prints what these functions make of it: a confirmation, or a failure that names the
cause, and whether the command did what was asked (the CLI exits 1 when it did not). Pure: no
socket, no vLLM.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Answer", "injection_answer", "outcome_answer", "release_answer",
           "unreachable_hint"]

_MODE_WORDS = {
    "once": "fails (once: the rule is then spent)",
    "persistent": "fails (persistent: every matching load fails until the rule is cleared)",
    "corrupt": "reads bytes flipped in the host tier, so its digest check fails (once: the "
               "rule is then spent, the tier keeps the wrong bytes)",
}


@dataclass(frozen=True)
class Answer:
    """What to print, and whether the command did what it was asked to."""

    ok: bool
    lines: tuple[str, ...]


def release_answer(released: Mapping[str, Any]) -> Answer:
    """*released*: claim id -> the socket's answer to releasing that one claim (how many live
    claims it ended: 1 or 0)."""
    done = [c for c, n in released.items() if n == 1]
    not_live = [c for c, n in released.items() if n != 1]
    lines = [f"released {c}: claim_released written, its host-tier slots freed" for c in done]
    lines += [f"error: claim {c} is not live on this engine (never accepted here, already "
              "released, or failed closed): nothing released" for c in not_live]
    return Answer(not not_live, tuple(lines))


def injection_answer(rule: Mapping[str, Any] | None, status: Mapping[str, Any]) -> Answer:
    """The engine's status after setting *rule* (``None``: after clearing every rule)."""
    rules = status.get("rules")
    if not isinstance(rules, list):
        return Answer(False, ("error: the engine's answer lists no injection rules",))
    if rule is None:
        if rules:
            return Answer(False, (f"error: {len(rules)} injection rule(s) still set",))
        return Answer(True, ("failure injection cleared: no load will be failed on purpose",))
    if not any(_same_rule(rule, r) for r in rules):
        return Answer(False, ("error: the engine did not take the injection rule",))
    return Answer(True, (f"failure injection set: the next load of {_selector(rule)} "
                         f"{_MODE_WORDS.get(str(rule.get('mode')), 'fails')}",))


def _same_rule(asked: Mapping[str, Any], held: Any) -> bool:
    return isinstance(held, Mapping) and all(held.get(k) == v for k, v in asked.items()
                                             if v not in (None, False))


def _selector(rule: Mapping[str, Any]) -> str:
    if rule.get("claim_id"):
        return f"claim {rule['claim_id']}"
    if rule.get("owner_scope"):
        return f"any claim of owner scope {rule['owner_scope']}"
    return "an unclaimed (ordinary) offload"


def outcome_answer(request_id: str, outcome: Any) -> Answer:
    """The socket's answer to ``outcome REQUEST_ID`` (``None``: it knows no such request)."""
    if outcome is None:
        return Answer(False, (
            f"error: no claim outcome for request {request_id} on this engine: no request "
            "with this id carried a claim here (give vLLM's request id, or the X-Request-Id "
            "the request was sent with)",))
    return Answer(True, ())


def unreachable_hint(path: str, problem: str) -> str:
    """The message for a socket that could not be reached or refused the command."""
    problem = problem.removeprefix(f"control socket {path}: ")
    if "No such file" in problem or "Connection refused" in problem:
        return (f"cannot reach the control socket {path} ({problem}): is the server running "
                f"with \"control_socket\": \"{path}\" in its kv_connector_extra_config? (a "
                "relative path there is relative to the folder the server was started in)")
    return f"control socket {path}: {problem}"
