"""The *package* root: a trace that ships inside the installed residentkv, unchanged.

A wheel install lists every file of the package, with its sha256, in the distribution's
``RECORD``; a file whose bytes match its RECORD line is exactly what the release shipped. An
editable install (``pip install -e``, what ``make`` does) has a RECORD that lists none of the
package data: the package *is* the source checkout, so the digest index is the one its version
control keeps -- the blob git committed at ``HEAD`` for that path. A file that matches neither
(edited, added after the install, or untracked) is not in the package root. A copy of a shipped
trace anywhere else is not either: the root is a place *and* a digest.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import subprocess
from functools import lru_cache
from pathlib import Path

import residentkv

__all__ = ["package_data_dir", "package_digest_match", "package_match"]

#: seconds for one ``git ls-tree`` of the package data (a local read; bounded all the same)
_GIT_TIMEOUT_S = 30


def package_data_dir() -> Path:
    """The ``data`` folder of the residentkv package this process imported (resolved)."""
    return (Path(residentkv.__file__).resolve().parent / "data").resolve()


@lru_cache(maxsize=1)
def _index() -> tuple[str, dict[Path, str]]:
    """``(how, {resolved path: digest})`` of the package data: RECORD (wheel) or git (editable).

    Digests are ``sha256=<urlsafe b64>`` (RECORD) or ``git-blob=<hex sha1>`` (git).
    """
    data = package_data_dir()
    record: dict[Path, str] = {}
    try:
        dist = importlib.metadata.distribution("residentkv")
        files = dist.files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for f in files:
        if f.hash is None or f.hash.mode != "sha256":
            continue
        try:
            where = Path(str(f.locate())).resolve()
        except OSError:
            continue
        if where.is_relative_to(data):
            record[where] = f"sha256={f.hash.value}"
    if record:
        return "RECORD", record
    return "git HEAD", _git_index(data)


def _git_index(data: Path) -> dict[Path, str]:
    try:
        out = subprocess.run(["git", "ls-tree", "-r", "-z", "HEAD", "."], cwd=data,
                             capture_output=True, timeout=_GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return {}
    if out.returncode != 0:
        return {}
    index: dict[Path, str] = {}
    for entry in out.stdout.split(b"\0"):
        meta, sep, rel = entry.partition(b"\t")
        parts = meta.split()
        if not sep or len(parts) != 3 or parts[1] != b"blob":
            continue
        index[(data / rel.decode("utf-8", "surrogateescape")).resolve()] = (
            f"git-blob={parts[2].decode()}")
    return index


def _digest_of(data: bytes, how: str) -> str:
    if how == "RECORD":
        raw = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        return f"sha256={raw.decode()}"
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data)
    return f"git-blob={blob.hexdigest()}"


def package_match(path: Path, data: bytes) -> str | None:
    """How *path* (whose bytes are *data*) is in the package root, or ``None`` when it is not.

    The answer names the index (``RECORD`` or ``git HEAD``) so reports can say which.
    """
    try:
        where = path.resolve()
    except OSError:
        return None
    if not where.is_relative_to(package_data_dir()):
        return None
    how, index = _index()
    listed = index.get(where)
    if listed is None or listed != _digest_of(data, how):
        return None
    return how


def package_digest_match(path: Path, sha256: str, git_blob: str | None) -> str | None:
    """:func:`package_match` from digests already computed in the one pass over the file:
    its sha256 (hex) and, for an editable install's index, its git blob digest."""
    try:
        where = path.resolve()
    except OSError:
        return None
    if not where.is_relative_to(package_data_dir()):
        return None
    how, index = _index()
    listed = index.get(where)
    if how == "RECORD":
        raw = base64.urlsafe_b64encode(bytes.fromhex(sha256)).rstrip(b"=").decode()
        return how if listed == f"sha256={raw}" else None
    return how if git_blob is not None and listed == f"git-blob={git_blob}" else None
