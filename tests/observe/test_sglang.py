"""SGLang 0.5.23's KV events: the mirror against the released wheel's source, and a publisher of
SGLang's format end to end (SGLang itself does not run on this CPU-only machine)."""

from __future__ import annotations

import ast
import inspect
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import msgspec
import pytest

from residentkv import __version__
from residentkv.observe import wire_sglang
from residentkv.observe.lazy import decode_sglang_lazy
from residentkv.observe.observer import Observer
from residentkv.observe.subscriber import Endpoint, Subscription
from residentkv.observe.synthetic import SyntheticPublisher, chain, removed, stored, to_sglang
from residentkv.observe.wire import Dialect
from residentkv.sources.cache import cache_dir
from residentkv.trace.writer import EventWriter, Provenance

from .obskit import BS, PREFIX, claim_dict, gaps, named, observed

WHEEL = "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl"
SOURCE = "sglang/srt/disaggregation/kv_events.py"
MIRRORED = {"BlockStored": wire_sglang.SGLangBlockStored,
            "BlockRemoved": wire_sglang.SGLangBlockRemoved,
            "AllBlocksCleared": wire_sglang.SGLangAllBlocksCleared,
            "KVEventBatch": wire_sglang.SGLangKVEventBatch}


def _released_source() -> str:
    path = cache_dir() / WHEEL
    if not path.exists():
        pytest.skip(f"{WHEEL} is not in the sources cache (`residentkv sources fetch`)")
    with zipfile.ZipFile(path) as z:
        return z.read(SOURCE).decode()


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _fields(cls: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> list[tuple[str, str, Any]]:
    """(name, annotation text, default text or None) of a struct and its bases, in order."""
    out: list[tuple[str, str, Any]] = []
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in classes:
            out += _fields(classes[base.id], classes)
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            default = None if node.value is None else ast.unparse(node.value)
            out = [f for f in out if f[0] != node.target.id]
            out.append((node.target.id, ast.unparse(node.annotation), default))
    return out


def _config(cls: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> dict[str, Any]:
    conf: dict[str, Any] = {}
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in classes:
            conf.update(_config(classes[base.id], classes))
    conf.update({k.arg: ast.literal_eval(k.value) for k in cls.keywords if k.arg})
    return conf


_SAME_TYPE = {"Optional[int]": "int | None", "Optional[str]": "str | None",
              "list[Union[BlockStored, BlockRemoved, AllBlocksCleared]]": "list[SGLangKVEvent]",
              "list[Any]": "list[SGLangKVEvent]"}


def test_the_mirror_has_sglangs_fields_types_defaults_and_encoding() -> None:
    tree = ast.parse(_released_source())
    classes = _classes(tree)
    for name, mine in MIRRORED.items():
        theirs = _fields(classes[name], classes)
        if name == "KVEventBatch":
            # events is redeclared by the subclass; msgspec keeps the base's positions
            assert [f[0] for f in theirs] == ["ts", "attn_dp_rank", "events"]
            theirs = [theirs[0], theirs[2], theirs[1]]
        assert mine.__struct_fields__ == tuple(f[0] for f in theirs), name
        for field, annotation, default in theirs:
            want = _SAME_TYPE.get(annotation, annotation)
            got = _annotation_of(mine, field)
            assert got == want, (name, field, annotation, got)
            mine_default = dict(zip(mine.__struct_fields__[::-1],
                                    mine.__struct_defaults__[::-1], strict=False)).get(field)
            assert (default is None) == (field not in _defaulted(mine)), (name, field)
            if default is not None:
                assert repr(mine_default) == default, (name, field)
        conf = _config(classes[name], classes)
        for key in ("array_like", "omit_defaults", "tag"):
            assert bool(getattr(mine.__struct_config__, key)) == bool(conf.get(key, False)) \
                or key == "tag", (name, key)
        if conf.get("tag"):
            assert mine.__struct_config__.tag == name


def _defaulted(struct: Any) -> set[str]:
    n = len(struct.__struct_defaults__)
    return set(struct.__struct_fields__[len(struct.__struct_fields__) - n:]) if n else set()


def _annotation_of(struct: Any, field: str) -> str:
    for cls in struct.__mro__:
        ann = inspect.get_annotations(cls)
        if field in ann:
            return str(ann[field])
    raise KeyError(field)


def test_sglang_bytes_decode_into_the_mirror() -> None:
    """SGLang's encoding, written out as its structs encode it (a tagged map per event, the
    batch a three-entry array with attn_dp_rank always present)."""
    payload = msgspec.msgpack.encode([1.5, [
        {"type": "BlockStored", "block_hashes": [-5, 7], "parent_block_hash": None,
         "token_ids": [1, 2], "block_size": 1, "lora_id": None, "medium": "GPU",
         "cache_salt": "s"},
        {"type": "BlockRemoved", "block_hashes": [-5], "medium": "CPU_PINNED"},
        {"type": "AllBlocksCleared"}], 2])
    mirror = msgspec.msgpack.decode(payload, type=wire_sglang.SGLangKVEventBatch)
    s, r, c = mirror.events
    assert isinstance(s, wire_sglang.SGLangBlockStored) and s.block_hashes == [-5, 7]
    assert s.cache_salt == "s" and s.token_ids == [1, 2]
    assert isinstance(r, wire_sglang.SGLangBlockRemoved) and r.medium == "CPU_PINNED"
    assert isinstance(c, wire_sglang.SGLangAllBlocksCleared)
    ts, events, rank = decode_sglang_lazy(payload)           # the hot path's twins
    assert (ts, rank) == (1.5, 2)
    assert events[0].tokens() == [1, 2] and events[0].first_token() == 1
    assert events[0].group_idx is None and events[1].block_hashes == [-5]


def test_an_sglang_publisher_end_to_end(tmp_path: Path) -> None:
    ep, rep = f"ipc://{tmp_path}/ev.sock", f"ipc://{tmp_path}/replay.sock"
    pub = SyntheticPublisher(ep, replay_endpoint=rep, dialect=Dialect.SGLANG)
    claims = observed(tmp_path, claim_dict("c-salted", cache_salt="s-1"))
    out = tmp_path / "t.jsonl"
    writer = EventWriter(out, source="residentkv.observer", provenance=Provenance(
        "residentkv-observer", __version__, "sglang", "0.5.23"))
    obs = Observer(claims, writer.emit)
    obs.start()
    sub = Subscription([Endpoint(ep, replay=rep, topic=b"kv")], dialect=Dialect.SGLANG,
                       end_budget_s=10)
    stop = threading.Event()
    thread = threading.Thread(target=sub.run, args=(obs, stop), daemon=True)
    thread.start()
    try:
        while not sub.tracker.sources:
            pub.publish([])
            time.sleep(0.05)
        hashes = chain(PREFIX, BS)
        pub.publish([to_sglang(stored(PREFIX, BS), salt="s-2")])     # another tenant's salt
        pub.publish([to_sglang(stored(PREFIX, BS), salt="s-1")])
        pub.publish([to_sglang(removed(hashes[:1]))])
        last = pub.publish([])
        for _ in range(200):
            if any(s.expected > last for s in sub.tracker.sources.values()):
                break
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(20)
        sub.close()
        pub.close()
        writer.close()
    assert gaps(out) == []
    assert len(named(out, "claim_materialized")) == 1
    evicted = named(out, "block_evicted")
    assert [e["position"] for e in evicted] == [0]
    assert evicted[0]["block_hash"] == format(hashes[0], "x")   # two's complement of int64
