"""The row hash and partition-id rule, written once for every target.

Every function in the "element functions" section below is plain Python over
numpy scalars.  ``cpu.py`` compiles them with ``numba.njit`` and ``cuda.py``
with ``numba.cuda.jit(device=True)`` through :func:`compile_functions`, so the
CPU and GPU kernels share the same source and give the same partition ids
by construction.  Other implementations can match the ids bit for bit by
following this specification.

Specification (all arithmetic is on uint64 and wraps modulo 2**64)
------------------------------------------------------------------
1. **Canonical bits** of one key element, ``bits(x)``:

   - signed integers (int8..int64), datetime64 and timedelta64 (their int64
     value, NaT included): the value sign-extended to int64, reinterpreted as
     uint64.  ``int8(-1)`` and ``int64(-1)`` therefore hash equally.
   - unsigned integers (uint8..uint64) and bool (0/1): zero-extended.
   - float64: the IEEE-754 bits, except ``-0.0 -> 0`` (the bits of ``+0.0``)
     and every NaN -> ``0x7FF8000000000000``.
   - float32: the 32-bit IEEE-754 bits zero-extended, except ``-0.0 -> 0``
     and every NaN -> ``0x7FC00000``.  (float32 and float64 keys of equal
     value do *not* hash equally; cast keys to one dtype first if needed.)

2. **Element hash**: ``e = mix64(bits(x))`` where ``mix64`` is the
   splitmix64 output function::

       z = x + 0x9E3779B97F4A7C15
       z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
       z = (z ^ (z >> 27)) * 0x94D049BB133111EB
       mix64(x) = z ^ (z >> 31)

   A null (validity mask False) has the fixed element hash
   ``NULL_HASH = 0x5851F42D4C957F2D`` whatever the stored value.

3. **Row hash**: start from ``h = SEED = 0`` and fold the key columns left
   to right with the 64-bit boost ``hash_combine``::

       combine(h, e) = h ^ (e + 0x9E3779B97F4A7C15 + (h << 6) + (h >> 2))

   (one key column: ``h = e + 0x9E3779B97F4A7C15``).  Column order matters.

   A **string** key (Arrow layout: row ``i`` is the bytes
   ``chars[offsets[i]:offsets[i+1]]``, utf8 or any bytes) has the element
   hash ``e = hash_string(b)`` of its ``L`` bytes ``b``::

       h = mix64(L)
       for k in range(ceil(L / 8)):          # 8-byte words, in order
           w = b[8k : 8k+8] read as a little-endian uint64, zero-padded
           h = mix64(h ^ w)
       hash_string(b) = h

   The length goes in first, so ``"a"`` and ``"a\\0"`` differ; the empty
   string hashes to ``mix64(0)``.  Only the bytes count: where the row sits
   in ``chars`` (sliced arrays, shared buffers) never changes its hash.  A
   null string gets ``NULL_HASH`` like any other null.

   Worked example: ``"héllo"`` is the bytes ``68 c3 a9 6c 6c 6f`` (L = 6);
   ``mix64(6) = 0xBD64A5D9ADEFE000``; its one word is
   ``0x00006F6C6CA9C368``; ``e = mix64(0xBD64CAB5C1462368) =
   0x0DDF4F6C7DEC068B``.  As the only key its row hash is
   ``0xAC16C925FD3682A0`` and its partition of 16 is 10 (README.md has a
   two-word example and a two-key one; a test checks them all).

4. **Partition id** for ``n`` partitions (``1 <= n < 2**31``): the
   multiply-shift range reduction of the high 32 bits ("fastrange"), which
   avoids a 64-bit division on both targets::

       pid(h, n) = ((h >> 32) * n) >> 32          # in [0, n)

The bits of floats are read by viewing the column as uint32/uint64, which is
free on both targets, so the element functions never reinterpret scalars.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

SEED = np.uint64(0)
NULL_HASH = np.uint64(0x5851F42D4C957F2D)
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MIX_M1 = np.uint64(0xBF58476D1CE4E5B9)
MIX_M2 = np.uint64(0x94D049BB133111EB)
F64_NAN = np.uint64(0x7FF8000000000000)
F64_EXP = np.uint64(0x7FF0000000000000)
F64_MAN = np.uint64(0x000FFFFFFFFFFFFF)
F64_NEG0 = np.uint64(0x8000000000000000)
F32_NAN = np.uint64(0x7FC00000)
F32_EXP = np.uint64(0x7F800000)
F32_MAN = np.uint64(0x007FFFFF)
F32_NEG0 = np.uint64(0x80000000)
U0 = np.uint64(0)
S2 = np.uint64(2)
S6 = np.uint64(6)
S27 = np.uint64(27)
S30 = np.uint64(30)
S31 = np.uint64(31)
S32 = np.uint64(32)
S8 = np.uint64(8)
S16 = np.uint64(16)
S24 = np.uint64(24)
S40 = np.uint64(40)
S48 = np.uint64(48)
S56 = np.uint64(56)
U1, U2, U3, U4, U5, U6, U7 = (np.uint64(k) for k in range(1, 8))


# --- element functions: plain Python, compiled for CPU and CUDA -------------
def mix64(x):
    """splitmix64 output function: a bijective 64-bit finalizer."""
    z = x + GOLDEN
    z = (z ^ (z >> S30)) * MIX_M1
    z = (z ^ (z >> S27)) * MIX_M2
    return z ^ (z >> S31)


def bits_signed(x):
    """Signed ints / datetimes: sign-extend to int64, reinterpret as uint64."""
    return np.uint64(np.int64(x))


def bits_unsigned(x):
    """Unsigned ints / bool: zero-extend."""
    return np.uint64(x)


def bits_f64(b):
    """float64 given as its uint64 bits: -0.0 -> +0.0, every NaN -> one NaN."""
    b = np.uint64(b)
    if (b & F64_EXP) == F64_EXP and (b & F64_MAN) != U0:
        return F64_NAN
    if b == F64_NEG0:
        return U0
    return b


def bits_f32(b):
    """float32 given as its uint32 bits: -0.0 -> +0.0, every NaN -> one NaN."""
    b = np.uint64(b)
    if (b & F32_EXP) == F32_EXP and (b & F32_MAN) != U0:
        return F32_NAN
    if b == F32_NEG0:
        return U0
    return b


def combine(h, e):
    """64-bit boost hash_combine: folds one element hash into a row hash."""
    return h ^ (e + GOLDEN + (h << S6) + (h >> S2))


def pid(h, n):
    """Partition id in [0, n): multiply-shift of the high 32 bits."""
    return np.int32(((h >> S32) * np.uint64(n)) >> S32)


def load8(chars, p):
    """The 8 bytes ``chars[p:p+8]`` as a little-endian uint64 (any alignment).

    Unsigned indices: no negative-index wraparound, so LLVM fuses the eight
    byte loads into one load on the CPU."""
    q = np.uint64(p)
    return (np.uint64(chars[q]) | (np.uint64(chars[q + U1]) << S8)
            | (np.uint64(chars[q + U2]) << S16) | (np.uint64(chars[q + U3]) << S24)
            | (np.uint64(chars[q + U4]) << S32) | (np.uint64(chars[q + U5]) << S40)
            | (np.uint64(chars[q + U6]) << S48) | (np.uint64(chars[q + U7]) << S56))


def _make_load_tail(ld8):
    def load_tail(chars, p, stop):
        """The 1..7 bytes ``chars[p:stop]`` as a little-endian uint64, zero-padded.

        Where 8 bytes from ``p`` still lie inside ``chars`` it reads one word
        and masks off the bytes past ``stop`` (same bits, no byte loop)."""
        if p + 8 <= chars.shape[0]:
            return ld8(chars, p) & ((U1 << (np.uint64(stop - p) * S8)) - U1)
        w = U0
        s = U0
        for q in range(p, stop):
            w |= np.uint64(chars[np.uint64(q)]) << s
            s += S8
        return w

    return load_tail


def _make_hash_string(mix, ld8, ldtail):
    def hash_string(offsets, chars, i):
        """Element hash of string row ``i``: ``mix64(L)``, then one ``mix64(h ^ w)``
        per 8-byte little-endian word (the last one zero-padded)."""
        start = np.int64(offsets[i])
        stop = np.int64(offsets[i + 1])
        h = mix(np.uint64(stop - start))
        p = start
        while p + 8 <= stop:
            h = mix(h ^ ld8(chars, p))
            p += 8
        if p < stop:
            h = mix(h ^ ldtail(chars, p, stop))
        return h

    return hash_string


def _make_string_step(hs, comb):
    def step(h, offsets, chars, valid, has_valid, i):
        e = NULL_HASH if has_valid and valid[i] == 0 else hs(offsets, chars, i)
        return comb(h, e)

    return step


# Element kinds: how a column's (possibly re-viewed) values become bits.
KIND_BITS: dict[str, Callable[[Any], Any]] = {
    "i": bits_signed,
    "u": bits_unsigned,
    "f4": bits_f32,
    "f8": bits_f64,
}
#: "h": the column already holds combined row hashes (uint64), used as is.
#: "s": a string column (``Strings``: offsets + chars), hashed by ``hash_string``.
KINDS = (*KIND_BITS, "h", "s")


def key_kind(dtype: np.dtype) -> tuple[str, np.dtype] | None:
    """``(kind, view dtype)`` for a supported key dtype, else ``None``.

    Columns are re-viewed (zero-copy) so the kernels only see integers:
    floats as their raw bits, bool as uint8, datetimes as int64.
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return "u", np.dtype(np.uint8)
    if dtype.kind == "i" and dtype.itemsize in (1, 2, 4, 8):
        return "i", dtype
    if dtype.kind == "u" and dtype.itemsize in (1, 2, 4, 8):
        return "u", dtype
    if dtype.kind in "mM":
        return "i", np.dtype(np.int64)
    if dtype == np.float32:
        return "f4", np.dtype(np.uint32)
    if dtype == np.float64:
        return "f8", np.dtype(np.uint64)
    return None


