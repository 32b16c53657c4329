"""One pass per KV block: copy it between vLLM's paged KV cache and a host-tier row, and
XXH3-128 the destination's bytes as they are written.

The host tier's copy followed by a separate digest pass reads every byte twice and cannot beat
about 0.35-0.5 of a plain copy (a copy runs on torch's two threads, XXH3 on one). Here a block
moves in XXH3's own 1 KiB blocks (16 stripes of 64 bytes): the stripes are copied into the
destination, then the destination's stripes are accumulated while they sit in L1. Blocks are
shared out to the threads of the OpenMP runtime torch already runs (its copies use the same
threads), each claiming the next block from an atomic counter, so a descheduled thread never
holds back the rest.

The kernel is LLVM IR compiled at first use by llvmlite (installed with vLLM, through numba),
for this CPU: no compiler and no build step at install time. The digest it writes is XXH3-128
of the destination block's bytes (every layer's block, in layer order), canonical big-endian,
exactly what ``xxhash.xxh3_128_digest`` gives for the same bytes; the tests check that on
random and adversarial contents. Where the kernel or the layout is not available (no llvmlite,
a non-contiguous or non-CPU KV tensor, a layer block not a multiple of 64 bytes) the caller
keeps its two-pass path: :func:`fused_copier` returns ``None``.
"""

from __future__ import annotations

import ctypes
import logging
import os
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from string import Template
from typing import Any

__all__ = ["TEAM_MIN_BYTES", "FusedCopier", "fused_copier", "kernel_available"]

logger = logging.getLogger(__name__)

#: a job moves on one thread below this many bytes: there, waking the team costs about what it
#: saves, and a team waits for its slowest thread on a busy core (bench/host_tier.py on the
#: witness's 128 KiB blocks, 2 cores: one thread ahead at 2 blocks, the team from 4)
TEAM_MIN_BYTES = 512 << 10

#: XXH3's default secret (the xxHash specification); every digest here is seed 0
_SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
    "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364"
    "eac5ac8334d3ebc3c581a0fffa1363eb170ddd51b7f0da49d316552629d4689e"
    "2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e")
_P32_1, _P32_2, _P32_3 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D
_P64_1, _P64_2, _P64_3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P64_4, _P64_5, _MX1 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5, 0x165667919E3779F9
#: the accumulators' starting values, lane by lane
_ACC_INIT = (_P32_3, _P64_1, _P64_2, _P64_3, _P64_4, _P32_2, _P64_5, _P32_1)
#: secret offsets: the scramble at the end of each 1 KiB block, the final stripe, the two
#: merges (low and high half)
_SCRAMBLE_AT, _LAST_AT, _MERGE_LOW_AT, _MERGE_HIGH_AT = 128, 121, 11, 117
_STRIPE = 64
_STRIPES_PER_BLOCK = 16


def _i64(value: int) -> str:
    """An unsigned 64-bit constant as LLVM's signed literal."""
    return str(value - (1 << 64) if value >= 1 << 63 else value)


def _vec(values: Sequence[int]) -> str:
    return "<" + ", ".join(f"i64 {_i64(v)}" for v in values) + ">"


#: the 8 accumulators (and 8 lanes of a stripe) as one vector
_V = "<8 x i64>"

# A job: n blocks, block ids[i] of every layer <-> host row slots[i]. Layer l's block b starts
# at lbase[l] + b * lsize[l]; a row holds every layer's block in layer order, rbytes in all,
# slot s starting at rbase + s * rbytes. store != 0: layers -> rows, else rows -> layers.
# Block i's digest goes to out[16 i .. 16 i + 16]; next is the job's shared block counter.
_JOB_FIELDS = (("n", "i64"), ("nl", "i64"), ("lbase", "ptr"), ("lsize", "ptr"),
               ("rbase", "i64"), ("rbytes", "i64"), ("ids", "ptr"), ("slots", "ptr"),
               ("store", "i64"), ("out", "ptr"), ("next", "ptr"))


