"""CPU twins of the partition kernels (``numba.njit(parallel=True)``).

The rows are cut into ``nchunks`` contiguous chunks (one per thread).  Pass 1
hashes the keys of each chunk, writes the partition ids and a per-chunk
histogram.  A tiny serial scan turns the histograms into per-(chunk,
partition) write positions.  Pass 2 scatters the columns, all columns of one
width (up to ``MAX_FUSED``) in one pass: every chunk walks its rows in order
and writes at its own cursors, so the output is stable (the order of a stable
argsort by partition id) without any atomics.

A string column (``Strings``: offsets + chars) is hashed by its own kernel
into a row-hash column, and scattered in two passes of its own: a per-chunk
byte histogram (scanned, like the row histogram, into the byte position
where each (chunk, partition) run starts), then one pass that writes each
row's new offset and copies its bytes, at both cursors.

``partition_by_ids`` (given ids, a destination column) replaces pass 1 with
``dest_hist``, the histogram alone; the scan and pass 2 are the same code.

The kernels receive plain ``numpy.ndarray`` views; every buffer they write is
allocated by the caller through the device, so the ledger sees every byte.
"""

from __future__ import annotations

from contextlib import contextmanager

import numba
import numpy as np
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from .hashing import SEED, compile_functions
from .jitcache import njit_cached
from .strings import Strings

# The element functions are only ever called from the kernels below, which are cached with
# their callees inlined, so they need no cache of their own.  (They are closures over other
# dispatchers: numba keys a closure's cache entry by pickling its cells, and a pickled
# dispatcher differs in every process, so ``cache=True`` here would only add a dead entry
# per process.)
F = compile_functions(njit(nogil=True),
                      string_jit=njit(nogil=True, inline="always"))

#: The key kind (``hashing.KINDS``) travels to the kernels as the numba *type* of a scalar
#: tag, so that one module-level, cacheable kernel serves every kind: numba compiles (and
#: caches) one specialisation per (tag type, column dtype), and ``step`` picks the element
#: rule at compile time.  ``None`` stands for "h": the column already holds row hashes.
TAGS = {"i": np.int64(0), "u": np.uint64(0), "f4": np.float32(0), "f8": np.float64(0),
        "h": None}


def step(tag, h, col, valid, has_valid, i):
    """``F.step[kind]`` for the kind ``tag`` stands for; jitted code only."""
    raise NotImplementedError("step is resolved by numba at compile time")


def _kind_of(tag) -> str:
    if isinstance(tag, (types.NoneType, types.Omitted)):
        return "h"
    if isinstance(tag, types.Float):
        return "f4" if tag.bitwidth == 32 else "f8"
    if isinstance(tag, types.Integer):
        return "i" if tag.signed else "u"
    raise TypeError(f"no key kind for tag type {tag}")


@overload(step, inline="always")
def _step_overload(tag, h, col, valid, has_valid, i):
    fn = F.step[_kind_of(tag)]

    def impl(tag, h, col, valid, has_valid, i):
        return fn(h, col, valid, has_valid, i)

    return impl


PARALLEL_MIN_ROWS = 1 << 16  # below this, one thread: waking workers costs more than it saves


@contextmanager
def threads_for(nrows: int):
    """Run small inputs on the calling thread only (``set_num_threads`` is per thread)."""
    if nrows >= PARALLEL_MIN_ROWS:
        yield
        return
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(before)


