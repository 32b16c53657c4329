"""Fixtures for the release-cache tests: tiny local wheels."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest


def make_wheel(folder: Path, dist: str, version: str, files: dict[str, str]) -> Path:
    """A minimal valid wheel (pip accepts it from --find-links)."""
    folder.mkdir(parents=True, exist_ok=True)
    norm = dist.replace("-", "_")
    path = folder / f"{norm}-{version}-py3-none-any.whl"
    info = f"{norm}-{version}.dist-info"
    members = dict(files)
    members[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    members[f"{info}/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: residentkv-tests\n"
                                "Root-Is-Purelib: true\nTag: py3-none-any\n")
    members[f"{info}/RECORD"] = "".join(f"{n},,\n" for n in members) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in members.items():
            z.writestr(name, text)
    return path


@pytest.fixture
def wheel_factory(tmp_path: Path) -> Callable[..., Path]:
    def make(dist: str, version: str, files: dict[str, str] | None = None,
             folder: Path | None = None) -> Path:
        return make_wheel(folder or tmp_path / "index", dist, version,
                          files or {"pkg/__init__.py": "X = 1\n"})
    return make



