"""The claims file: every problem is a located, coded error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from residentkv.observe.claims import ClaimsFileError, block_key, load_claims

from .obskit import BS, PREFIX, claim_dict, claims_file


def test_tokens_cut_into_blocks_and_objects_shared(tmp_path: Path) -> None:
    one = claim_dict("c-1")
    two = claim_dict("c-2", footprint=4)
    del two["tokens"]
    two["object_id"] = "shared"
    path = tmp_path / "claims.yaml"
    path.write_text(json.dumps({"objects": {"shared": PREFIX}, "claims": [one, two]}))
    a, b = load_claims(path)
    assert a.blocks == (block_key(PREFIX[:BS]), block_key(PREFIX[BS:2 * BS]),
                        block_key(PREFIX[2 * BS:3 * BS]))
    assert len(b.blocks) == 4 and list(b.needed) == [0, 1]


@pytest.mark.parametrize(("text", "code", "line", "words"), [
    ("claims:\n  - claim_id: c\n    bogus: 1\n", "L030", 3, "claims.0.bogus: unknown key"),
    ("claims: 3\n", "L030", 1, "list under 'claims'"),
    ("claims: []\nother: 1\n", "L030", 2, "unknown top-level key"),
    ("claims: []\n", "L030", 1, "no claims"),
    ("claims: [\n", "L030", None, "not valid YAML"),
])
def test_bad_files(tmp_path: Path, text: str, code: str, line: int | None,
                   words: str) -> None:
    path = tmp_path / "claims.yaml"
    path.write_text(text)
    with pytest.raises(ClaimsFileError) as e:
        load_claims(path)
    assert e.value.code == code and words in e.value.message
    if line is not None:
        assert e.value.line == line
    assert str(e.value).startswith(f"{path}:")


def test_too_few_tokens_and_bad_tokens(tmp_path: Path) -> None:
    with pytest.raises(ClaimsFileError) as e:
        load_claims(claims_file(tmp_path, claim_dict("c", tokens=PREFIX[:2 * BS + 1])))
    assert e.value.code == "L031" and "footprint_blocks=3" in e.value.message
    with pytest.raises(ClaimsFileError) as e:
        load_claims(claims_file(tmp_path, claim_dict("c", tokens=[1, "2", 3])))
    assert e.value.code == "L030" and "token ids" in e.value.message
    with pytest.raises(ClaimsFileError) as e:
        load_claims(claims_file(tmp_path, claim_dict("c"), claim_dict("c")))
    assert "appears twice" in e.value.message


def test_a_misspelt_key_names_the_nearest_one(tmp_path: Path) -> None:
    raw = claim_dict("c")
    raw["protecton_mode"] = raw.pop("protection_mode")
    with pytest.raises(ClaimsFileError) as e:
        load_claims(claims_file(tmp_path, raw))
    assert "did you mean protection_mode?" in e.value.message
    raw = claim_dict("c", cache_slat="s-1")
    with pytest.raises(ClaimsFileError) as e:
        load_claims(claims_file(tmp_path, raw))
    assert "did you mean cache_salt?" in e.value.message


def test_bindings_default_to_none_and_are_checked(tmp_path: Path) -> None:
    plain, bound = load_claims(claims_file(
        tmp_path, claim_dict("a"),
        claim_dict("b", cache_salt="s-1", lora_name="ad", session_id="x", kv_groups=[0, 2])))
    assert (plain.cache_salt, plain.lora_name, plain.session_id, plain.kv_groups) == (
        None, None, None, None)
    assert (bound.cache_salt, bound.lora_name, bound.session_id, bound.kv_groups) == (
        "s-1", "ad", "x", frozenset({0, 2}))
    for bad in ({"cache_salt": 3}, {"lora_name": ""}, {"kv_groups": [-1]}, {"kv_groups": []}):
        with pytest.raises(ClaimsFileError) as e:
            load_claims(claims_file(tmp_path, claim_dict("c", **bad)))
        assert e.value.code == "L030" and next(iter(bad)) in e.value.message
