"""Dynamo's file discovery, as the fleet reads and tends it (pure but for the file system).

With ``--discovery-backend file`` every Dynamo process publishes its records as JSON files
under ``$DYN_FILE_KV/v1/<kind>/`` and keeps them alive by touching them; any live process
deletes a file not touched for the store's TTL (10 s in Dynamo 1.6.1, swept every TTL/3), and
every watcher (the frontend's KV router, the harness's own client) sees a deletion at once
(inotify). A worker killed outright leaves its records behind until that sweep: 6.7-10 s in
which the router still chooses it (docs/fleet.md).

A worker instance's records, by kind:

- ``instances``: one per endpoint it serves, each naming it as ``instance_id``;
- ``mdc``: its model card, naming it as ``instance_id``;
- ``event_sources``: its KV-event publisher, naming it as ``metadata.worker.worker_id``;
- ``event_channels``: the channel of each of those publishers (its ``instance_id`` is the
  publisher's ``publisher_id``, not the worker's).

:func:`records_of` picks them out of a listing by content (never by file name or age);
:func:`withdraw` deletes them, which is what the store's own sweep does later.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from residentkv.adapters.dynamo.layout import Replica

__all__ = ["Record", "instance_ids", "read_records", "records_of", "withdraw"]

KINDS = ("instances", "mdc", "event_sources", "event_channels")


@dataclass(frozen=True)
class Record:
    """One discovery file: its path, its kind (the directory under ``v1/``) and its JSON."""

    path: Path
    kind: str
    doc: dict[str, Any]


def read_records(discovery_dir: Path, kinds: Sequence[str] = KINDS) -> list[Record]:
    """Every readable record of *kinds*; a file that vanished or is not a JSON object is
    skipped (records come and go while the fleet runs)."""
    out = []
    for kind in kinds:
        for path in sorted((discovery_dir / "v1" / kind).glob("*")):
            if path.name.startswith("."):  # the store's temporary files
                continue
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(doc, dict):
                out.append(Record(path, kind, doc))
    return out


def instance_ids(discovery_dir: Path, replicas: tuple[Replica, ...]) -> dict[str, int]:
    """Replica name -> Dynamo instance id of its ``generate`` endpoint, from file discovery
    (matched by the request-plane port each worker was given)."""
    by_port = {r.rpc_port: r.name for r in replicas}
    found: dict[str, int] = {}
    for rec in read_records(discovery_dir, ("instances",)):
        if "%2Fgenerate%2F" not in rec.path.name:
            continue
        try:
            port = int(rec.doc["transport"]["tcp"].split("/", 1)[0].rsplit(":", 1)[1])
            instance = int(rec.doc["instance_id"])
        except (ValueError, KeyError, IndexError, AttributeError, TypeError):
            continue
        if port in by_port:
            found[by_port[port]] = instance
    return found


def _worker_of(rec: Record) -> Any:
    if rec.kind == "event_sources":
        worker = (rec.doc.get("metadata") or {}).get("worker") or {}
        return worker.get("worker_id") if isinstance(worker, dict) else None
    return rec.doc.get("instance_id")


def records_of(instance_id: int, records: Iterable[Record]) -> list[Record]:
    """The records worker *instance_id* published: its endpoints, its model card, its KV-event
    publishers and their channels. Another worker's records, and records that name no worker
    (the frontend's own channels), are never among them."""
    listing = list(records)
    own = [r for r in listing if r.kind in ("instances", "mdc", "event_sources")
           and _worker_of(r) == instance_id]
    publishers = {r.doc.get("publisher_id") for r in own if r.kind == "event_sources"}
    publishers.discard(None)
    channels = [r for r in listing if r.kind == "event_channels"
                and r.doc.get("instance_id") in publishers]
    return own + channels


def withdraw(discovery_dir: Path, instance_id: int) -> list[str]:
    """Delete every record of worker *instance_id*; return the files deleted (``kind/name``).
    A record already gone (the store's sweep was first) is not an error."""
    gone = []
    for rec in records_of(instance_id, read_records(discovery_dir)):
        with contextlib.suppress(FileNotFoundError):
            rec.path.unlink()
            gone.append(f"{rec.kind}/{rec.path.name}")
    return gone
