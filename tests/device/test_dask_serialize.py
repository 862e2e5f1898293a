"""A SimArray through distributed's "dask" serialization family stays on its device.

The serializers are defined once, in ``reference_impl/device/sim_comms.py``; the
dask-cuda conformance adapter uses the same registration.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from distributed.protocol import deserialize, serialize
from distributed.protocol.serialize import dask_deserialize, dask_serialize

from reference_impl.device import SimArray, SimDevice, default_sim_device

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True, scope="module")
def _registered():
    """What a process using the reference does: dask learns the reference's types only by
    ``register()`` or through the lazy hook, and the hook is set only where distributed was
    imported before ``reference_impl`` (this file alone: passes; after tests/device's other
    modules imported the reference first: 5 failures, 2026-12-07)."""
    import reference_impl

    reference_impl.register()


@pytest.fixture
def dev():
    return SimDevice("1 MiB")


def _round_trip(x):
    header, frames = serialize(x, serializers=("dask",), on_error="raise")
    assert header["serializer"] == "dask"
    return deserialize(header, frames)


def test_round_trip_comes_back_on_the_same_device_through_the_ledger(dev):
    a = dev.asarray(np.arange(100, dtype="float64"))
    d2h = dev.d2h_bytes
    b = _round_trip(a)
    assert dev.d2h_bytes - d2h == a.nbytes  # frames are a counted d2h copy
    assert isinstance(b, SimArray) and b.device is dev
    assert dev.allocation_of(b) != dev.allocation_of(a)  # a new allocation
    assert dev.bytes_in_use() == 2 * a.nbytes
    np.testing.assert_array_equal(b.view(np.ndarray), a.view(np.ndarray))


def test_non_contiguous_and_0d_values(dev):
    base = dev.asarray(np.arange(60, dtype=">i4").reshape(6, 10))
    for a in (base[::2, ::-3], base.T, dev.asarray(np.float32(7.5))):
        b = _round_trip(a)
        assert b.device is dev and b.dtype == a.dtype and b.shape == a.shape
        np.testing.assert_array_equal(b.view(np.ndarray), a.view(np.ndarray))


def test_detached_sim_array_comes_back_as_host_data():
    a = np.arange(5).view(SimArray)
    assert a.device is None
    b = _round_trip(a)
    assert type(b) is np.ndarray
    np.testing.assert_array_equal(b, np.arange(5))


def test_unknown_device_token_lands_on_the_default_device(dev):
    header, frames = serialize(dev.asarray(np.ones(4)), serializers=("dask",))
    header["sub-header"]["device_token"] = "sim-not-in-this-process"
    b = deserialize(header, frames)
    assert b.device is default_sim_device()


def test_one_registration_in_one_place():
    ser, de = dask_serialize.dispatch(SimArray), dask_deserialize.dispatch(SimArray)
    assert ser.__module__ == de.__module__ == "reference_impl.device.sim_comms"
    needle = "serialize.register(" + "SimArray)"  # split, so this file does not match
    sites = [
        p.relative_to(REPO).as_posix()
        for root in ("reference_impl", "conformance", "tests")
        for p in (REPO / root).rglob("*.py")
        if needle in p.read_text(encoding="utf-8")
    ]
    assert sites == ["reference_impl/device/sim_comms.py"], sites
