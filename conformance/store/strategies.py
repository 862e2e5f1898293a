"""What users store: hypothesis strategies for values and keys, and exact comparison.

A value is drawn as a *spec* (plain data: dtypes, shapes, layouts, seeds,
containers), so hypothesis can shrink it and the model holds no device memory.
:func:`build` turns a spec into a device value plus everything the model needs
to judge it: the expected host arrays, which allocations it holds and how big
they are, and the host bytes it holds.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import namedtuple
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

# --------------------------------------------------------------------------- dtypes
_NUMERIC = ["b1", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8", "c8", "c16"]
_TIME = ["M8[ns]", "M8[s]", "m8[us]", "m8[D]"]
_MULTIBYTE = {"i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8", "c8", "c16"}


def dtype_names(device_kind: str) -> list[str]:
    """Every numeric dtype; both byte orders where the device can hold them.

    CuPy holds native byte order only, so non-native orders are drawn on sim.
    Non-native datetime64/timedelta64 are left out: numpy's own pickle turns
    ``>m8[us]`` into ``<m8[us]`` (numpy 2.x), which every pickling store inherits.
    """
    names = [f"={d}" if d in _MULTIBYTE else d for d in _NUMERIC] + _TIME
    if device_kind == "sim":
        names += [f">{d}" for d in sorted(_MULTIBYTE)]
    return names


# --------------------------------------------------------------------------- specs
VIEWS = ("none", "step2", "reverse", "transpose", "neg2d", "fortran")


@dataclass(frozen=True)
class ArraySpec:
    """One fresh device allocation of about ``nbytes``, optionally seen through a view."""

    dtype: str
    nbytes: int
    ndim: int
    view: str
    seed: int


@dataclass(frozen=True)
class HostSpec:
    """A host-only object: bytes, a str, an int, or host numpy arrays nested in a list."""

    kind: str
    nbytes: int
    seed: int


@dataclass(frozen=True)
class Dup:
    """The same device object as leaf ``index`` of this value (drawn earlier)."""

    index: int


@dataclass(frozen=True)
class Node:
    """A container: tuple, list, dict, namedtuple or dataclass of children."""

    kind: str
    children: tuple[Any, ...] = field(default_factory=tuple)


Pair = namedtuple("Pair", ["first", "second"])


@dataclass
class Box:
    """A user's dataclass holding device values (stores must look inside it)."""

    first: Any
    second: Any = None


# --------------------------------------------------------------------------- strategies
def array_specs(device_kind: str, sizes: st.SearchStrategy[int]) -> st.SearchStrategy[ArraySpec]:
    return st.builds(
        ArraySpec,
        dtype=st.sampled_from(dtype_names(device_kind)),
        nbytes=sizes,
        ndim=st.sampled_from([1, 1, 2, 0, 3]),
        view=st.sampled_from(VIEWS),
        seed=st.integers(0, 2**32 - 1),
    )


def host_specs() -> st.SearchStrategy[HostSpec]:
    return st.builds(
        HostSpec,
        kind=st.sampled_from(["bytes", "str", "int", "arrays"]),
        nbytes=st.sampled_from([0, 16, 3000, 20_000]),
        seed=st.integers(0, 2**16),
    )


def value_specs(device_kind: str, sizes: st.SearchStrategy[int]) -> st.SearchStrategy[Any]:
    """A bare array most of the time; else containers nested in any mix, with repeats."""
    arrays = array_specs(device_kind, sizes)
    leaves = st.one_of(arrays, arrays, host_specs(), st.builds(Dup, st.integers(0, 3)))

    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(
            st.builds(
                Node, st.sampled_from(["tuple", "list"]), st.lists(children, max_size=4).map(tuple)
            ),
            st.builds(Node, st.just("dict"), st.lists(children, max_size=3).map(tuple)),
            st.builds(
                Node, st.sampled_from(["namedtuple", "dataclass"]), st.tuples(children, children)
            ),
        )

    nested = st.recursive(leaves, extend, max_leaves=6)
    return st.one_of(arrays, arrays, nested)


def str_keys(root: str) -> st.SearchStrategy[str]:
    """Strings, including ones that are paths, collide with other keys' str/repr, or are long."""
    tricky = [
        "a/b", "..", "../..", "../escape", ".", "", " ", "~", "x" * 300, "ünï©ødé-ключ",
        "tab\tnew\nline", "1", "'1'", "('x', 0)", "b'raw'", "True", "None",
        f"{root}/escaped-absolute", "a#0", "%2F", "spill-0",
    ]  # fmt: skip
    text = st.text(
        st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=12
    )
    return st.one_of(st.sampled_from(tricky), text)


