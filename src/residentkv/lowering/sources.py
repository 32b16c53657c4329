"""Source roots for anchor verification: a directory, a wheel/zip, or an sdist tarball.

Archives are read in place, never extracted. Every read is confined to the root: anchor paths
with ``..`` or an absolute path are refused, directory reads that resolve outside the root
(symlinks) are refused, and archive members whose names are absolute or contain ``..`` (zip slip)
are never indexed, so no anchor can reach them. Nothing here touches the network.
"""

from __future__ import annotations

import hashlib
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from residentkv.errors import UserInputError
from residentkv.lowering.descriptor import unsafe_path


class SourceError(UserInputError):
    """A ``--source`` that cannot be used at all (exit code 2)."""

    code = "A006"


class PathRefused(Exception):
    """An anchor path that would leave the source root."""


class SourceRoot:
    """Read-only access to the files of one source, confined to its root."""

    def __init__(self, name: str, location: Path, version: str | None = None) -> None:
        self.name = name
        self.location = location
        #: the release this root holds, when known (pinned archives): anchors that name another
        #: version of the package are never verified against it
        self.version = version
        self.refused_members: list[str] = []
        self._cache: dict[str, bytes | None] = {}

    def read(self, rel: str) -> bytes | None:
        """Bytes of *rel*, ``None`` if absent; :class:`PathRefused` if *rel* leaves the root."""
        why = unsafe_path(rel)
        if why:
            raise PathRefused(f"{rel!r}: {why}")
        if rel not in self._cache:
            self._cache[rel] = self._read(rel)
        return self._cache[rel]

    def _read(self, rel: str) -> bytes | None:
        raise NotImplementedError

    def digest(self) -> str | None:
        """sha256 of an archive (``None`` for directories: they are not one file)."""
        return None


class DirRoot(SourceRoot):
    """A directory: a git checkout or an installed package's site-packages."""

    def __init__(self, name: str, location: Path) -> None:
        super().__init__(name, location)
        self._resolved = location.resolve()

    def _read(self, rel: str) -> bytes | None:
        target = (self._resolved / rel).resolve()
        if not target.is_relative_to(self._resolved):
            raise PathRefused(f"{rel!r} resolves outside the source root")
        try:
            return target.read_bytes() if target.is_file() else None
        except OSError:
            return None


class _ArchiveRoot(SourceRoot):
    def __init__(self, name: str, location: Path) -> None:
        super().__init__(name, location)
        self._sha: str | None = None

    def digest(self) -> str | None:
        if self._sha is None:
            h = hashlib.sha256()
            with self.location.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            self._sha = h.hexdigest()
        return self._sha

    def _safe(self, member: str) -> bool:
        if unsafe_path(member.rstrip("/")) is None:
            return True
        self.refused_members.append(member)
        return False


class ZipRoot(_ArchiveRoot):
    """A wheel (or any zip), paths relative to the archive root."""

    def __init__(self, name: str, location: Path) -> None:
        super().__init__(name, location)
        try:
            self._zip = zipfile.ZipFile(location)
        except (OSError, zipfile.BadZipFile) as e:
            raise SourceError(f"--source {name}: cannot open archive: {e}",
                              path=str(location)) from None
        self._index = {i.filename: i for i in self._zip.infolist()
                       if not i.is_dir() and self._safe(i.filename)}

    def _read(self, rel: str) -> bytes | None:
        info = self._index.get(rel)
        return self._zip.read(info) if info is not None else None


class TarRoot(_ArchiveRoot):
    """An sdist tarball; paths are relative to its single top-level directory, if it has one."""

    def __init__(self, name: str, location: Path) -> None:
        super().__init__(name, location)
        try:
            self._tar = tarfile.open(location)  # noqa: SIM115 - kept open while the root lives
        except (OSError, tarfile.TarError) as e:
            raise SourceError(f"--source {name}: cannot open archive: {e}",
                              path=str(location)) from None
        members = [m for m in self._tar.getmembers() if m.isfile() and self._safe(m.name)]
        tops = {PurePosixPath(m.name).parts[0] for m in members}
        strip = len(tops) == 1 and all(len(PurePosixPath(m.name).parts) > 1 for m in members)
        self._index = {_strip(m.name) if strip else m.name: m for m in members}

    def _read(self, rel: str) -> bytes | None:
        member = self._index.get(rel)
        fh = self._tar.extractfile(member) if member is not None else None
        return fh.read() if fh is not None else None


def _strip(name: str) -> str:
    return str(PurePosixPath(*PurePosixPath(name).parts[1:]))


def open_root(name: str, location: str | Path) -> SourceRoot:
    """Open ``--source NAME=PATH``: a directory, a ``.whl``/``.zip``, or a ``.tar.gz`` sdist."""
    p = Path(location)
    if p.is_dir():
        return DirRoot(name, p)
    if not p.is_file():
        raise SourceError(f"--source {name}={location}: no such file or directory; expected a "
                          "directory, a wheel or an sdist", path=str(location))
    if p.suffix in (".whl", ".zip"):
        return ZipRoot(name, p)
    if p.name.endswith((".tar.gz", ".tgz", ".tar")):
        return TarRoot(name, p)
    raise SourceError(f"--source {name}={location}: unknown archive type; expected a directory, "
                      ".whl, .zip, .tar.gz or .tgz", path=str(location))


def parse_source_option(value: str) -> tuple[str, str]:
    """``NAME=PATH`` -> (NAME, PATH)."""
    name, sep, path = value.partition("=")
    if not sep or not name or not path:
        raise SourceError(f"--source {value!r}: expected NAME=PATH (e.g. vllm=site-packages)",
                          code="L002")
    return name, path