def _load_fields(*names: str) -> str:
    """IR loading the named job fields from %j into registers of the same names."""
    index = {name: (i, kind) for i, (name, kind) in enumerate(_JOB_FIELDS)}
    return "".join(f"  %{n}.p = getelementptr inbounds %job, ptr %j, i32 0, i32 {index[n][0]}\n"
                   f"  %{n} = load {index[n][1]}, ptr %{n}.p\n" for n in names)


def _whole_block() -> str:
    """IR for one 1 KiB XXH3 block at %sp -> %dp: its 16 stripes copied, then accumulated
    from the destination (still in L1) and scrambled."""
    copy = "".join(f"  %cs{j} = getelementptr inbounds i8, ptr %sp, i64 {_STRIPE * j}\n"
                   f"  %cv{j} = load {_V}, ptr %cs{j}, align 1\n"
                   f"  %cd{j} = getelementptr inbounds i8, ptr %dp, i64 {_STRIPE * j}\n"
                   f"  store {_V} %cv{j}, ptr %cd{j}, align 1\n"
                   for j in range(_STRIPES_PER_BLOCK))
    hashed = "".join(f"  %k{j} = call {_V} @key(i64 {8 * j})\n"
                     f"  %acc{j + 1} = call {_V} @accumulate({_V} %acc{j}, ptr %cd{j}, "
                     f"{_V} %k{j})\n" for j in range(_STRIPES_PER_BLOCK))
    return (copy + f"  %acc0 = load {_V}, ptr %accp\n" + hashed
            + f"  %scr = call {_V} @scramble({_V} %acc{_STRIPES_PER_BLOCK})\n")


def _merge_lanes() -> str:
    """IR folding the 8 lanes of %x pairwise (128-bit products) onto %start, into %r3."""
    lanes = "".join(f"  %x{i} = extractelement {_V} %x, i32 {i}\n" for i in range(8))
    return lanes + "".join(
        f"  %m{i} = call i64 @mulfold(i64 %x{2 * i}, i64 %x{2 * i + 1})\n"
        f"  %r{i} = add i64 {'%start' if i == 0 else f'%r{i - 1}'}, %m{i}\n" for i in range(4))


# The XXH3 steps, the 8 accumulators as one vector: the secret, accumulate one stripe,
# scramble, and the final merge of the accumulators into one half of the digest.
_STEPS = """
@secret = private unnamed_addr constant [192 x i8] c"$secret"

define internal $V @key(i64 %off) alwaysinline {
  %p = getelementptr inbounds i8, ptr @secret, i64 %off
  %k = load $V, ptr %p, align 1
  ret $V %k
}

; acc[i ^ 1] += d[i]; acc[i] += lo32(d[i] ^ k[i]) * hi32(d[i] ^ k[i])
define internal $V @accumulate($V %acc, ptr %p, $V %k) alwaysinline {
  %d = load $V, ptr %p, align 1
  %dk = xor $V %d, %k
  %lo = and $V %dk, $low32
  %hi = lshr $V %dk, $shift32
  %m = mul $V %lo, %hi
  %sw = shufflevector $V %d, $V poison, $swap
  %t = add $V %sw, %m
  %a = add $V %acc, %t
  ret $V %a
}

define internal $V @scramble($V %acc) alwaysinline {
  %s = lshr $V %acc, $shift47
  %x = xor $V %acc, %s
  %k = call $V @key(i64 $scramble_at)
  %y = xor $V %x, %k
  %z = mul $V %y, $prime32_1
  ret $V %z
}

; the 128-bit product of a and b, its halves folded by xor
define internal i64 @mulfold(i64 %a, i64 %b) alwaysinline {
  %wa = zext i64 %a to i128
  %wb = zext i64 %b to i128
  %p = mul i128 %wa, %wb
  %lo = trunc i128 %p to i64
  %ph = lshr i128 %p, 64
  %hi = trunc i128 %ph to i64
  %r = xor i64 %lo, %hi
  ret i64 %r
}

define internal i64 @merge($V %acc, i64 %off, i64 %start) alwaysinline {
  %k = call $V @key(i64 %off)
  %x = xor $V %acc, %k
$merge_lanes  %s1 = lshr i64 %r3, 37
  %h1 = xor i64 %r3, %s1
  %h2 = mul i64 %h1, $mx1
  %s2 = lshr i64 %h2, 32
  %h3 = xor i64 %h2, %s2
  ret i64 %h3
}
"""

