"""SPEC §7.1: the dynamo+residentkv row grants only through a root of trust. The same fleet
traces, byte for byte (same sha256), copied outside the installed package and not signed, are
cited evidence: they may refuse, never grant."""

from __future__ import annotations

import shutil
from pathlib import Path

from residentkv.lowering.anchors import Verifier
from residentkv.lowering.check import run_check
from residentkv.sources import cached_roots
from residentkv.sources.roots import runtimes_dir

POSITIVE = {"native_conformance", "adapter_policy_evidence", "adapter_observational_evidence"}


def test_fleet_traces_copied_outside_the_package_do_not_grant(tmp_path: Path,
                                                               pinned_cache: Path) -> None:
    shutil.copytree(runtimes_dir(), tmp_path / "rt")
    desc = tmp_path / "rt" / "dynamo_residentkv_adapter.yaml"
    (row,) = run_check([desc], verifier=Verifier(cached_roots(pinned_cache)[0])).rows
    assert row.klass not in POSITIVE, (row.klass, row.reasons)


def test_the_package_copy_still_grants(pinned_cache: Path) -> None:
    desc = runtimes_dir() / "dynamo_residentkv_adapter.yaml"
    (row,) = run_check([desc], verifier=Verifier(cached_roots(pinned_cache)[0])).rows
    assert row.klass == "adapter_policy_evidence", row.reasons