def chunk_bounds(nrows: int) -> np.ndarray:
    """Contiguous chunk boundaries, one chunk per thread (fewer for tiny inputs)."""
    nchunks = max(1, min(numba.get_num_threads(), nrows // 16384))
    return np.linspace(0, nrows, nchunks + 1).astype(np.int64)


@njit_cached(parallel=True, nogil=True)
def hash_step(tag, col, valid, has_valid, h, first):
    """``h[i] = combine(h[i] or SEED, e(col[i]))`` for one key column of kind ``tag``."""
    for i in prange(col.shape[0]):
        h0 = SEED if first else h[i]
        h[i] = step(tag, h0, col, valid, has_valid, i)


_string_step = F.string_step
_pid = F.pid


@njit_cached(parallel=True, nogil=True)
def hash_string_kernel(offsets, chars, valid, has_valid, h, first):
    """``h[i] = combine(h[i] or SEED, hash_string(row i))`` for one string column."""
    step = _string_step
    for i in prange(offsets.shape[0] - 1):
        h0 = SEED if first else h[i]
        h[i] = step(h0, offsets, chars, valid, has_valid, i)


@njit_cached(nogil=True)
def first_bad_offset(offsets):
    """-1 if ``offsets`` is non-decreasing from a non-negative start; -2 if the
    start is negative; else the first ``i`` with ``offsets[i] > offsets[i+1]``."""
    if offsets.shape[0] and offsets[0] < 0:
        return -2
    for i in range(offsets.shape[0] - 1):
        if offsets[i] > offsets[i + 1]:
            return i
    return -1


BLOCK = 4096  # rows hashed (vectorised) before their histogram update; stays in L1/L2


@njit_cached(nogil=True)
def _ids_block(tag, col, valid, has_valid, n, ids, row):
    for i in range(col.shape[0]):
        ids[i] = _pid(step(tag, SEED, col, valid, has_valid, i), n)
    for i in range(ids.shape[0]):
        row[ids[i]] += 1


@njit_cached(parallel=True, nogil=True)
def ids_hist(tag, col, valid, has_valid, n, ids, hist, bounds):
    """Pass 1: partition id of each row, plus a histogram per chunk.

    With tag ``None`` (kind ``"h"``) the column holds finished row hashes
    (several keys); otherwise it is the single key column and hashing is fused
    in.  Each chunk hashes a block of rows into ``ids`` (a loop LLVM
    vectorises, with views sliced so indices start at 0), then counts that
    block while it is still in cache.
    """
    for c in prange(bounds.shape[0] - 1):
        row = hist[c]
        for p in range(n):
            row[p] = 0
        for lo in range(bounds[c], bounds[c + 1], BLOCK):
            hi = min(lo + BLOCK, bounds[c + 1])
            vb = valid[lo:hi] if has_valid else valid
            _ids_block(tag, col[lo:hi], vb, has_valid, n, ids[lo:hi], row)


@njit_cached(parallel=True, nogil=True)
def dest_hist(ids, n, hist, bounds):
    """Pass 1 of ``partition_by_ids``: the ids are given (checked to lie in
    ``[0, n)``), so only the per-chunk histogram is built."""
    for c in prange(bounds.shape[0] - 1):
        row = hist[c]
        for p in range(n):
            row[p] = 0
        for i in range(bounds[c], bounds[c + 1]):
            row[ids[i]] += 1


@njit_cached(nogil=True)
def first_bad_id(ids, hi):
    """-1 if every id is at most ``hi``, else the first row whose id is not.

    ``ids`` is the unsigned view of the ids and ``hi`` a scalar of its dtype, so
    one unsigned compare tests ``0 <= id <= hi`` (a negative id reads as a huge
    one).  Each block of ``BLOCK`` rows is reduced to its maximum, a loop LLVM
    vectorises; only a block holding a bad id is searched row by row."""
    nrows = ids.shape[0]
    for start in range(0, nrows, BLOCK):
        block = ids[start:min(start + BLOCK, nrows)]  # a view indexed from 0: vectorises
        top = block[0]
        for i in range(block.shape[0]):
            v = block[i]
            top = v if v > top else top
        if top > hi:
            for i in range(block.shape[0]):
                if block[i] > hi:
                    return start + i
    return -1


@njit_cached(parallel=True, nogil=True)
def ids_only(tag, col, valid, has_valid, n, ids):
    """Partition ids only (no histogram), for ``partition_ids``."""
    for i in prange(col.shape[0]):
        ids[i] = _pid(step(tag, SEED, col, valid, has_valid, i), n)


@njit_cached(nogil=True)
def scan_kernel(hist, counts, offsets):
    """Histograms -> counts, exclusive offsets (length n+1) and, in place,
    the start position of every (chunk, partition)."""
    nchunks, n = hist.shape
    total = 0
    for p in range(n):
        offsets[p] = total
        for c in range(nchunks):
            k = hist[c, p]
            hist[c, p] = total
            total += k
        counts[p] = total - offsets[p]
    offsets[n] = total


@njit_cached(parallel=True, nogil=True)
def byte_hist_kernel(ids, offsets, bounds, bpos):
    """Bytes of a string column per (chunk, partition), into ``bpos``."""
    for c in prange(bounds.shape[0] - 1):
        row = bpos[c]
        for p in range(row.shape[0]):
            row[p] = 0
        for i in range(bounds[c], bounds[c + 1]):
            row[ids[i]] += offsets[i + 1] - offsets[i]


@njit_cached(nogil=True)
def starts_kernel(hist):
    """In place: the exclusive scan of ``hist`` in (partition, chunk) order, the
    order the rows are laid out in; returns the total."""
    nchunks, n = hist.shape
    total = 0
    for p in range(n):
        for c in range(nchunks):
            k = hist[c, p]
            hist[c, p] = total
            total += k
    return total


@intrinsic
def _copy_bytes(typingctx, dst, dst_at, src, src_at, nbytes):
    """``dst[dst_at:dst_at+nbytes] = src[src_at:src_at+nbytes]`` as one ``memcpy``
    (1-D uint8 arrays, no bounds checks): half the time of a byte loop for
    16-byte strings, whose variable trip count mispredicts on every row."""
    sig = types.void(dst, types.intp, src, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        d, d_at, s, s_at, n = args
        dary = context.make_array(signature.args[0])(context, builder, d)
        sary = context.make_array(signature.args[2])(context, builder, s)
        cgutils.raw_memcpy(builder, builder.gep(dary.data, [d_at]),
                           builder.gep(sary.data, [s_at]), n, 1)

    return sig, codegen


@njit_cached(nogil=True)
def _scatter_strings_chunk(ids, cur, bcur, lo, hi, offsets, chars, out_off, out_chars):
    for i in range(lo, hi):
        p = ids[i]
        j = cur[p]
        b = bcur[p]
        s = offsets[i]
        length = offsets[i + 1] - s
        out_off[j] = b
        _copy_bytes(out_chars, b, chars, s, length)
        cur[p] = j + 1
        bcur[p] = b + length


@njit_cached(parallel=True, nogil=True)
def scatter_strings_kernel(ids, pos, bpos, bounds, offsets, chars, out_off, out_chars):
    """Pass 2 for one string column: row ``i`` gets offset ``bpos[c, p]`` at row
    ``pos[c, p]`` and its bytes copied there; both cursors are consumed.  The
    last offset (the total) is the caller's to write."""
    for c in prange(bounds.shape[0] - 1):
        _scatter_strings_chunk(ids, pos[c], bpos[c], bounds[c], bounds[c + 1],
                               offsets, chars, out_off, out_chars)


MAX_FUSED = 4  # columns of one width scattered per pass (one read of the ids serves them all)


@njit_cached(nogil=True)
def _scatter_direct(ids, cur, lo, hi, ncols, s0, d0, s1, d1, s2, d2, s3, d3):
    # ``ncols`` is loop-invariant, so the branches are unswitched out of the loop.
    # The cursor of the current run of equal ids stays in a register: skewed
    # keys (long runs into one partition) then skip the store-to-load chain
    # through ``cur``.
    if lo >= hi:
        return
    run = ids[lo]
    j = cur[run]
    for i in range(lo, hi):
        p = ids[i]
        if p != run:
            cur[run] = j
            run = p
            j = cur[p]
        d0[j] = s0[i]
        if ncols > 1:
            d1[j] = s1[i]
        if ncols > 2:
            d2[j] = s2[i]
        if ncols > 3:
            d3[j] = s3[i]
        j += 1
    cur[run] = j


@njit_cached(parallel=True, nogil=True)
def scatter_kernel(ids, pos, bounds, ncols, s0, d0, s1, d1, s2, d2, s3, d3):
    """Pass 2 for up to 4 columns of one width (unused slots: empty arrays).

    Chunk ``c`` starts writing partition ``p`` at ``pos[c, p]`` (``pos`` is
    consumed as the cursor), so chunks never collide and rows keep their input
    order within a partition.
    """
    for c in prange(bounds.shape[0] - 1):
        _scatter_direct(ids, pos[c], bounds[c], bounds[c + 1], ncols,
                        s0, d0, s1, d1, s2, d2, s3, d3)


def _np(arr):
    """Plain zero-copy ndarray view for the jitted functions."""
    return arr.view(np.ndarray)


class Driver:
    """Runs the CPU kernels on a sim device; every output comes from ``device.empty``."""

    def __init__(self, device):
        self.device = device
        self._no_mask = device.empty(0, np.uint8)

    def _mask(self, m):
        return (_np(self._no_mask), False) if m is None else (_np(m), True)

    def hash_columns(self, cols, kinds, masks):
        with threads_for(len(cols[0])):
            return self._hash_columns(cols, kinds, masks)

    def ids(self, cols, kinds, masks, n):
        with threads_for(len(cols[0])):
            return self._ids(cols, kinds, masks, n)

    def partition(self, cols, kinds, masks, columns, n, out=None, ids_out=None,
                  string_bytes=None):
        with threads_for(len(cols[0])):
            counted = self.ids_counts(cols, kinds, masks, n, ids_out)
            return self._scatter(*counted, columns, out, string_bytes or {})

    def partition_by_ids(self, ids, columns, n, out=None, string_bytes=None):
        """Given ids (checked, any of ``api._IDS_VIEW``'s dtypes): count, then the
        same scan and scatter as ``partition``; ``(counts, offsets, out)``."""
        with threads_for(len(ids)):
            counted = self.dest_counts(ids, n)
            _, counts, offsets, out = self._scatter(*counted, columns, out, string_bytes or {})
            return counts, offsets, out

    def _hash_columns(self, cols, kinds, masks):
        nrows = len(cols[0])
        h = self.device.empty(nrows, np.uint64)
        for k, (col, kind, m) in enumerate(zip(cols, kinds, masks, strict=True)):
            mask, has = self._mask(m)
            if kind == "s":
                hash_string_kernel(_np(col.offsets), _np(col.chars), mask, has, _np(h), k == 0)
            else:
                hash_step(TAGS[kind], _np(col), mask, has, _np(h), k == 0)
        return h

    def _source(self, cols, kinds, masks):
        """One column to compute ids from: the key itself, or the folded row hash
        (several keys, or a string key)."""
        if len(cols) == 1 and kinds[0] != "s":
            mask, has = self._mask(masks[0])
            return cols[0], kinds[0], mask, has
        return self._hash_columns(cols, kinds, masks), "h", _np(self._no_mask), False

    def _ids(self, cols, kinds, masks, n):
        ids = self.device.empty(len(cols[0]), np.int32)
        src, kind, mask, has = self._source(cols, kinds, masks)
        ids_only(TAGS[kind], _np(src), mask, has, n, _np(ids))
        return ids

    def ids_counts(self, cols, kinds, masks, n, ids_out=None):
        """Pass 1 + scan: ``(ids, counts, offsets, (pos, bounds))``, where
        ``pos[chunk, p]`` is the row where ``chunk`` starts writing partition ``p``."""
        nrows = len(cols[0])
        ids = self.device.empty(nrows, np.int32) if ids_out is None else ids_out

        def hist(pos, bounds):
            src, kind, mask, has = self._source(cols, kinds, masks)
            ids_hist(TAGS[kind], _np(src), mask, has, n, _np(ids), _np(pos), bounds)

        return (ids, *self._counts(nrows, n, hist))

    def dest_counts(self, ids, n):
        """``ids_counts`` for given ids: the histogram only, then the same scan."""
        return (ids, *self._counts(len(ids), n, lambda pos, bounds: dest_hist(_np(ids), n, _np(pos), bounds)))

    def _counts(self, nrows, n, hist):
        """Pass 1 (``hist(pos, bounds)`` fills the per-chunk histogram) and the scan:
        ``(counts, offsets, (pos, bounds))``."""
        dev = self.device
        bounds = chunk_bounds(nrows)
        pos = dev.empty((len(bounds) - 1, n), np.int64)
        counts = dev.empty(n, np.int64)
        offsets = dev.empty(n + 1, np.int64)
        hist(pos, bounds)
        scan_kernel(_np(pos), _np(counts), _np(offsets))
        return counts, offsets, (pos, bounds)

    def _scatter(self, ids, counts, offsets, scan, columns, out, string_bytes):
        """Pass 2: every column scattered by ``ids`` at the cursors ``scan`` holds."""
        dev = self.device
        pos, bounds = scan
        if out is None:
            out = [Strings(dev.empty(len(c) + 1, c.offsets.dtype),
                           dev.empty(string_bytes[i], np.uint8))
                   if isinstance(c, Strings) else dev.empty(len(c), c.dtype)
                   for i, c in enumerate(columns)]
        else:
            out = list(out)
        uids, upos = _np(ids), _np(pos)
        fixed = [i for i, c in enumerate(columns) if not isinstance(c, Strings)]
        strings = [i for i, c in enumerate(columns) if isinstance(c, Strings)]
        src = {i: _np(columns[i]).view(_uint_view(columns[i].dtype)) for i in fixed}
        dst = {i: _np(out[i]).view(_uint_view(out[i].dtype)) for i in fixed}
        # Columns of one width go through the ids together, up to MAX_FUSED at a time;
        # each string column is a pass of its own.
        by_width: dict[int, list[int]] = {}
        for i in fixed:
            by_width.setdefault(src[i].dtype.itemsize, []).append(i)
        groups = [idx[k:k + MAX_FUSED] for idx in by_width.values()
                  for k in range(0, len(idx), MAX_FUSED)]
        passes = [("s", i) for i in strings] + [("f", g) for g in groups]
        for k, (what, arg) in enumerate(passes):
            # the cursors are consumed: every pass but the last works on a copy
            if k == len(passes) - 1:
                cur = upos
            else:
                cursor = dev.empty(pos.shape, np.int64)
                cur = _np(cursor)
                cur[...] = upos
            if what == "s":
                self._scatter_strings(uids, cur, bounds, columns[arg], out[arg])
                continue
            idx = arg
            dtype = src[idx[0]].dtype
            none = np.empty(0, dtype)
            args = []
            for j in range(MAX_FUSED):
                args += [src[idx[j]], dst[idx[j]]] if j < len(idx) else [none, none]
            scatter_kernel(uids, cur, bounds, len(idx), *args)
        return ids, counts, offsets, out

    def _scatter_strings(self, ids, cur, bounds, col, out):
        bpos = self.device.empty(cur.shape, np.int64)
        offsets, out_off = _np(col.offsets), _np(out.offsets)
        byte_hist_kernel(ids, offsets, bounds, _np(bpos))
        total = starts_kernel(_np(bpos))
        scatter_strings_kernel(ids, cur, _np(bpos), bounds, offsets, _np(col.chars),
                               out_off, _np(out.chars))
        out_off[len(out_off) - 1] = total


def _uint_view(dtype):
    return {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]
