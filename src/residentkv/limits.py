"""Every bound residentkv puts on its inputs, in one place (listed in ``docs/limits.md``).

Hostile input must not crash, hang or exhaust memory: a special file (device, FIFO, socket) is
refused before it is opened for reading, every read is bounded, nesting depth is bounded before
a recursive parser sees the text, and archives are bounded in members, member size and
compression ratio. A limit that is hit is a located user error (exit code 2) or a finding,
never a traceback.
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path
from typing import BinaryIO

from residentkv.errors import UserInputError

#: a descriptor, bundle, case.yaml or foreign trace read whole
MAX_FILE_BYTES = 64 << 20
#: one source file an anchor reads (a .py or any text file in a source root)
MAX_SOURCE_FILE_BYTES = 16 << 20
#: one line of a JSONL file scanned by the lowering checker or an importer
MAX_LINE_BYTES = 1 << 20
#: nesting of JSON arrays/objects and YAML collections
MAX_JSON_DEPTH = 64
MAX_YAML_DEPTH = 64
#: nodes of a YAML document after alias expansion
MAX_YAML_NODES = 2_000_000
#: archives (wheels, sdists): members indexed, bytes of one member, compression ratio
MAX_ARCHIVE_MEMBERS = 100_000
MAX_MEMBER_BYTES = 64 << 20
MAX_COMPRESSION_RATIO = 200
#: files walked in one source directory (symlink loops cannot make this infinite)
MAX_DIR_ENTRIES = 200_000
#: digits of one integer in a foreign trace (Python refuses > 4300 when converting to str)
MAX_INT_DIGITS = 4000
#: standard input read by ``-``
MAX_STDIN_BYTES = MAX_FILE_BYTES
#: one file in a suite case folder (cases are copied for mutants and their traces read whole)
MAX_CASE_FILE_BYTES = MAX_FILE_BYTES
#: a case file at least this large with less than half of it allocated on disk is sparse
SPARSE_MIN_BYTES = 1 << 20


class LimitError(UserInputError):
    """An input over one of the documented limits (exit code 2)."""

    code = "L003"


class SpecialFileError(UserInputError):
    """A device, FIFO or socket where a regular file was expected (exit code 2)."""

    code = "L004"


def regular_file(path: str | Path, what: str) -> Path:
    """*path* as a regular file, or a located :class:`UserInputError` that says why not.

    Checked with ``stat`` before any ``open``: opening a FIFO blocks and ``/dev/zero`` never
    ends, so they are refused up front.
    """
    p = Path(path)
    try:
        kind = file_kind(p)
    except OSError as e:
        raise UserInputError(f"cannot read {what}: {e.strerror or e}", code="L001",
                             path=str(path)) from None
    if kind == "directory":
        raise UserInputError(f"{what} is a directory; expected a file", code="L001",
                             path=str(path))
    if kind != "file":
        raise SpecialFileError(f"{what} is a {kind}, not a regular file; expected a "
                               "file (special files are refused: they may block or never end)",
                               path=str(path))
    return p


def file_kind(path: str | Path) -> str:
    """What *path* is, by ``stat`` (it is not opened): ``"file"`` (regular), ``"directory"``,
    or the kind of special file (``"FIFO"``, ``"character device"``, …).

    Raises :class:`OSError` when *path* cannot be stat'ed.
    """
    mode = Path(path).stat().st_mode
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    return special_kind(mode)


def special_kind(mode: int) -> str:
    """The kind of special file an ``st_mode`` describes (``"FIFO"``, ``"socket"``, …)."""
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "special file"


def read_bounded(path: str | Path, what: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most *limit* bytes (else a located error)."""
    p = regular_file(path, what)
    try:
        with p.open("rb") as fh:
            return read_stream(fh, what, limit, str(path))
    except OSError as e:
        raise UserInputError(f"cannot read {what}: {e.strerror or e}", code="L001",
                             path=str(path)) from None


def read_input(path: str | Path, what: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """A whole input file, bounded; ``-`` is standard input."""
    if str(path) == "-":
        return read_stdin(what, limit)
    return read_bounded(path, what, limit)


def read_stream(fh: BinaryIO, what: str, limit: int, shown: str) -> bytes:
    """At most *limit* bytes of *fh*; more is a :class:`LimitError` (nothing beyond is read)."""
    data = fh.read(limit + 1)
    if len(data) > limit:
        raise LimitError(f"{what} is larger than {limit} bytes; expected at most {limit} "
                         "(see docs/limits.md)", path=shown)
    return data


def read_stdin(what: str, limit: int = MAX_STDIN_BYTES) -> bytes:
    """Standard input, bounded like a file (``-`` on the command line)."""
    return read_stream(sys.stdin.buffer, what, limit, "<stdin>")


def json_depth_ok(raw: bytes | str, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """True when the JSON text nests arrays/objects at most *max_depth* deep.

    One linear pass that skips strings, so a recursive parser never sees a deeper document.
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if data.count(b"[") + data.count(b"{") <= max_depth:
        return True
    depth, in_string, escaped = 0, False, False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > max_depth:
                return False
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return True

