"""SimArray behaves like a device array, and the ledger sees every byte."""

import gc
import pickle

import numpy as np
import pytest

from reference_impl.device import DeviceOutOfMemoryError, SimArray, SimDevice


@pytest.fixture
def dev():
    return SimDevice("1 MiB")


def test_empty_counts_bytes_and_returns_them_on_collection(dev):
    a = dev.empty((10, 10), "float32")
    assert isinstance(a, SimArray)
    assert dev.bytes_in_use() == 400
    del a
    assert dev.bytes_in_use() == 0


def test_views_share_their_base_and_count_once(dev):
    a = dev.empty(1000, "int64")
    views = [a[1:10], a[::2], a.reshape(10, 100).T, a.view("int32"), np.reshape(a, (100, 10))]
    assert {dev.allocation_of(v) for v in views} == {dev.allocation_of(a)}
    assert dev.bytes_in_use() == 8000
    del a
    assert dev.bytes_in_use() == 8000  # still alive through the views
    del views
    assert dev.bytes_in_use() == 0


@pytest.mark.parametrize(
    "make",
    [
        lambda x: x + 1,
        lambda x: np.sqrt(x),
        lambda x: x.sum(axis=0),
        lambda x: np.concatenate([x, x]),
        lambda x: x.copy(),
        lambda x: x[[0, 1]],
        lambda x: x.astype("float32"),
        lambda x: x[x > 2],
    ],
    ids=["add", "ufunc", "reduce", "concatenate", "copy", "fancy", "astype", "mask"],
)
def test_new_results_are_allocated_on_the_same_device(dev, make):
    x = dev.asarray(np.arange(12, dtype="float64").reshape(3, 4))
    before = dev.bytes_in_use()
    y = make(x)
    assert isinstance(y, SimArray)
    assert y.device is dev
    assert dev.allocation_of(y) != dev.allocation_of(x)
    assert dev.bytes_in_use() == before + dev.allocation_of(y)[1]
    del y
    assert dev.bytes_in_use() == before


def test_scalar_reductions_are_host_scalars(dev):
    x = dev.asarray(np.arange(10))
    before = dev.bytes_in_use()
    assert x.sum() == 45
    assert dev.bytes_in_use() == before


def test_transfer_counters(dev):
    x = dev.asarray(np.arange(100, dtype="int64"))
    host = dev.to_host(x[:50])
    assert type(host) is np.ndarray
    assert (dev.h2d_bytes, dev.d2h_bytes) == (800, 400)


def test_pickle_round_trips_through_the_device(dev):
    x = dev.asarray(np.arange(64, dtype="int32"))
    y = pickle.loads(pickle.dumps(x, protocol=5))
    assert isinstance(y, SimArray) and y.device is dev
    np.testing.assert_array_equal(y, x)
    assert dev.bytes_in_use() == 2 * 256


def test_pickle_into_a_process_without_the_device_uses_the_default():
    import subprocess
    import sys

    dev = SimDevice("1 MiB")
    payload = pickle.dumps(dev.asarray(np.arange(8)))
    code = (
        "import pickle, sys; from reference_impl.device import default_sim_device;"
        "a = pickle.loads(sys.stdin.buffer.read());"
        "print(type(a).__name__, a.device is default_sim_device(), default_sim_device().bytes_in_use())"
    )
    out = subprocess.run([sys.executable, "-c", code], input=payload, capture_output=True, check=True)
    assert out.stdout.split() == [b"SimArray", b"True", b"64"]


def test_oom_error_names_requested_in_use_and_capacity(dev):
    keep = dev.empty(2**19, "uint8")
    with pytest.raises(DeviceOutOfMemoryError) as info:
        dev.empty(2**19 + 1, "uint8")
    message = str(info.value)
    assert "524,289 bytes" in message and "524,288 bytes in use" in message
    assert "1,048,576-byte capacity" in message
    assert isinstance(info.value, MemoryError)
    assert dev.bytes_in_use() == keep.nbytes


def test_oom_handlers_are_called_with_the_shortfall_and_can_free(dev):
    hoard = [dev.empty(2**18, "uint8") for _ in range(4)]
    calls = []

    def handler(shortfall):
        calls.append(shortfall)
        if hoard:
            hoard.pop()
            return True
        return False

    dev.add_oom_handler(handler)
    extra = dev.empty(2**18 + 10, "uint8")
    # The first free was 10 bytes short, so the handler is asked again for exactly those.
    assert calls == [2**18 + 10, 10]
    assert len(hoard) == 2
    assert dev.bytes_in_use() == 3 * 2**18 + 10
    dev.remove_oom_handler(handler)
    with pytest.raises(KeyError, match="not registered"):
        dev.remove_oom_handler(handler)
    del extra


def test_handlers_that_free_nothing_end_in_a_clear_error(dev):
    keep = dev.empty(2**20, "uint8")
    dev.add_oom_handler(lambda n: False)
    with pytest.raises(DeviceOutOfMemoryError):
        dev.empty(1, "uint8")
    assert dev.bytes_in_use() == keep.nbytes


@pytest.mark.parametrize(
    ("shape", "dtype", "error", "match"),
    [
        (-1, "int8", ValueError, "negative dimensions are not allowed: -1"),
        ((2, -3), "int8", ValueError, r"negative dimensions are not allowed: \(2, -3\)"),
        (3, object, TypeError, "dtype object holds Python objects"),
        (3, "O", TypeError, "holds Python objects"),
        (2.5, "int8", TypeError, "shape entries must be integers"),
        (3, "not-a-dtype", TypeError, "not understood"),
    ],
)
def test_bad_empty_raises_and_leaves_the_ledger_alone(dev, shape, dtype, error, match):
    keep = dev.asarray(np.arange(4))
    before = (dev.bytes_in_use(), dev.live_allocations())
    with pytest.raises(error, match=match):
        dev.empty(shape, dtype)
    assert (dev.bytes_in_use(), dev.live_allocations()) == before
    np.testing.assert_array_equal(keep, [0, 1, 2, 3])


def test_allocation_of_rejects_foreign_arrays(dev):
    other = SimDevice("1 MiB").empty(4)
    with pytest.raises(TypeError, match="is not an array of"):
        dev.allocation_of(other)
    with pytest.raises(TypeError, match="ndarray is not an array of"):
        dev.allocation_of(np.zeros(3))


def test_peak_is_the_high_water_mark(dev):
    a = dev.empty(1000, "uint8")
    b = dev.empty(3000, "uint8")
    del b
    assert dev.peak_bytes() == 4000
    dev.reset_peak()
    assert dev.peak_bytes() == 1000
    del a
    gc.collect()
    assert dev.peak_bytes() == 1000


def test_dask_serialization_keeps_sim_arrays_on_their_device(dev):
    from distributed.protocol import deserialize, serialize

    import reference_impl

    reference_impl.register()  # the lazy hook is set only if distributed came first
    x = dev.asarray(np.arange(10))
    header, frames = serialize(x, serializers=["dask"])
    y = deserialize(header, frames)
    assert isinstance(y, SimArray) and y.device is dev
    np.testing.assert_array_equal(y, np.arange(10))
    assert dev.bytes_in_use() == 160