# Copy %n stripes from %src to %dst and accumulate the destination's stripes into the block's
# state (accumulators at %accp, stripe index at %idxp). Stripes at index >= %nloop are copied
# but left to the final-stripe step, as XXH3 does with an input's last stripe. Whole XXH3
# blocks take the straight path; a span's other stripes go one at a time.
_SPAN = """
define internal void @copy_span(ptr %accp, ptr %idxp, i64 %nloop, ptr %dst, ptr %src,
                                i64 %n) alwaysinline {
entry:
  br label %head
head:
  %q = phi i64 [0, %entry], [%q1, %next], [%q16, %whole]
  %more = icmp ult i64 %q, %n
  br i1 %more, label %body, label %done
body:
  %idx = load i64, ptr %idxp
  %lane = and i64 %idx, 15
  %at_start = icmp eq i64 %lane, 0
  %q16 = add i64 %q, 16
  %have16 = icmp ule i64 %q16, %n
  %idx16 = add i64 %idx, 16
  %loop16 = icmp ule i64 %idx16, %nloop
  %w1 = and i1 %at_start, %have16
  %w2 = and i1 %w1, %loop16
  %off = shl i64 %q, 6
  %dp = getelementptr inbounds i8, ptr %dst, i64 %off
  %sp = getelementptr inbounds i8, ptr %src, i64 %off
  br i1 %w2, label %whole, label %single
whole:
$whole_block  store $V %scr, ptr %accp
  store i64 %idx16, ptr %idxp
  br label %head
single:
  %sv = load $V, ptr %sp, align 1
  store $V %sv, ptr %dp, align 1
  %inloop = icmp ult i64 %idx, %nloop
  br i1 %inloop, label %acc_one, label %next
acc_one:
  %acc = load $V, ptr %accp
  %koff = shl i64 %lane, 3
  %k = call $V @key(i64 %koff)
  %a = call $V @accumulate($V %acc, ptr %dp, $V %k)
  %last = icmp eq i64 %lane, 15
  br i1 %last, label %scramble_one, label %keep_one
scramble_one:
  %a2 = call $V @scramble($V %a)
  store $V %a2, ptr %accp
  br label %next
keep_one:
  store $V %a, ptr %accp
  br label %next
next:
  %idx1 = add i64 %idx, 1
  store i64 %idx1, ptr %idxp
  %q1 = add i64 %q, 1
  br label %head
done:
  ret void
}
"""

