"""ProxyObject transparency and pickling (also of a managed proxy)."""

from __future__ import annotations

import operator
import pickle

import numpy as np
import pytest

from conftest import NB
from reference_impl import ProxyObject, SimArray


@pytest.fixture
def pair(arr, make_store):
    s = make_store()
    raw = arr(3)
    raw.view(np.ndarray)[:] = np.arange(NB // 8)
    s["k"] = raw.copy()
    return s, s["k"], raw


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize(
    "op",
    [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
     operator.mod, operator.pow, operator.lt, operator.le, operator.eq, operator.ne,
     operator.gt, operator.ge],
)  # fmt: skip
def test_binary_and_reflected_operators(pair, op):
    _, p, raw = pair
    np.testing.assert_array_equal(np.asarray(op(p, 2)), np.asarray(op(raw, 2)))
    np.testing.assert_array_equal(np.asarray(op(2, p + 1)), np.asarray(op(2, raw + 1)))
    np.testing.assert_array_equal(np.asarray(op(p, raw)), np.asarray(op(raw, raw)))


def test_unary_inplace_and_protocols(pair):
    s, p, raw = pair
    assert isinstance(p, SimArray) and type(p) is ProxyObject
    np.testing.assert_array_equal(np.asarray(-p), -np.asarray(raw))
    np.testing.assert_array_equal(np.asarray(abs(-p)), np.asarray(raw))
    assert len(p) == NB // 8 and p[3] == 3
    np.testing.assert_array_equal(np.asarray(np.add(p, p)), 2 * np.asarray(raw))  # ufunc
    assert float(np.sum(p)) == float(np.sum(raw))  # __array_function__
    assert isinstance(np.concatenate([p, p]), SimArray)  # stays on device
    q = p
    q += 1
    assert q is p and float(p[0]) == 1
    p[0] = 42
    assert float(s["k"][0]) == 42
    assert not hasattr(p, "__cuda_array_interface__")
    with pytest.raises(AttributeError):
        p.no_such_attribute  # noqa: B018


def test_probing_a_spilled_proxy_for_the_cuda_interface_leaves_it_spilled(arr, make_store):
    """The property raises AttributeError for a non-CUDA object, and Python then asks
    ``__getattr__``: that fallback must answer no too, not bring the value back to ask it."""
    s = make_store(device_memory_limit=NB, memory_limit=2 * NB + 400)
    s["a"] = arr(1)
    pa = s["a"]
    s["b"] = arr(2)
    before = s.snapshot()
    assert before.tiers == {"a": "host", "b": "device"}
    assert not hasattr(pa, "__cuda_array_interface__")
    assert s.snapshot() == before

def test_pickle_managed_proxy_on_each_tier(arr, make_store):
    s = make_store(device_memory_limit=NB, memory_limit=NB + 200)
    s["a"] = arr(1)
    pa = s["a"]
    for k, v in (("b", 2), ("c", 3)):
        s[k] = arr(v)
    pb = s["b"]
    s["c"]
    tiers = s.snapshot().tiers
    assert tiers == {"a": "disk", "b": "host", "c": "device"}
    for proxy, expect in ((pa, 1), (pb, 2), (s["c"], 3)):
        before = s.snapshot()
        back = pickle.loads(pickle.dumps(proxy, protocol=5))
        assert s.snapshot() == before  # pickling neither unspills nor touches recency
        assert type(back) is ProxyObject and isinstance(back, SimArray)
        assert float(back[0]) == expect
        back2 = pickle.loads(pickle.dumps(proxy, protocol=4))
        assert float(back2[0]) == expect


def test_unmanaged_proxy_can_be_stored(dev, arr, make_store):
    s = make_store()
    s["a"] = arr(1)
    back = pickle.loads(pickle.dumps(s["a"]))
    s2 = make_store()
    s2["x"] = back
    assert s2.snapshot().device_bytes == NB


def test_cached_metadata_is_shared_per_shape_and_dtype_and_bounded(dev, make_store):
    """Proxies of one shape and dtype share one metadata dict; each still answers its own."""
    from reference_impl.store import dispatch  # private: the cache's bound

    s = make_store()
    s["a"] = dev.empty(6, "float64")
    s["b"] = dev.empty(6, "float64")
    s["c"] = dev.empty((2, 3), "float32")
    a, b, c = s["a"], s["b"], s["c"]
    assert (a.shape, a.nbytes, len(a), a.dtype) == ((6,), 48, 6, np.dtype("float64"))
    assert (c.shape, c.nbytes, len(c), c.dtype, c.ndim) == ((2, 3), 24, 2, np.dtype("float32"), 2)
    assert dispatch.ARRAY.metadata(a) is dispatch.ARRAY.metadata(b)
    assert dispatch.ARRAY.metadata(a) is not dispatch.ARRAY.metadata(c)
    for n in range(dispatch._ARRAY_META_MAX + 10):
        dispatch.ARRAY.metadata(np.empty((n, 1), "int8"))
    assert len(dispatch._array_meta) <= dispatch._ARRAY_META_MAX
    assert (a.shape, a.nbytes) == ((6,), 48)  # a proxy keeps its dict after a clear
