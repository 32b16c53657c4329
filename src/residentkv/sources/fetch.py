"""``residentkv sources fetch``: download the pinned release archives into the cache.

The only module of residentkv that reaches the network, and only through pip's own client:
``python -m pip download --no-deps --only-binary=:all: -d CACHE dist==version`` (an sdist with
``--no-binary=:all:`` when no wheel exists). Dependencies are never installed or downloaded, and
nothing is executed from the archives. An archive already in the cache is not fetched again.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from residentkv.errors import UsageError
from residentkv.sources.cache import find_archive
from residentkv.sources.pins import Pin

__all__ = ["FetchResult", "Runner", "fetch", "pip_command", "sha256_file"]

Status = Literal["cached", "downloaded", "failed"]
Runner = Callable[[list[str]], "subprocess.CompletedProcess[str]"]


@dataclass(frozen=True)
class FetchResult:
    """What happened to one pin."""

    pin: Pin
    status: Status
    path: Path | None
    detail: str
    sha256: str | None = None

    def to_json(self) -> dict[str, str | None]:
        return {"package": self.pin.package, "requirement": self.pin.requirement,
                "status": self.status, "path": str(self.path) if self.path else None,
                "sha256": self.sha256, "detail": self.detail}


def sha256_file(path: Path) -> str:
    """sha256 (hex) of a file, read in chunks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pip_command(pin: Pin, cache: Path, *, binary: bool = True, index_url: str | None = None,
                find_links: Sequence[str] = (), no_index: bool = False) -> list[str]:
    """The pip command that downloads *pin* (and nothing else) into *cache*."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps",
           "--only-binary=:all:" if binary else "--no-binary=:all:",
           "--disable-pip-version-check", "--no-input", "--progress-bar", "off",
           "-d", str(cache)]
    if index_url:
        cmd += ["--index-url", index_url]
    if no_index:
        cmd.append("--no-index")
    for link in find_links:
        cmd += ["--find-links", link]
    return [*cmd, pin.requirement]


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def fetch(pins: Sequence[Pin], cache: Path, *, index_url: str | None = None,
          find_links: Sequence[str] = (), no_index: bool = False, force: bool = False,
          runner: Runner = _run) -> list[FetchResult]:
    """Make sure the archive of every pin is in *cache*; one result per pin, never raises for
    a pin that cannot be downloaded (its result says ``failed`` and why)."""
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--cache {cache}: cannot create the release cache: {e}",
                         path=str(cache)) from None
    out = []
    for pin in pins:
        have = None if force else find_archive(cache, pin)
        if have is not None:
            out.append(FetchResult(pin, "cached", have, "already in the cache", sha256_file(have)))
            continue
        out.append(_download(pin, cache, index_url, find_links, no_index, runner))
    return out


def _download(pin: Pin, cache: Path, index_url: str | None, find_links: Sequence[str],
              no_index: bool, runner: Runner) -> FetchResult:
    errors = []
    order = (True, False) if pin.kind == "wheel" else (False,)
    for binary in order:
        cmd = pip_command(pin, cache, binary=binary, index_url=index_url,
                          find_links=find_links, no_index=no_index)
        try:
            proc = runner(cmd)
        except OSError as e:
            return FetchResult(pin, "failed", None, f"cannot run pip: {e}")
        got = find_archive(cache, pin)
        if proc.returncode == 0 and got is not None:
            what = "wheel" if got.name.endswith(".whl") else "sdist"
            return FetchResult(pin, "downloaded", got, f"{what} via pip download",
                               sha256_file(got))
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()
        errors.append(f"{'wheel' if binary else 'sdist'}: "
                      f"{tail[-1] if tail else f'pip exited {proc.returncode}'}")
    return FetchResult(pin, "failed", None, "; ".join(errors))