class Compiled:
    """The element functions compiled with one ``jit`` decorator.

    ``step[kind](h, col, valid, has_valid, i)`` folds element ``i`` of a
    column into the running row hash ``h`` (kind ``"h"`` returns ``col[i]``).
    ``string_step(h, offsets, chars, valid, has_valid, i)`` does the same for
    row ``i`` of a string column; ``hash_string(offsets, chars, i)`` is its
    element hash.
    """

    def __init__(self, jit: Callable[[Callable], Any],
                 string_jit: Callable[[Callable], Any] | None = None):
        self.mix64 = jit(mix64)
        self.combine = jit(combine)
        self.pid = jit(pid)
        self.step = {kind: jit(_make_step(jit(fn), self.mix64, self.combine))
                     for kind, fn in KIND_BITS.items()}
        self.step["h"] = jit(_step_hash)
        sj = string_jit or jit
        mix = sj(mix64)
        self.load8 = sj(load8)
        self.hash_string = sj(_make_hash_string(mix, self.load8, sj(_make_load_tail(self.load8))))
        #: ``string_step(h, offsets, chars, valid, has_valid, i)``: kind "s"
        self.string_step = sj(_make_string_step(self.hash_string, sj(combine)))


def _make_step(bits, mix, comb):
    def step(h, col, valid, has_valid, i):
        e = NULL_HASH if has_valid and valid[i] == 0 else mix(bits(col[i]))
        return comb(h, e)

    return step