# One block of the job, every layer in order, then its digest; the team's loop; the entry.
_BLOCKS = """
%job = type { $job_types }

define internal void @copy_block(ptr %j, i64 %b) {
entry:
  %accp = alloca $V, align 64
  %idxp = alloca i64
$block_fields  store $V $acc_init, ptr %accp
  store i64 0, ptr %idxp
  %stripes = lshr i64 %rbytes, 6
  %nloop = sub i64 %stripes, 1
  %is_store = icmp ne i64 %store, 0
  %idp = getelementptr inbounds i64, ptr %ids, i64 %b
  %id = load i64, ptr %idp
  %slp = getelementptr inbounds i64, ptr %slots, i64 %b
  %slot = load i64, ptr %slp
  %rowoff = mul i64 %slot, %rbytes
  %row = add i64 %rbase, %rowoff
  br label %layer
layer:
  %l = phi i64 [0, %entry], [%l1, %layer_copy]
  %at = phi i64 [0, %entry], [%at1, %layer_copy]
  %tail = phi ptr [null, %entry], [%tail1, %layer_copy]
  %more = icmp ult i64 %l, %nl
  br i1 %more, label %layer_copy, label %finish
layer_copy:
  %lbp = getelementptr inbounds i64, ptr %lbase, i64 %l
  %lb = load i64, ptr %lbp
  %lsp = getelementptr inbounds i64, ptr %lsize, i64 %l
  %ls = load i64, ptr %lsp
  %segoff = mul i64 %id, %ls
  %seg = add i64 %lb, %segoff
  %rowat = add i64 %row, %at
  %src.i = select i1 %is_store, i64 %seg, i64 %rowat
  %dst.i = select i1 %is_store, i64 %rowat, i64 %seg
  %src = inttoptr i64 %src.i to ptr
  %dst = inttoptr i64 %dst.i to ptr
  %ns = lshr i64 %ls, 6
  call void @copy_span(ptr %accp, ptr %idxp, i64 %nloop, ptr %dst, ptr %src, i64 %ns)
  %tailoff = sub i64 %ls, 64
  %tail1 = getelementptr inbounds i8, ptr %dst, i64 %tailoff
  %l1 = add i64 %l, 1
  %at1 = add i64 %at, %ls
  br label %layer
finish:
  %acc = load $V, ptr %accp
  %klast = call $V @key(i64 $last_at)
  %accf = call $V @accumulate($V %acc, ptr %tail, $V %klast)
  %len1 = mul i64 %rbytes, $prime64_1
  %lo = call i64 @merge($V %accf, i64 $merge_low_at, i64 %len1)
  %len2 = mul i64 %rbytes, $prime64_2
  %nlen2 = xor i64 %len2, -1
  %hi = call i64 @merge($V %accf, i64 $merge_high_at, i64 %nlen2)
  %o = shl i64 %b, 1
  %ohp = getelementptr inbounds i64, ptr %out, i64 %o
  %hib = call i64 @llvm.bswap.i64(i64 %hi)
  store i64 %hib, ptr %ohp, align 1
  %o1 = add i64 %o, 1
  %olp = getelementptr inbounds i64, ptr %out, i64 %o1
  %lob = call i64 @llvm.bswap.i64(i64 %lo)
  store i64 %lob, ptr %olp, align 1
  ret void
}

declare i64 @llvm.bswap.i64(i64)

; one member of the team (or the calling thread alone): claim blocks until none is left
define void @team_member(ptr %j) {
entry:
$member_fields  br label %claim
claim:
  %b = atomicrmw add ptr %next, i64 1 monotonic
  %more = icmp ult i64 %b, %n
  br i1 %more, label %work, label %done
work:
  call void @copy_block(ptr %j, i64 %b)
  br label %claim
done:
  ret void
}

; The entry point: checks every id and slot before anything is copied (-1: out of range),
; then runs the job on this thread, or on a team through libgomp's GOMP_parallel.
define i64 @copy_digest(ptr %j, i64 %nblocks, i64 %nslots, ptr %gomp_parallel,
                        i32 %threads) {
entry:
$entry_fields  br label %check
check:
  %c = phi i64 [0, %entry], [%c1, %in_range]
  %cmore = icmp ult i64 %c, %n
  br i1 %cmore, label %check_one, label %run
check_one:
  %cidp = getelementptr inbounds i64, ptr %ids, i64 %c
  %cid = load i64, ptr %cidp
  %csp = getelementptr inbounds i64, ptr %slots, i64 %c
  %cs = load i64, ptr %csp
  %okid = icmp ult i64 %cid, %nblocks
  %oks = icmp ult i64 %cs, %nslots
  %ok = and i1 %okid, %oks
  %c1 = add i64 %c, 1
  br i1 %ok, label %in_range, label %out_of_range
in_range:
  br label %check
out_of_range:
  ret i64 -1
run:
  store i64 0, ptr %next
  %team = icmp ugt i32 %threads, 1
  %has_gomp = icmp ne ptr %gomp_parallel, null
  %par = and i1 %team, %has_gomp
  br i1 %par, label %parallel, label %serial
serial:
  call void @team_member(ptr %j)
  ret i64 0
parallel:
  call void %gomp_parallel(ptr @team_member, ptr %j, i32 %threads, i32 0)
  ret i64 0
}
"""


def _splat(value: int) -> str:
    return _vec([value] * 8)