def any_keys(root: str) -> st.SearchStrategy[Hashable]:
    """Any hashable dask might use: equal numbers of three types are one key; tuples, bytes."""
    scalars = st.one_of(
        st.sampled_from(
            [0, 1, 1.0, True, False, 0.0, -0.0, 2, 2.0, -1, 2**64, 0.5, None, b"raw", b"1"]
        ),
        st.integers(-(2**70), 2**70),
    )
    tuples = st.tuples(st.sampled_from(["x", "y", ("x", 0)]), st.integers(0, 3))
    return st.one_of(str_keys(root), scalars, tuples, st.tuples(str_keys(root)))


# --------------------------------------------------------------------------- building values
@dataclass
class Built:
    """A device value and what the model must remember about it."""

    value: Any
    expected: Any  # same structure, host numpy arrays at device leaves
    allocs: dict[int, int]  # model allocation id -> bytes
    shared_inside: bool  # one allocation behind two leaves of this value
    host_only: bool
    host_payload: int  # bytes of host buffers inside (a lower bound of its host size)
    leaves: list[Any] = field(default_factory=list)  # device leaves, in draw order
    cut_from_larger: bool = False  # a view smaller than its base allocation
    obj: int = field(default_factory=lambda: next(_obj_ids))  # which object (stored twice: one)


_alloc_ids = itertools.count(1)
_obj_ids = itertools.count(1)


@dataclass(frozen=True)
class DeviceLeaf:
    """The expected content of one device leaf, and the model allocation behind it."""

    host: np.ndarray
    alloc: int
    nbytes: int
    layout: str  # "C" or "F" when the stored array is contiguous that way (2-D and up), else ""