def _step_hash(h, col, valid, has_valid, i):
    return np.uint64(col[i])


def compile_functions(jit: Callable[[Callable], Any],
                      string_jit: Callable[[Callable], Any] | None = None) -> Compiled:
    """Compile the element functions with ``jit`` (``numba.njit`` or
    ``numba.cuda.jit(device=True)``).

    ``string_jit`` (default ``jit``) compiles the string functions: the CPU
    passes ``njit(inline="always")``, because array arguments of functions
    inlined only by LLVM keep an atomic reference-count update per call
    inside the row loop, which tripled the cost of the string hash."""
    return Compiled(jit, string_jit)


# --- a vectorised numpy twin, for tests and for other implementations -------
def _mix_numpy(x: np.ndarray) -> np.ndarray:
    z = x + GOLDEN
    z = (z ^ (z >> S30)) * MIX_M1
    z = (z ^ (z >> S27)) * MIX_M2
    return z ^ (z >> S31)


def hash_strings_numpy(offsets: np.ndarray, chars: np.ndarray) -> np.ndarray:
    """``hash_string`` of every row, vectorised over rows (one step per word index).

    Rows are visited longest first, so word ``k`` touches only the rows that
    have one: the work is the total word count, not rows x longest row.
    """
    off = np.asarray(offsets).astype(np.int64)
    chars = np.asarray(chars).view(np.uint8)
    start, stop = off[:-1], off[1:]
    length = stop - start
    with np.errstate(over="ignore"):
        h = _mix_numpy(length.astype(np.uint64))
        nwords = (length + 7) // 8
        order = np.argsort(-nwords, kind="stable")
        have = np.searchsorted(-nwords[order], -np.arange(int(nwords.max(initial=0))),
                               side="left")  # have[k]: rows with more than k words
        padded = np.concatenate([chars, np.zeros(8, np.uint8)])
        for k, m in enumerate(have.tolist()):
            rows = order[:m]
            base = start[rows] + 8 * k
            left = stop[rows] - base
            w = np.zeros(m, np.uint64)
            for b in range(8):
                byte = np.where(left > b, padded[base + b], 0).astype(np.uint64)
                w |= byte << np.uint64(8 * b)
            h[rows] = _mix_numpy(h[rows] ^ w)
    return h


