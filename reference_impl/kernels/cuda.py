"""CUDA twins of the partition kernels (``numba.cuda``).

Imported lazily by ``api``; nothing touches ``numba.cuda`` until a kernel is
first needed, so this module imports cleanly on a machine without CUDA.

Algorithm (``NB`` blocks, block ``b`` owns the contiguous rows
``[b*R, (b+1)*R)``, which is what makes the scatter stable):

1. ``ids_hist``: hash every row of the block (element functions shared with
   the CPU through ``hashing.compile_functions``), write its partition id, and
   count it in a shared-memory histogram (global atomics when ``n > 4096``).
   The block's histogram is stored partition-major: ``cnt[p * NB + b]``.
2. ``scan``: exclusive scan of ``cnt`` (block-level Hillis-Steele scan of
   tiles, then the tile sums, then a fix-up), so ``pos[p * NB + b]`` is
   where block ``b`` starts writing partition ``p``; ``offsets[p] = pos[p*NB]``.
3. ``rank``: every block walks its rows in tiles of ``TPB`` rows; a row's
   destination is ``cursor[p]`` plus the number of earlier rows of the tile
   with the same partition (counted in shared memory); the last such row
   advances ``cursor[p]``.  Destinations are written to ``dest``.
4. ``scatter``: ``out[dest[i]] = col[i]`` for every column (coalesced reads).

``partition_by_ids`` (given ids, a destination column) runs ``_dest_hist`` as
pass 1, which only counts the ids (copying ids of another width to int32 on the
way); the scan, rank and scatter are the same kernels.

A string column (``Strings``) is hashed by its own kernel into a row-hash
column.  It is scattered after ``rank``, one pass per buffer: each row's
length goes to ``lens[dest[i]]`` (the offsets pass), an exclusive scan of
``lens`` gives the new offsets, and each row's bytes are copied to
``chars_out[new_offsets[dest[i]]:...]`` (the chars pass, one thread a row).

The rank has two variants (:func:`rank_variant`).  On hardware, ``"warp"``:
``match_any_sync`` finds the lanes of a warp with the same partition, a row's
rank in its warp is a popcount, and the tile's 4 warps take their turn at the
cursors (``O(1)`` per row).  Under numba's simulator (``NUMBA_ENABLE_CUDASIM=1``),
which has no warp intrinsics, ``"tile"``: only ``syncthreads``, shared arrays and
atomics, the rank an ``O(TPB)`` count of the tile in shared memory.  Both give
the same destinations, so the simulator tests check the kernels the hardware
runs in every other pass.  Every buffer is allocated through ``device.empty``.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from .hashing import SEED, compile_functions
from .strings import Strings

TPB = 128  # threads per block (and rows per rank tile)
SHARED_MAX = 4096  # partitions that fit the shared-memory histogram / cursor
#: fanouts up to this use the shared-memory kernels, larger ones global memory
#: (tests lower it to exercise the global path at small fanouts)
SHARED_PARTITIONS_LIMIT = SHARED_MAX
MAX_BLOCKS = 1024
SCAN_TPB = 256
WARP = 32
FULL_MASK = np.int32(-1)  # every lane of a warp (0xFFFFFFFF as the int32 numba wants)
#: the in-tile rank: "warp" or "tile", or None to choose by the target (see rank_variant)
RANK_VARIANT: str | None = None


# ``numba.cuda`` is bound here on first use.  Kernels must reach it as a module
# global (not a closure variable): the simulator swaps module globals that
# refer to ``numba.cuda`` for its fake module while a kernel runs.
cuda: Any = None


def _cuda():
    global cuda
    if cuda is None:
        from numba import cuda as numba_cuda

        cuda = numba_cuda
    return cuda


@cache
def _functions():
    _cuda()
    return compile_functions(cuda.jit(device=True))


def _hist_kernel(row_id, write_ids: bool, shared: bool):
    """Pass 1: ``p = row_id(col, valid, has_valid, n, i)`` for every row of the
    block, written to ``ids`` if ``write_ids``, and counted in the block's
    histogram (shared memory, or global atomics when ``not shared``), stored
    as ``cnt[p * NB + b]``."""
    _cuda()
    i32 = np.int32

    if shared:
        @cuda.jit
        def kernel(col, valid, has_valid, n, ids, cnt, rows_per_block):
            nb = cuda.gridDim.x
            b = cuda.blockIdx.x
            t = cuda.threadIdx.x
            hist = cuda.shared.array(SHARED_MAX, dtype=i32)
            for p in range(t, n, cuda.blockDim.x):
                hist[p] = 0
            cuda.syncthreads()
            lo = b * rows_per_block
            hi = min(lo + rows_per_block, col.shape[0])
            for i in range(lo + t, hi, cuda.blockDim.x):
                p = row_id(col, valid, has_valid, n, i)
                if write_ids:
                    ids[i] = p
                cuda.atomic.add(hist, p, 1)
            cuda.syncthreads()
            for p in range(t, n, cuda.blockDim.x):
                cnt[p * nb + b] = hist[p]
    else:
        @cuda.jit
        def kernel(col, valid, has_valid, n, ids, cnt, rows_per_block):
            nb = cuda.gridDim.x
            b = cuda.blockIdx.x
            t = cuda.threadIdx.x
            lo = b * rows_per_block
            hi = min(lo + rows_per_block, col.shape[0])
            for i in range(lo + t, hi, cuda.blockDim.x):
                p = row_id(col, valid, has_valid, n, i)
                if write_ids:
                    ids[i] = p
                cuda.atomic.add(cnt, p * nb + b, 1)

    return kernel


@cache
def _ids_hist(kind: str, shared: bool):
    """Pass 1 of ``partition``: hash each row's key(s) of ``kind`` into its id."""
    _cuda()
    F = _functions()
    step, pid = F.step[kind], F.pid

    @cuda.jit(device=True)
    def hashed_id(col, valid, has_valid, n, i):
        return pid(step(SEED, col, valid, has_valid, i), n)

    return _hist_kernel(hashed_id, True, shared)


