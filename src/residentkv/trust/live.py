"""The *live* root (SPEC §7.2): files written during this run by the processes it started.

A run that produces evidence first creates the folders it will write into
(:meth:`LiveRoot.create`): each must not exist before, so that nothing in it -- not even the
folder -- was made by anyone else. A file its own processes write there is recorded with the
digest its *writer* took as it wrote it (the witness's engine hashes every byte it writes,
:meth:`~residentkv.trace.writer.EventWriter.written_sha256`, and hands the digest back over a
pipe), and the file here must hash to that digest (:meth:`LiveRoot.record`): bytes changed by
anyone between the writing and the reading are never live (L034). A producer that cannot hand
back its writer's digest is recorded with the digest taken when the run collected the file,
and the grant says so. Only a recorded file whose bytes still hash to the recorded digest is
live. A file found in those folders that the run did not record -- planted before the run, or
committed beside its output -- is reported as *found*, never live, never signed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from residentkv.errors import UsageError
from residentkv.limits import MAX_DIR_ENTRIES
from residentkv.lowering.provenance import scan_file

__all__ = ["LiveFile", "LiveRoot"]


@dataclass(frozen=True)
class LiveFile:
    """One file this run wrote: its sha256, the process that wrote it, and when the digest
    was taken (by the writer as it wrote, or when the run collected the file)."""

    path: Path
    sha256: str
    producer: str
    by_writer: bool = True

    @property
    def digest_taken(self) -> str:
        return ("digest recorded by its writer as it wrote it" if self.by_writer else
                "digest taken when the run collected it")


@dataclass
class LiveRoot:
    """The folders this run created and the files its own processes wrote there."""

    folders: list[Path] = field(default_factory=list)
    files: dict[Path, LiveFile] = field(default_factory=dict)

    def create(self, folder: Path) -> Path:
        """Create *folder* for this run's output; it must not exist yet (its parents may).

        An existing folder is refused (a usage error), even an empty one: the run did not
        create it, so whoever did may still write into it, and nothing found there could be
        told apart from what the run writes.
        """
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            folder.mkdir(mode=0o700)
        except FileExistsError:
            raise UsageError(
                f"{folder} already exists; a live run writes into a folder it creates itself, "
                "so that nothing found there passes for its output: remove it or choose "
                "another output folder", code="L033", path=str(folder)) from None
        except OSError as e:
            raise UsageError(f"cannot create the run's folder {folder}: {e.strerror or e}",
                             path=str(folder)) from None
        self.folders.append(folder.resolve())
        return folder

    def record(self, path: Path, producer: str, written_sha256: str | None) -> LiveFile:
        """Record *path*, written by this run's *producer*, whose writer recorded
        *written_sha256* as it wrote it (``None``: the producer could not say; the digest is
        taken now). A file that does not hash to its writer's digest is refused (L034)."""
        where = path.resolve()
        if not any(where.is_relative_to(f) for f in self.folders):
            raise UsageError(f"{path} lies outside the folders this run created; only files "
                             "the run writes into its own folders are live", code="L033",
                             path=str(path))
        now = scan_file(where).sha256
        if written_sha256 is not None and now != written_sha256:
            raise UsageError(f"{path} has sha256 {now}, but its writer ({producer}) recorded "
                             f"{written_sha256} as it wrote it: the file changed after it "
                             "was written, and nothing in it is live", code="L034",
                             path=str(path))
        entry = LiveFile(where, now, producer, by_writer=written_sha256 is not None)
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