def hash_bytes(data: bytes) -> int:
    """``hash_string`` of one byte string, in pure Python (the spec, executable)."""
    m = (1 << 64) - 1

    def mix(x: int) -> int:
        z = (x + int(GOLDEN)) & m
        z = ((z ^ (z >> 30)) * int(MIX_M1)) & m
        z = ((z ^ (z >> 27)) * int(MIX_M2)) & m
        return z ^ (z >> 31)

    h = mix(len(data))
    for k in range(0, len(data), 8):
        h = mix(h ^ int.from_bytes(data[k:k + 8], "little"))
    return h


def hash_numpy(keys: list[Any], valid: list[np.ndarray | None] | None = None) -> np.ndarray:
    """The row hash computed with plain numpy (slow path; the reference).

    ``keys`` holds numpy arrays and, for string keys, ``Strings`` of numpy
    ``offsets`` and ``chars``.
    """
    n = len(keys[0])
    h = np.full(n, SEED, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k, col in enumerate(keys):
            if hasattr(col, "chars"):  # Strings
                e = hash_strings_numpy(col.offsets, col.chars)
                m = None if valid is None else valid[k]
                if m is not None:
                    e = np.where(np.asarray(m, dtype=bool), e, NULL_HASH)
                h = h ^ (e + GOLDEN + (h << S6) + (h >> S2))
                continue
            kind, view = key_kind(col.dtype)
            v = np.ascontiguousarray(col).view(view)
            if kind == "i":
                b = v.astype(np.int64).view(np.uint64)
            elif kind == "u":
                b = v.astype(np.uint64)
            else:
                b = v.astype(np.uint64)
                exp, man, nan, neg0 = ((F64_EXP, F64_MAN, F64_NAN, F64_NEG0) if kind == "f8"
                                       else (F32_EXP, F32_MAN, F32_NAN, F32_NEG0))
                b = np.where(((b & exp) == exp) & ((b & man) != U0), nan, b)
                b = np.where(b == neg0, U0, b)
            z = b + GOLDEN
            z = (z ^ (z >> S30)) * MIX_M1
            z = (z ^ (z >> S27)) * MIX_M2
            e = z ^ (z >> S31)
            m = None if valid is None else valid[k]
            if m is not None:
                e = np.where(np.asarray(m, dtype=bool), e, NULL_HASH)
            h = h ^ (e + GOLDEN + (h << S6) + (h >> S2))
    return h


def pid_numpy(h: np.ndarray, n: int) -> np.ndarray:
    """Partition ids from row hashes with plain numpy."""
    return (((h >> S32) * np.uint64(n)) >> S32).astype(np.int32)