@cache
def _dest_hist(write_ids: bool, shared: bool):
    """Pass 1 of ``partition_by_ids``: the ids are given (checked); count them, and
    copy them to int32 ``ids`` if ``write_ids`` (given ids of another width)."""
    _cuda()

    @cuda.jit(device=True)
    def given_id(col, valid, has_valid, n, i):
        return col[i]

    return _hist_kernel(given_id, write_ids, shared)


@cache
def _id_check():
    _cuda()

    @cuda.jit
    def kernel(ids, hi, flag):
        """``flag[0]``: the least ``i`` with ``ids[i] > hi`` (left as is if none);
        ``ids`` unsigned and ``hi`` of its dtype."""
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        for i in range(start, ids.shape[0], stride):
            if ids[i] > hi:
                cuda.atomic.min(flag, 0, i)

    return kernel


def first_bad_id(device: Any, ids: Any, hi: Any) -> int:
    """Like ``cpu.first_bad_id`` for device arrays: -1 if every id (``ids`` the
    unsigned view) is at most ``hi``, else the first row whose id is not.  Uses
    (and frees) 8 bytes of device scratch."""
    n = len(ids)
    if n == 0:
        return -1
    flag = device.empty(1, np.int64)
    flag[0] = n
    blocks = max(1, min(MAX_BLOCKS * 4, -(-n // TPB)))
    _id_check()[blocks, TPB](_raw(ids), hi, _raw(flag))
    _cuda().synchronize()
    first = int(device.to_host(flag)[0])
    del flag
    return -1 if first == n else first


@cache
def _hash_step(kind: str):
    _cuda()
    step = _functions().step[kind]

    @cuda.jit
    def kernel(col, valid, has_valid, h, first):
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        for i in range(start, col.shape[0], stride):
            h0 = SEED if first else h[i]
            h[i] = step(h0, col, valid, has_valid, i)

    return kernel


@cache
def _hash_string_step():
    _cuda()
    step = _functions().string_step

    @cuda.jit
    def kernel(offsets, chars, valid, has_valid, h, first):
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        for i in range(start, offsets.shape[0] - 1, stride):
            h0 = SEED if first else h[i]
            h[i] = step(h0, offsets, chars, valid, has_valid, i)

    return kernel


@cache
def _string_kernels():
    _cuda()

    @cuda.jit
    def lengths(dest, offsets, lens):
        """The offsets pass: ``lens[dest[i]] = length of row i``; ``lens[nrows] = 0``."""
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        nrows = dest.shape[0]
        if start == 0:
            lens[nrows] = 0
        for i in range(start, nrows, stride):
            lens[dest[i]] = offsets[i + 1] - offsets[i]

    @cuda.jit
    def copy_chars(dest, offsets, chars, new_off, out_chars):
        """The chars pass: row ``i``'s bytes to ``out_chars[new_off[dest[i]]:]``."""
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        for i in range(start, dest.shape[0], stride):
            s = offsets[i]
            d = new_off[dest[i]]
            for k in range(offsets[i + 1] - s):
                out_chars[d + k] = chars[s + k]

    @cuda.jit
    def cast(src, dst):
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        for i in range(start, src.shape[0], stride):
            dst[i] = src[i]

    @cuda.jit
    def first_bad(offsets, flag):
        """``flag[0]``: the least ``i`` with ``offsets[i] > offsets[i+1]``
        (left as is if none); ``flag[1] = 1`` if ``offsets[0] < 0``."""
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        if start == 0 and offsets.shape[0] > 0 and offsets[0] < 0:
            flag[1] = 1
        for i in range(start, offsets.shape[0] - 1, stride):
            if offsets[i] > offsets[i + 1]:
                cuda.atomic.min(flag, 0, i)

    return lengths, copy_chars, cast, first_bad


def first_bad_offset(device: Any, offsets: Any) -> int:
    """Like ``cpu.first_bad_offset`` for device arrays: -1 if fine, -2 if the
    first offset is negative, else the first decreasing position.  Uses (and
    frees) 16 bytes of device scratch."""
    n = len(offsets)
    flag = device.empty(2, np.int64)
    flag[0] = n
    flag[1] = 0
    if n > 1:
        blocks = max(1, min(MAX_BLOCKS * 4, -(-n // TPB)))
        _string_kernels()[3][blocks, TPB](_raw(offsets), _raw(flag))
        _cuda().synchronize()
    first, neg = (int(x) for x in device.to_host(flag))
    del flag
    if neg:
        return -2
    return -1 if first == n else first


@cache
def _ids_only(kind: str):
    _cuda()
    F = _functions()
    step, pid = F.step[kind], F.pid

    @cuda.jit
    def kernel(col, valid, has_valid, n, ids):
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        for i in range(start, col.shape[0], stride):
            ids[i] = pid(step(SEED, col, valid, has_valid, i), n)

    return kernel


@cache
def _scan_kernels():
    _cuda()
    i64 = np.int64

    @cuda.jit
    def tile_scan(x, out, sums):
        """Exclusive scan of each SCAN_TPB tile of ``x``; tile totals to ``sums``."""
        tile = cuda.shared.array(SCAN_TPB, dtype=i64)
        t = cuda.threadIdx.x
        i = cuda.blockIdx.x * SCAN_TPB + t
        v = x[i] if i < x.shape[0] else 0
        tile[t] = v
        cuda.syncthreads()
        d = 1
        while d < SCAN_TPB:
            a = tile[t - d] if t >= d else 0
            cuda.syncthreads()
            tile[t] += a
            cuda.syncthreads()
            d *= 2
        if i < x.shape[0]:
            out[i] = tile[t] - v
        if t == SCAN_TPB - 1:
            sums[cuda.blockIdx.x] = tile[t]

    @cuda.jit
    def add_base(out, base):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] += base[i // SCAN_TPB]

    @cuda.jit
    def finish(pos, nb, nrows, counts, offsets):
        p = cuda.grid(1)
        n = counts.shape[0]
        if p < n:
            offsets[p] = pos[p * nb]
        if p == 0:
            offsets[n] = nrows
        if p < n:
            stop = pos[(p + 1) * nb] if p + 1 < n else nrows
            counts[p] = stop - pos[p * nb]

    return tile_scan, add_base, finish


def rank_variant() -> str:
    """The rank kernel to run: ``RANK_VARIANT`` if set, else ``"tile"`` under numba's
    CUDA simulator (it has no ``match_any_sync``) and ``"warp"`` on a GPU."""
    from numba import config

    simulated = bool(config.ENABLE_CUDASIM)
    variant = RANK_VARIANT or ("tile" if simulated else "warp")
    if variant not in ("warp", "tile"):
        raise ValueError(f"RANK_VARIANT must be 'warp', 'tile' or None, got {variant!r}")
    if variant == "warp" and simulated:
        raise RuntimeError("the warp rank needs a GPU: numba's CUDA simulator has no "
                           "match_any_sync; use RANK_VARIANT = 'tile' (or None)")
    return variant


@cache
def _rank(shared: bool, variant: str = "tile"):
    _cuda()
    i32, i64 = np.int32, np.int64

    @cuda.jit(device=True)
    def rank_rows_warp(ids, dest, cur, lo, hi, tile):
        """Warp ``w`` of the tile ranks its rows with one ``match_any_sync`` and takes
        its turn ``w`` at the cursors (``tile`` is unused)."""
        t = cuda.threadIdx.x
        lane = t % WARP
        warp = t // WARP
        below = np.uint32((np.uint64(1) << np.uint64(lane)) - np.uint64(1))
        for base in range(lo, hi, TPB):  # same trip count for the whole block
            i = base + t
            p = ids[i] if i < hi else -1
            peers = np.uint32(cuda.match_any_sync(FULL_MASK, p))
            rank = cuda.popc(peers & below)
            total = cuda.popc(peers)
            for w in range(TPB // WARP):
                if warp == w:
                    d = 0
                    if p >= 0:
                        d = cur[p] + rank
                    cuda.syncwarp(FULL_MASK)  # every lane has read cur before it moves
                    if p >= 0:
                        dest[i] = d
                        if rank == total - 1:
                            cur[p] = d + 1
                cuda.syncthreads()

    @cuda.jit(device=True)
    def rank_rows_tile(ids, dest, cur, lo, hi, tile):
        t = cuda.threadIdx.x
        for base in range(lo, hi, TPB):  # same trip count for the whole block
            i = base + t
            p = ids[i] if i < hi else -1
            tile[t] = p
            cuda.syncthreads()
            rank = 0
            total = 0
            for j in range(TPB):
                if tile[j] == p:
                    total += 1
                    if j < t:
                        rank += 1
            d = 0
            if p >= 0:
                d = cur[p] + rank
                dest[i] = d
            cuda.syncthreads()
            if p >= 0 and rank == total - 1:
                cur[p] = d + 1
            cuda.syncthreads()

    rank_rows = rank_rows_warp if variant == "warp" else rank_rows_tile

    if shared:
        @cuda.jit
        def kernel(ids, pos, dest, rows_per_block, n, cursor):
            nb = cuda.gridDim.x
            b = cuda.blockIdx.x
            t = cuda.threadIdx.x
            cur = cuda.shared.array(SHARED_MAX, dtype=i64)
            tile = cuda.shared.array(TPB, dtype=i32)
            for p in range(t, n, TPB):
                cur[p] = pos[p * nb + b]
            cuda.syncthreads()
            lo = b * rows_per_block
            hi = min(lo + rows_per_block, ids.shape[0])
            rank_rows(ids, dest, cur, lo, hi, tile)
    else:
        @cuda.jit
        def kernel(ids, pos, dest, rows_per_block, n, cursor):
            nb = cuda.gridDim.x
            b = cuda.blockIdx.x
            t = cuda.threadIdx.x
            cur = cursor[b]
            tile = cuda.shared.array(TPB, dtype=i32)
            for p in range(t, n, TPB):
                cur[p] = pos[p * nb + b]
            cuda.syncthreads()
            lo = b * rows_per_block
            hi = min(lo + rows_per_block, ids.shape[0])
            rank_rows(ids, dest, cur, lo, hi, tile)

    return kernel


@cache
def _scatter():
    _cuda()

    @cuda.jit
    def kernel(dest, src, dst):
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        for i in range(start, src.shape[0], stride):
            dst[dest[i]] = src[i]

    return kernel


def _raw(arr: Any) -> Any:
    """What a numba.cuda kernel accepts: CuPy arrays as they are, sim arrays as ndarrays."""
    return arr.view(np.ndarray) if isinstance(arr, np.ndarray) else arr


ROWS_PER_THREAD = 16  # rows each thread hashes in pass 1 (tests lower it to get many blocks)


def _grid(nrows: int) -> tuple[int, int]:
    """(blocks, rows per block): a capped block count keeps the (p, block) table small."""
    nb = max(1, min(MAX_BLOCKS, -(-nrows // (TPB * ROWS_PER_THREAD))))
    return nb, -(-nrows // nb)


class Driver:
    """Runs the CUDA kernels; every buffer comes from ``device.empty``."""

    def __init__(self, device: Any):
        self.device = device
        self._no_mask = device.empty(0, np.uint8)

    def _mask(self, m):
        return (_raw(self._no_mask), False) if m is None else (_raw(m), True)

    @staticmethod
    def _sync():
        _cuda().synchronize()

    def hash_columns(self, cols, kinds, masks):
        nrows = len(cols[0])
        h = self.device.empty(nrows, np.uint64)
        if nrows:
            blocks = max(1, min(MAX_BLOCKS, -(-nrows // TPB)))
            for k, (col, kind, m) in enumerate(zip(cols, kinds, masks, strict=True)):
                mask, has = self._mask(m)
                if kind == "s":
                    _hash_string_step()[blocks, TPB](_raw(col.offsets), _raw(col.chars), mask,
                                                     has, _raw(h), k == 0)
                else:
                    _hash_step(kind)[blocks, TPB](_raw(col), mask, has, _raw(h), k == 0)
            self._sync()
        return h

    def _scan(self, x):
        """Exclusive scan of the int64 device array ``x`` (recursive over tile sums)."""
        tile_scan, add_base, _ = _scan_kernels()
        ntiles = -(-len(x) // SCAN_TPB)
        out = self.device.empty(len(x), np.int64)
        sums = self.device.empty(ntiles, np.int64)
        tile_scan[ntiles, SCAN_TPB](_raw(x), _raw(out), _raw(sums))
        if ntiles > 1:
            base = self._scan(sums)
            add_base[ntiles, SCAN_TPB](_raw(out), _raw(base))
        return out

    def _source(self, cols, kinds, masks):
        """One column to compute ids from: the key itself, or the folded row hash
        (several keys, or a string key)."""
        if len(cols) == 1 and kinds[0] != "s":
            mask, has = self._mask(masks[0])
            return cols[0], kinds[0], mask, has
        return self.hash_columns(cols, kinds, masks), "h", _raw(self._no_mask), False

    def ids(self, cols, kinds, masks, n):
        nrows = len(cols[0])
        ids = self.device.empty(nrows, np.int32)
        if nrows:
            src, kind, mask, has = self._source(cols, kinds, masks)
            blocks = max(1, min(MAX_BLOCKS * 4, -(-nrows // TPB)))
            _ids_only(kind)[blocks, TPB](_raw(src), mask, has, n, _raw(ids))
            self._sync()
        return ids

    def ids_counts(self, cols, kinds, masks, n, ids_out=None):
        nrows = len(cols[0])
        ids = self.device.empty(nrows, np.int32) if ids_out is None else ids_out

        def hist(nb, rpb, cnt, shared):
            src, kind, mask, has = self._source(cols, kinds, masks)
            _ids_hist(kind, shared)[nb, TPB](_raw(src), mask, has, n, _raw(ids), _raw(cnt), rpb)

        return (ids, *self._counts(nrows, n, hist))

    def dest_counts(self, ids, n):
        """``ids_counts`` for given ids (checked, any of ``api._IDS_VIEW``'s dtypes):
        pass 1 only counts them.  Ids of another width than int32 are copied to int32
        scratch on the way, so ``rank`` and ``scatter`` are exactly the kernels the
        hash path runs."""
        nrows = len(ids)
        ids32 = ids if ids.dtype == np.int32 else self.device.empty(nrows, np.int32)

        def hist(nb, rpb, cnt, shared):
            _dest_hist(ids32 is not ids, shared)[nb, TPB](
                _raw(ids), _raw(self._no_mask), False, n, _raw(ids32), _raw(cnt), rpb)

        return (ids32, *self._counts(nrows, n, hist))

    def _counts(self, nrows, n, hist):
        """Run pass 1 (``hist(nb, rpb, cnt, shared)`` fills ``cnt``) and the scan:
        ``(counts, offsets, (pos, (nb, rpb)))``."""
        dev = self.device
        counts = dev.empty(n, np.int64)
        offsets = dev.empty(n + 1, np.int64)
        nb, rpb = _grid(nrows)
        if nrows == 0:
            counts[...] = 0
            offsets[...] = 0
            return counts, offsets, (None, (nb, rpb))
        cnt = dev.empty(n * nb, np.int64)
        shared = n <= min(SHARED_PARTITIONS_LIMIT, SHARED_MAX)
        if not shared:
            cnt[...] = 0
        hist(nb, rpb, cnt, shared)
        pos = self._scan(cnt)
        del cnt
        finish = _scan_kernels()[2]
        finish[-(-n // TPB), TPB](_raw(pos), nb, nrows, _raw(counts), _raw(offsets))
        self._sync()
        return counts, offsets, (pos, (nb, rpb))

    def partition(self, cols, kinds, masks, columns, n, out=None, ids_out=None,
                  string_bytes=None):
        counted = self.ids_counts(cols, kinds, masks, n, ids_out)
        return self._scatter_all(*counted, columns, n, out, string_bytes)

    def partition_by_ids(self, ids, columns, n, out=None, string_bytes=None):
        """Given ids: count them, then the same rank and scatter as ``partition``;
        ``(counts, offsets, out)``."""
        counted = self.dest_counts(ids, n)
        _, counts, offsets, out = self._scatter_all(*counted, columns, n, out, string_bytes)
        return counts, offsets, out

    def _scatter_all(self, ids, counts, offsets, scan, columns, n, out, string_bytes):
        """``rank`` the rows by ``ids`` at the scanned positions, then scatter every column."""
        dev = self.device
        pos, (nb, rpb) = scan
        if out is None:
            out = [Strings(dev.empty(len(c) + 1, c.offsets.dtype),
                           dev.empty((string_bytes or {})[i], np.uint8))
                   if isinstance(c, Strings) else dev.empty(len(c), c.dtype)
                   for i, c in enumerate(columns)]
        else:
            out = list(out)
        nrows = len(ids)
        if nrows == 0:
            for o in out:
                if isinstance(o, Strings):
                    o.offsets[...] = 0
            return ids, counts, offsets, out
        dest = dev.empty(nrows, np.int64)
        shared = n <= min(SHARED_PARTITIONS_LIMIT, SHARED_MAX)
        cursor = dev.empty((1, 1) if shared else (nb, n), np.int64)
        _rank(shared, rank_variant())[nb, TPB](_raw(ids), _raw(pos), _raw(dest), rpb, n, _raw(cursor))
        del pos, cursor
        blocks = max(1, min(MAX_BLOCKS * 4, -(-nrows // TPB)))
        scatter = _scatter()
        for c, o in zip(columns, out, strict=True):
            if isinstance(c, Strings):
                self._scatter_strings(dest, c, o, blocks)
                continue
            width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[c.dtype.itemsize]
            scatter[blocks, TPB](_raw(dest), _raw(c.view(width)), _raw(o.view(width)))
        self._sync()
        return ids, counts, offsets, out

    def _scatter_strings(self, dest, col, out, blocks):
        """One pass over the offsets (lengths to their new rows), a scan, one
        pass over the chars."""
        lengths, copy_chars, cast, _ = _string_kernels()
        lens = self.device.empty(len(dest) + 1, np.int64)
        lengths[blocks, TPB](_raw(dest), _raw(col.offsets), _raw(lens))
        new_off = self._scan(lens)
        del lens
        copy_chars[blocks, TPB](_raw(dest), _raw(col.offsets), _raw(col.chars), _raw(new_off),
                                _raw(out.chars))
        cast[blocks, TPB](_raw(new_off), _raw(out.offsets))
