"""The *live* root (SPEC §7.2): files written during this run by the processes it started.

A run that produces evidence first creates the folders it will write into, each new or empty
(:meth:`LiveRoot.create`); whatever its own processes write there is recorded with its digest
the moment the writing process is done (:meth:`LiveRoot.record`). Only a recorded file whose
bytes still hash to the recorded digest is live. A file found in those folders that the run
did not record -- planted before the run, or committed beside its output -- is reported as
*found*, never live, never signed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from residentkv.errors import UsageError
from residentkv.limits import MAX_DIR_ENTRIES
from residentkv.lowering.provenance import scan_file

__all__ = ["LiveFile", "LiveRoot"]


@dataclass(frozen=True)
class LiveFile:
    """One file this run wrote: its sha256 and the process that wrote it."""

    path: Path
    sha256: str
    producer: str


@dataclass
class LiveRoot:
    """The folders this run created empty and the files its own processes wrote there."""

    folders: list[Path] = field(default_factory=list)
    files: dict[Path, LiveFile] = field(default_factory=dict)

    def create(self, folder: Path) -> Path:
        """Create *folder* for this run's output: new, or an existing empty folder.

        A folder that holds anything is refused (a usage error): what lies there was not
        written by this run, and nothing in it could be told apart from what the run writes.
        """
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with os.scandir(folder) as it:
                leftover = next(it, None)
        except OSError as e:
            raise UsageError(f"cannot create the run's folder {folder}: {e.strerror or e}",
                             path=str(folder)) from None
        if leftover is not None:
            raise UsageError(
                f"{folder} is not empty (it holds {leftover.name!r}); a live run writes into a "
                "folder it creates empty, so that nothing found there passes for its output: "
                "remove it or choose another output folder", code="L033", path=str(folder))
        resolved = folder.resolve()
        self.folders.append(resolved)
        return folder

    def record(self, path: Path, producer: str) -> LiveFile:
        """Record *path*, just written by this run's *producer*, with its digest now."""
        where = path.resolve()
        if not any(where.is_relative_to(f) for f in self.folders):
            raise UsageError(f"{path} lies outside the folders this run created; only files "
                             "the run writes into its own folders are live", code="L033",
                             path=str(path))
        entry = LiveFile(where, scan_file(where).sha256, producer)
        self.files[where] = entry
        return entry

    def recorded(self, path: Path, sha256: str) -> LiveFile | None:
        """The record of *path* when its bytes are still the ones this run wrote."""
        try:
            entry = self.files.get(path.resolve())
        except OSError:
            return None
        return entry if entry is not None and entry.sha256 == sha256 else None

    def found(self, where: Path | None = None, suffix: str = ".jsonl") -> list[Path]:
        """Files (``*suffix``) in *where* (default: every folder of this run) that the run did
        not record: cited, never live. A run names the folder of its output traces, so that
        what its own processes leave beside their work (engine logs) is not reported."""
        out: list[Path] = []
        for folder in [where.resolve()] if where is not None else self.folders:
            for n, p in enumerate(sorted(folder.rglob(f"*{suffix}"))):
                if n >= MAX_DIR_ENTRIES:
                    break
                if p.is_file() and p.resolve() not in self.files:
                    out.append(p)
        return out