def _shape(n_items: int, ndim: int) -> tuple[int, ...]:
    if ndim == 0:
        return ()
    if ndim == 1 or n_items < 4:
        return (n_items,) if ndim == 1 else (n_items,) + (1,) * (ndim - 1)
    a = max(1, int(round(n_items ** (1 / ndim))))
    rest = max(1, n_items // a ** (ndim - 1))
    return (a,) * (ndim - 1) + (rest,)


def host_array(spec: ArraySpec) -> np.ndarray:
    """The host base array of ``spec`` (C order), with deterministic content."""
    dt = np.dtype(spec.dtype)
    n_items = 1 if spec.ndim == 0 else max(0, spec.nbytes // dt.itemsize)
    shape = _shape(n_items, spec.ndim)
    raw = np.random.default_rng(spec.seed).integers(
        0, 256, int(np.prod(shape)) * dt.itemsize, dtype=np.uint8
    )
    base = raw.view(dt).reshape(shape)
    if dt.kind == "b":
        base = raw.astype(bool).reshape(shape)
    return base


def _apply_view(arr: Any, view: str) -> Any:
    if arr.ndim == 0:
        return arr
    if view == "step2":
        return arr[::2]
    if view == "reverse":
        return arr[::-1]
    if view == "transpose":
        return arr.T
    if view == "neg2d" and arr.ndim >= 2:
        return arr[::-1, ::2]
    return arr


def _fortran(spec: ArraySpec, base: Any) -> bool:
    return spec.view == "fortran" and base.ndim >= 2


def _layout(arr: np.ndarray) -> str:
    if arr.ndim < 2 or arr.size <= 1:
        return ""
    c, f = arr.flags.c_contiguous, arr.flags.f_contiguous
    return "C" if c and not f else "F" if f and not c else ""


def build(spec: Any, device: Any) -> Built:
    """Materialize ``spec`` on ``device``."""
    builder = _Builder(device)
    value, expected = builder.make(spec)
    leaves = builder.leaves
    return Built(
        value=value,
        expected=expected,
        allocs={leaf.alloc: leaf.nbytes for _v, leaf in leaves},
        shared_inside=builder.shared,
        host_only=not leaves,
        host_payload=builder.host_payload,
        leaves=[v for v, _leaf in leaves],
        cut_from_larger=any(leaf.host.nbytes != leaf.nbytes for _v, leaf in leaves),
    )


class _Builder:
    """Builds one value. A class, not a recursive closure: a closure that calls itself is a
    reference cycle, and one holding device leaves keeps their bytes alive until the next
    garbage collection, after the store under test has long released them."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self.leaves: list[tuple[Any, DeviceLeaf]] = []
        self.shared = False
        self.host_payload = 0

    def make(self, s: Any) -> tuple[Any, Any]:
        if isinstance(s, ArraySpec):
            return self.array(s)
        if isinstance(s, Dup):
            if not self.leaves:
                return self.make(HostSpec("int", 0, s.index))
            self.shared = True
            return self.leaves[s.index % len(self.leaves)]
        if isinstance(s, HostSpec):
            obj = host_object(s)
            self.host_payload += host_payload(obj)
            return obj, obj
        parts = [self.make(c) for c in s.children]
        return wrap(s.kind, [p[0] for p in parts]), wrap(s.kind, [p[1] for p in parts])

    def array(self, s: ArraySpec) -> tuple[Any, DeviceLeaf]:
        base = host_array(s)
        if _fortran(s, base):  # an F-contiguous allocation of the same shape
            dev = self.device.asarray(np.ascontiguousarray(base.T)).T
            base = np.asfortranarray(base)
        else:
            dev = self.device.asarray(base)
        value = _apply_view(dev, s.view)
        seen = _apply_view(base, s.view)
        leaf = DeviceLeaf(
            np.array(seen, copy=True, order="K"), next(_alloc_ids), int(dev.nbytes), _layout(seen)
        )
        self.leaves.append((value, leaf))
        return value, leaf


def wrap(kind: str, items: list[Any]) -> Any:
    if kind == "tuple":
        return tuple(items)
    if kind == "list":
        return list(items)
    if kind == "dict":
        return {f"f{i}": v for i, v in enumerate(items)}
    if kind == "namedtuple":
        return Pair(*items)
    return Box(*items)


def host_object(spec: HostSpec) -> Any:
    rng = np.random.default_rng(spec.seed)
    if spec.kind == "bytes":
        return rng.integers(0, 256, spec.nbytes, dtype=np.uint8).tobytes()
    if spec.kind == "str":
        return "s" * spec.nbytes
    if spec.kind == "int":
        return int(spec.seed)
    # nested host arrays: a shallow size (of the list alone) would miss almost all of it
    return [[rng.integers(0, 256, spec.nbytes // 4, dtype=np.uint8)] for _ in range(4)]


def host_payload(obj: Any) -> int:
    if isinstance(obj, bytes | str):
        return len(obj)
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, list):
        return sum(host_payload(o) for o in obj)
    return 0


# --------------------------------------------------------------------------- comparison
def mismatch(device: Any, got: Any, expected: Any, path: str = "value") -> str | None:
    """Why ``got`` differs from ``expected``, or None when they are exactly equal.

    Device leaves must come back as device arrays of the same dtype (byte order
    included), shape and bits, and a C- or F-contiguous array keeps its layout.
    """
    if isinstance(expected, DeviceLeaf):
        try:
            host = device.to_host(got)
        except TypeError:
            return f"{path}: a device array came back as {type(got).__name__}"
        want = expected.host
        if np.dtype(host.dtype) != want.dtype or host.dtype.str != want.dtype.str:
            return f"{path}: dtype {host.dtype.str} != {want.dtype.str}"
        if tuple(host.shape) != want.shape:
            return f"{path}: shape {tuple(host.shape)} != {want.shape}"
        if np.ascontiguousarray(host).tobytes() != np.ascontiguousarray(want).tobytes():
            return f"{path}: content differs ({want.dtype}, shape {want.shape})"
        if expected.layout:
            flags = got.flags
            if not (flags.f_contiguous if expected.layout == "F" else flags.c_contiguous):
                return f"{path}: a {expected.layout}-contiguous array came back in another layout"
        return None
    if isinstance(expected, np.ndarray):
        if not (
            isinstance(got, np.ndarray)
            and got.dtype == expected.dtype
            and np.array_equal(got, expected)
        ):
            return f"{path}: host array differs"
        return None
    if type(got) is not type(expected):
        return f"{path}: {type(expected).__name__} came back as {type(got).__name__}"
    if isinstance(expected, dict):
        if list(got) != list(expected):
            return f"{path}: dict keys {list(got)} != {list(expected)}"
        pairs = [(got[k], expected[k], f"{path}[{k!r}]") for k in expected]
    elif dataclasses.is_dataclass(expected):
        pairs = [
            (getattr(got, f.name), getattr(expected, f.name), f"{path}.{f.name}")
            for f in dataclasses.fields(expected)
        ]
    elif isinstance(expected, list | tuple):
        if len(got) != len(expected):
            return f"{path}: length {len(got)} != {len(expected)}"
        pairs = [(g, e, f"{path}[{i}]") for i, (g, e) in enumerate(zip(got, expected, strict=True))]
    else:
        return None if got == expected else f"{path}: {got!r:.60} != {expected!r:.60}"
    for g, e, p in pairs:
        why = mismatch(device, g, e, p)
        if why:
            return why
    return None
