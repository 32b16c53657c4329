from typing import Any

import pytest
from pydantic import ValidationError

from residentkv.model.claim import ResidentClaim


def claim(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "claim_id": "c-1",
        "owner_scope": "tenant:a/session:7",
        "object_id": "prefix:abc",
        "cache_identity": {
            "model_id": "tiny-llama", "tokenizer_id": "tok", "cache_key_domain": "vllm",
            "salt_namespace": "tenant:a", "block_size": 128, "kv_format": "bf16",
        },
        "request_token_map_id": "tokmap:abc",
        "predicate": {"id": "p", "kind": "leading_prefix_at_least", "blocks": 2},
        "footprint_blocks": 2,
        "protection_mode": "offloadable",
        "registration": "pre_registered",
    }
    base.update(over)
    return base


def test_valid_claim_is_frozen_and_has_identity() -> None:
    c = ResidentClaim.model_validate(claim())
    assert c.identity[0] == "prefix:abc"
    assert c.identity[3] == "p"
    with pytest.raises(ValidationError):
        c.claim_id = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("over", "fragment"),
    [
        ({"unexpected": 1}, "Extra inputs"),
        ({"footprint_blocks": 0}, "greater than 0"),
        ({"protection_mode": "pinned"}, "protection_mode"),
        ({"registration": "later"}, "registration"),
        ({"protection_mode": "expiring"}, "expires_after_s"),
        ({"predicate": {"id": "p", "kind": "leading_prefix_at_least", "blocks": 3}},
         "beyond footprint"),
        ({"request_token_map_id": ""}, "request_token_map_id"),
    ],
)
def test_invalid_claims_name_the_problem(over: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        ResidentClaim.model_validate(claim(**over))


def test_missing_fields_are_reported() -> None:
    data = claim()
    del data["cache_identity"]
    with pytest.raises(ValidationError, match="cache_identity"):
        ResidentClaim.model_validate(data)


def test_expiring_claim_with_ttl_is_valid() -> None:
    c = ResidentClaim.model_validate(claim(protection_mode="expiring", expires_after_s=30))
    assert c.expires_after_s == 30
