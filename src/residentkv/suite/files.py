"""What a suite case folder may hold: regular files of bounded size, folders and links.

A case is copied into scratch for its descriptor mutants and its traces are read whole for its
trace mutants, so a case folder is inspected (``lstat``, never ``open``) before anything reads
or copies it: a FIFO blocks the copy, a device never ends, and a sparse file (a 1 TiB hole)
costs nothing on disk but its full size when copied or read. Each is a suite mismatch located
at the file, with its code; the case fails and is never copied.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from residentkv.limits import (
    MAX_CASE_FILE_BYTES,
    MAX_DIR_ENTRIES,
    SPARSE_MIN_BYTES,
    special_kind,
)


def case_file_problems(folder: Path) -> list[str]:
    """One located mismatch per file of *folder* that the suite refuses (none: ``[]``).

    Links are not followed (a link is checked where it is used, confined to the suite);
    at most :data:`~residentkv.limits.MAX_DIR_ENTRIES` entries are inspected.
    """
    problems: list[str] = []
    seen = 0
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        for name in sorted(filenames) + sorted(dirnames):
            seen += 1
            if seen > MAX_DIR_ENTRIES:
                return [*problems, f"L003: {folder}: more than {MAX_DIR_ENTRIES} entries in "
                                   "the case folder (see docs/limits.md)"]
            problem = _refused(Path(dirpath) / name)
            if problem is not None:
                problems.append(problem)
    return problems


def _refused(path: Path) -> str | None:
    try:
        st = path.lstat()
    except OSError as e:
        return f"L001: {path}: cannot be inspected: {e.strerror or e}"
    if stat.S_ISLNK(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return None
    if not stat.S_ISREG(st.st_mode):
        return (f"S010: {path}: a {special_kind(st.st_mode)} in the case folder; expected "
                "regular files only (special files block or never end)")
    if st.st_size > MAX_CASE_FILE_BYTES:
        return (f"S011: {path}: {st.st_size} bytes; a case file holds at most "
                f"{MAX_CASE_FILE_BYTES} bytes (see docs/limits.md)")
    allocated = getattr(st, "st_blocks", None)
    if allocated is not None and st.st_size >= SPARSE_MIN_BYTES \
            and allocated * 512 * 2 < st.st_size:
        return (f"S012: {path}: a sparse file ({st.st_size} bytes, {allocated * 512} "
                "allocated); expected a file written out in full (copying or reading a "
                "sparse file costs its whole size)")
    return None
