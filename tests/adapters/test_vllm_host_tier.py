"""The host tier's fused copy+digest pass against the two passes it replaces.

Every fused digest is checked against ``xxhash.xxh3_128_digest`` of the same bytes (what the
two-pass ``seal`` and ``verify`` compute), the copied bytes against their source, and every
verification verdict against the two-pass one: on random and adversarial contents, on layer
blocks that are not a whole number of the pass's 1 KiB chunks, with a single flipped byte
anywhere in a block, on the team of threads and from several Python threads at once. No vLLM
engine here; the witness's real-vLLM scenarios (``corrupted_restore``, ``success_path``) run
the same code in the engine.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
xxhash = pytest.importorskip("xxhash")
pytest.importorskip("llvmlite")

from residentkv.adapters.vllm import fused_copy  # noqa: E402
from residentkv.adapters.vllm.host_tier import HostPool  # noqa: E402

STRIPE = 64


def make_pool(stripes_per_layer: list[int], blocks: int = 6, slots: int = 4,
              seed: int = 0) -> tuple[Any, dict[str, Any]]:
    """A pool over uint8 KV layers whose blocks are the given numbers of 64-byte stripes."""
    gen = torch.Generator().manual_seed(seed)
    kv = {f"layer{n}": torch.randint(0, 256, (blocks, s * STRIPE), dtype=torch.uint8,
                                     generator=gen)
          for n, s in enumerate(stripes_per_layer)}
    return HostPool(kv, num_slots=slots), kv


def block_bytes(kv: dict[str, Any], block: int) -> bytes:
    return b"".join(t[block].contiguous().view(torch.uint8).numpy().tobytes()
                    for t in kv.values())


def row_bytes(pool: Any, slot: int) -> bytes:
    return bytes(pool._rows[slot].numpy().tobytes())


def test_the_fused_pass_is_what_runs_here() -> None:
    # otherwise every test below would compare the two-pass path with itself
    pool, _ = make_pool([16, 16])
    assert fused_copy.kernel_available() and pool._fused is not None


def test_streaming_xxh3_over_chunks_is_the_one_pass_digest() -> None:
    data = bytes(torch.randint(0, 256, (70_001,), dtype=torch.uint8,
                               generator=torch.Generator().manual_seed(1)).numpy())
    whole = xxhash.xxh3_128_digest(data)
    for chunk in (1, 63, 64, 1000, 1024, 4096, 65_536):
        h = xxhash.xxh3_128()
        for at in range(0, len(data), chunk):
            h.update(data[at:at + chunk])
        assert h.digest() == whole, chunk


# layer blocks of 4 .. 40 stripes: sizes around and between the pass's 1 KiB chunks (16
# stripes), rows from 256 bytes (XXH3's long path starts above 240) to several chunks
layouts = st.lists(st.integers(1, 40), min_size=1, max_size=4).filter(lambda s: sum(s) >= 4)


@given(layout=layouts, seed=st.integers(0, 2**16))
def test_fused_digests_equal_the_two_passes_on_random_blocks(layout: list[int],
                                                             seed: int) -> None:
    pool, kv = make_pool(layout, seed=seed)
    ids, slots = [4, 1, 2], [0, 3, 1]
    copied, whole = pool.store_sealed(kv, ids, slots)
    assert copied == 3 * pool.bytes_per_block
    for block, slot in zip(ids, slots, strict=True):
        assert row_bytes(pool, slot) == block_bytes(kv, block)
        assert pool.digests[slot] == xxhash.xxh3_128_digest(block_bytes(kv, block))
    fused_digests = list(pool.digests)
    pool.store(kv, ids, slots)  # the two passes over the same blocks
    assert pool.seal(slots) == whole and pool.digests == fused_digests
    copied, bad = pool.load_verified(kv, slots, [5, 0, 3])
    assert (copied, bad) == (3 * pool.bytes_per_block, [])
    for block, source in zip([5, 0, 3], ids, strict=True):
        assert block_bytes(kv, block) == block_bytes(kv, source)


ADVERSARIAL = {
    "zeros": lambda n: bytes(n),
    "ones": lambda n: b"\xff" * n,
    # the secret itself, stripe-aligned: every lane's data ^ key is 0 in the first stripes
    "secret": lambda n: (fused_copy._SECRET * (n // 192 + 1))[:n],
    # 32-bit halves at their maximum: the largest products, every 64-bit sum wrapping
    "high_halves": lambda n: (b"\x00\x00\x00\x00\xff\xff\xff\xff" * (n // 8 + 1))[:n],
    "alternating": lambda n: (b"\x55\xaa" * (n // 2 + 1))[:n],
    "counting": lambda n: bytes(i % 251 for i in range(n)),
}


@pytest.mark.parametrize("content", sorted(ADVERSARIAL))
@pytest.mark.parametrize("layout", [[4], [5, 3], [16, 16], [17, 15, 1], [33, 40]])
def test_fused_digests_equal_xxhash_on_adversarial_blocks(content: str,
                                                          layout: list[int]) -> None:
    pool, kv = make_pool(layout)
    pattern = ADVERSARIAL[content](pool.bytes_per_block)
    at = 0
    for t in kv.values():
        size = t.shape[1]
        t[2] = torch.frombuffer(bytearray(pattern[at:at + size]), dtype=torch.uint8)
        at += size
    _, whole = pool.store_sealed(kv, [2], [1])
    assert pool.digests[1] == xxhash.xxh3_128_digest(pattern)
    assert whole == xxhash.xxh3_128_digest(xxhash.xxh3_128_digest(pattern))
    assert pool.load_verified(kv, [1], [3]) == (pool.bytes_per_block, [])
    assert block_bytes(kv, 3) == pattern


def test_a_single_flipped_byte_anywhere_fails_only_its_block() -> None:
    layout = [21, 19]  # 2,560 bytes a block: chunks cut across the layer boundary
    pool, kv = make_pool(layout, blocks=8)
    size = pool.bytes_per_block
    positions = sorted({0, 1, 63, 64, 1023, 1024, 21 * STRIPE - 1, 21 * STRIPE, size - 65,
                        size - 64, size - 1, *range(7, size, 97)})
    for position in positions:
        pool.store_sealed(kv, [1, 2, 3], [0, 1, 2])
        pool._rows[1, position] ^= 1 << (position % 8)
        assert pool.load_verified(kv, [0, 1, 2], [5, 6, 7]) == (3 * size, [6]), position
        pool.load(kv, [0, 1, 2], [5, 6, 7])
        assert pool.verify([0, 1, 2], [5, 6, 7]) == [6]  # the two passes say the same


def test_a_slot_without_a_digest_never_verifies() -> None:
    pool, kv = make_pool([16, 16])
    pool.store_sealed(kv, [1, 2], [0, 1])
    pool.store(kv, [3], [1])  # a store voids the digest until it is sealed
    assert pool.load_verified(kv, [0, 1], [4, 5])[1] == [5]


def test_out_of_range_blocks_or_slots_copy_nothing() -> None:
    pool, kv = make_pool([16, 16], blocks=6, slots=4)
    before = pool._rows.clone()
    for ids, slots in (([1, 6], [0, 1]), ([1, 2], [0, 4]), ([-1], [0])):
        with pytest.raises(IndexError):
            pool.store_sealed(kv, ids, slots)
        assert torch.equal(pool._rows, before)
    with pytest.raises(ValueError, match="2 blocks into 1"):
        pool.store_sealed(kv, [1, 2], [0])


def test_a_job_naming_a_slot_or_block_twice_keeps_the_two_pass_result() -> None:
    pool, kv = make_pool([16, 16])
    _, whole = pool.store_sealed(kv, [1, 2], [3, 3])
    assert whole == pool.seal([3, 3]) and pool.digests[3] == xxhash.xxh3_128_digest(
        block_bytes(kv, 2))
    pool.store_sealed(kv, [1, 2], [0, 1])
    for slots in ([0, 1], [1, 0]):  # block 4 ends up holding the last slot's bytes
        fused = pool.load_verified(kv, slots, [4, 4])
        pool.load(kv, slots, [4, 4])
        assert fused == (2 * pool.bytes_per_block, pool.verify(slots, [4, 4])) == (
            2 * pool.bytes_per_block, [4])


def test_other_layouts_keep_the_two_passes() -> None:
    gen = torch.Generator().manual_seed(0)
    strided = {"a": torch.randn(8, 4, 2, 6, generator=gen).permute(3, 2, 1, 0)}
    assert HostPool(strided, num_slots=2)._fused is None
    odd = {"a": torch.randint(0, 256, (6, 100), dtype=torch.uint8)}  # not whole stripes
    pool = HostPool(odd, num_slots=2)
    assert pool._fused is None
    _, whole = pool.store_sealed(odd, [1], [0])
    assert pool.digests[0] == xxhash.xxh3_128_digest(block_bytes(odd, 1))
    assert whole == xxhash.xxh3_128_digest(pool.digests[0])
    assert pool.load_verified(odd, [0], [3]) == (100, [])


def team_pool() -> tuple[Any, dict[str, Any]]:
    pool, kv = make_pool([256, 256], blocks=40, slots=16)  # 32 KiB a block
    if pool._fused.gomp_parallel is None or torch.get_num_threads() < 2:
        pytest.skip("no OpenMP team here (torch without libgomp, or one thread)")
    return pool, kv


def test_the_team_gives_the_digests_of_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    pool, kv = team_pool()
    ids, slots = list(range(3, 19)), list(range(16))
    expected = [xxhash.xxh3_128_digest(block_bytes(kv, b)) for b in ids]
    for team_min in (0, 1 << 60):  # every job on the team, then every job on one thread
        monkeypatch.setattr(fused_copy, "TEAM_MIN_BYTES", team_min)
        for _ in range(20):
            pool.store_sealed(kv, ids, slots)
            assert pool.digests == expected
            assert pool.load_verified(kv, slots, list(range(20, 36)))[1] == []
            assert all(block_bytes(kv, 20 + i) == block_bytes(kv, b) for i, b in enumerate(ids))


def test_python_threads_share_one_pool_safely(monkeypatch: pytest.MonkeyPatch) -> None:
    pool, kv = team_pool()
    monkeypatch.setattr(fused_copy, "TEAM_MIN_BYTES", 0)
    errors: list[str] = []

    def work(k: int) -> None:
        ids, slots = [2 * k, 2 * k + 1], [2 * k, 2 * k + 1]
        want = [xxhash.xxh3_128_digest(block_bytes(kv, b)) for b in ids]
        for _ in range(50):
            raw = pool._fused.store(ids, slots)
            if [raw[:16], raw[16:]] != want:
                errors.append(f"thread {k}: wrong digests")
            if pool._fused.load(slots, [16 + 2 * k, 17 + 2 * k]) != raw:
                errors.append(f"thread {k}: load digests differ")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def worker_facts(fused: bool) -> list[tuple[Any, ...]]:
    """A claimed store, a verified restore, a corrupted verified restore and an out-of-range
    one through the worker role; what it reports, timestamps left out."""
    pytest.importorskip("vllm")
    from residentkv.adapters.vllm.rules import LoadJob, StoreJob
    from residentkv.adapters.vllm.worker import LOCAL_WORKERS, WorkerSide

    gen = torch.Generator().manual_seed(3)
    kv = {f"layer{n}": torch.randn(8, 2, 16, 64, generator=gen) for n in range(2)}
    worker = WorkerSide(num_blocks=8, num_slots=4, bytes_per_block=2 * 8192)
    worker.register_kv_caches(kv)
    LOCAL_WORKERS.remove(worker)
    assert worker.pool is not None and worker.pool._fused is not None
    if not fused:
        worker.pool._fused = None  # the two passes, as before the fused pass
    worker.run_stores([StoreJob(1, "r", "c1", [1, 2, 3], [0, 1, 2], digest=True)])
    load = {"request_id": "r", "claim_id": "c1", "owner_scope": None, "verify": True}
    worker.start_loads([LoadJob(2, block_ids=[5, 6, 7], slots=[0, 1, 2], **load),
                        LoadJob(3, block_ids=[5, 6], slots=[1, 2], corrupt=True, **load),
                        LoadJob(4, block_ids=[5, 9], slots=[1, 2], **load)])
    meta = worker.take_metadata()
    assert meta is not None
    return [(f.kind, f.job_id, f.success, f.nbytes, f.injected, f.invalid_block_ids, f.digest,
             f.verified, f.reason) for f in meta.facts] + [tuple(sorted(worker.load_errors()))]


def test_the_worker_reports_what_the_two_passes_report() -> None:
    fused, two_pass = worker_facts(True), worker_facts(False)
    assert fused[:3] == two_pass[:3] and fused[4] == two_pass[4]
    # a block id past the cache: both fail the load naming the same blocks; the two passes
    # copied into an empty slice without a word and caught it only by the digest, the fused
    # pass refuses the job before copying anything
    assert fused[3][:3] == two_pass[3][:3] and fused[3][5] == two_pass[3][5]
    store, restored, corrupted, out_of_range, errors = fused
    assert store[2] and store[6] is not None
    assert restored[2:] == (True, 3 * 16384, False, [], None, True, None)
    # the corrupted restore is a failed load naming its blocks; vLLM recomputes them
    assert corrupted[2:] == (False, 2 * 16384, True, [5, 6], None, False,
                             corrupted[8]) and corrupted[8].value == "digest_mismatch"
    assert out_of_range[2:5] == (False, 0, False) and out_of_range[5] == [5, 9]
    assert errors == (5, 6, 9)


def test_an_engine_starts_in_a_process_that_compiled_the_kernel() -> None:
    """vLLM rebinds its kernels at each worker start by reading ``vars()`` of every module
    attribute; llvmlite's library object answered ``__dict__`` with a function wrapper, so a
    second in-process engine failed once the kernel was compiled (the full test run found it)."""
    dispatcher = pytest.importorskip("vllm.triton_utils.dispatcher")
    assert fused_copy.kernel_available()
    dispatcher._rebind_kernels([])  # vLLM's own scan over every module's namespace