#: the kernel's LLVM IR
IR = Template(_STEPS + _SPAN + _BLOCKS).substitute(
    whole_block=_whole_block(),
    merge_lanes=_merge_lanes(),
    block_fields=_load_fields("nl", "lbase", "lsize", "rbase", "rbytes", "ids", "slots",
                              "store", "out"),
    member_fields=_load_fields("n", "next"),
    entry_fields=_load_fields("n", "ids", "slots", "next"),
    job_types=", ".join(kind for _, kind in _JOB_FIELDS),
    secret="".join(f"\\{b:02X}" for b in _SECRET),
    V=_V, low32=_splat(0xFFFFFFFF), shift32=_splat(32), shift47=_splat(47),
    prime32_1=_splat(_P32_1), swap="<8 x i32> <i32 1, i32 0, i32 3, i32 2, i32 5, i32 4, "
                                   "i32 7, i32 6>",
    acc_init=_vec(_ACC_INIT), mx1=_i64(_MX1), prime64_1=_i64(_P64_1), prime64_2=_i64(_P64_2),
    scramble_at=_SCRAMBLE_AT, last_at=_LAST_AT, merge_low_at=_MERGE_LOW_AT,
    merge_high_at=_MERGE_HIGH_AT)


class _Job(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64 if kind == "i64" else ctypes.c_void_p)
                for name, kind in _JOB_FIELDS]


@dataclass(frozen=True)
class _Kernel:
    run: Any  # ctypes function (job*, nblocks, nslots, gomp_parallel, threads) -> int64
    keep: tuple[Any, ...]  # the JIT engine and module the function lives in


def _loaded_gomp_parallel() -> int | None:
    """GOMP_parallel of the OpenMP runtime already in this process (torch's), never a second
    copy loaded here: two runtimes would mean two thread pools on the same cores."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as fh:
            paths = {line.split()[-1] for line in fh if "libgomp" in line or "libiomp5" in line}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            return ctypes.cast(lib.GOMP_parallel, ctypes.c_void_p).value
        except (OSError, AttributeError):
            continue
    return None


class _ScanSafeLib:
    """llvmlite's ``ffi.lib`` behind a plain object with a real ``__dict__``.

    ``ffi.lib`` answers every attribute name with a function wrapper, ``__dict__`` included.
    vLLM (0.32) rebinds its kernels when a worker starts by reading ``vars(value)`` of every
    module attribute that has a ``__dict__``, so once llvmlite is imported in a process every
    engine started after it there fails (``'_lib_fn_wrapper' object has no attribute 'get'``).
    llvmlite reads the module attribute at each call, so this proxy serves it unchanged."""

    def __init__(self, lib: Any) -> None:
        self.wrapped = lib

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


def _scan_safe(ffi: Any) -> None:
    """Put llvmlite's ``ffi.lib`` behind :class:`_ScanSafeLib` (once)."""
    if not isinstance(ffi.lib, _ScanSafeLib):
        ffi.lib = _ScanSafeLib(ffi.lib)


@cache
def _kernel() -> _Kernel | None:
    """The compiled kernel for this CPU, or None (logged once) where llvmlite is missing or
    cannot compile it."""
    try:
        import llvmlite.binding as llvm  # type: ignore[import-untyped]
        from llvmlite.binding import ffi

        _scan_safe(ffi)
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        machine = llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
            opt=3)
        module = llvm.parse_assembly(IR)
        module.triple = machine.triple
        module.data_layout = str(machine.target_data)
        module.verify()
        passes = llvm.create_pass_builder(
            machine, llvm.create_pipeline_tuning_options(speed_level=3, size_level=0))
        passes.getModulePassManager().run(module, passes)
        engine = llvm.create_mcjit_compiler(module, machine)
        engine.finalize_object()
        address = engine.get_function_address("copy_digest")
    except Exception as exc:  # no llvmlite, or an LLVM that refuses: the two-pass path stays
        logger.warning("host tier: fused copy+digest kernel unavailable (%s); copying and "
                       "digesting in two passes", exc)
        return None
    run = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.POINTER(_Job), ctypes.c_int64,
                           ctypes.c_int64, ctypes.c_void_p, ctypes.c_int32)(address)
    return _Kernel(run, (engine, module, machine))


def kernel_available() -> bool:
    """Whether the fused kernel compiles here."""
    return _kernel() is not None


class FusedCopier:
    """Fused copy+digest between one set of per-layer KV tensors and one row pool. Calls are
    serialized by a lock (the job buffers are reused)."""

    def __init__(self, kernel: _Kernel, layers: Sequence[Any], rows: Any) -> None:
        import torch

        self._kernel = kernel
        self._torch = torch
        #: torch's OpenMP runtime (loaded with torch above), whose threads share big jobs
        self.gomp_parallel = _loaded_gomp_parallel()
        self._layers, self._rows = list(layers), rows  # kept alive: the job holds addresses
        self.num_blocks = int(self._layers[0].shape[0])
        self.num_slots, self.row_bytes = int(rows.shape[0]), int(rows.shape[1])
        sizes = [int(t[0].numel() * t.element_size()) for t in self._layers]
        self._lbase = (ctypes.c_int64 * len(sizes))(*(t.data_ptr() for t in self._layers))
        self._lsize = (ctypes.c_int64 * len(sizes))(*sizes)
        self._next = ctypes.c_int64(0)
        self._lock = threading.Lock()
        self._job = _Job(nl=len(sizes), lbase=ctypes.addressof(self._lbase),
                         lsize=ctypes.addressof(self._lsize), rbase=rows.data_ptr(),
                         rbytes=self.row_bytes, next=ctypes.addressof(self._next))
        self._capacity = 0
        self._grow(max(self.num_slots, 1))

    def _grow(self, n: int) -> None:
        self._capacity = n
        self._ids = ctypes.create_string_buffer(8 * n)
        self._slots = ctypes.create_string_buffer(8 * n)
        self._out = ctypes.create_string_buffer(16 * n)
        self._job.ids = ctypes.addressof(self._ids)
        self._job.slots = ctypes.addressof(self._slots)
        self._job.out = ctypes.addressof(self._out)

    def store(self, block_ids: Sequence[int], slots: Sequence[int]) -> bytes:
        """Copy device blocks into host rows; the rows' digests, 16 bytes each, in order."""
        return self._run(block_ids, slots, True)

    def load(self, slots: Sequence[int], block_ids: Sequence[int]) -> bytes:
        """Copy host rows into device blocks; the device blocks' digests, in order."""
        return self._run(block_ids, slots, False)

    def _run(self, block_ids: Sequence[int], slots: Sequence[int], store: bool) -> bytes:
        n = len(block_ids)
        if n != len(slots):
            raise ValueError(f"copy of {n} blocks into {len(slots)} places")
        if n == 0:
            return b""
        threads = 1
        if n > 1 and n * self.row_bytes >= TEAM_MIN_BYTES:
            threads = min(n, self._torch.get_num_threads())
        with self._lock:
            if n > self._capacity:
                self._grow(n)
            fmt = f"<{n}q"
            struct.pack_into(fmt, self._ids, 0, *block_ids)
            struct.pack_into(fmt, self._slots, 0, *slots)
            self._job.n, self._job.store = n, int(store)
            status = self._kernel.run(ctypes.byref(self._job), self.num_blocks, self.num_slots,
                                      self.gomp_parallel, threads)
            if status < 0:
                raise IndexError(f"block ids {list(block_ids)} or slots {list(slots)} out of "
                                 f"range ({self.num_blocks} blocks, {self.num_slots} slots)")
            return ctypes.string_at(self._out, 16 * n)


def fused_copier(kv_caches: dict[str, Any], rows: Any) -> FusedCopier | None:
    """A fused copier for these KV tensors and rows, or None where the layout does not allow
    one: every tensor a contiguous, block-first CPU tensor whose block is a whole number of
    64-byte stripes, rows contiguous CPU bytes holding every layer's block in layer order, a
    row longer than 240 bytes (XXH3's long-input path), and a kernel that compiled."""
    layers = list(kv_caches.values())
    if not layers or rows.device.type != "cpu" or not rows.is_contiguous():
        return None
    sizes = []
    for t in layers:
        if t.device.type != "cpu" or not t.is_contiguous() or t.shape[0] != layers[0].shape[0]:
            return None
        size = int(t[0].numel() * t.element_size())
        if size % _STRIPE:
            return None
        sizes.append(size)
    if sum(sizes) != rows.shape[1] or sum(sizes) <= 240:
        return None
    kernel = _kernel()
    return None if kernel is None else FusedCopier(kernel, layers, rows)
