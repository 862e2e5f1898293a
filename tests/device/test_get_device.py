import pytest

from reference_impl.device import (
    CudaDevice,
    Device,
    DeviceUnavailableError,
    SimDevice,
    cuda_available,
    get_device,
)


def test_sim_device_satisfies_the_protocol():
    assert isinstance(SimDevice("1 MiB"), Device)


def test_auto_picks_cuda_only_where_a_gpu_is_seen():
    device = get_device("auto", "1 MiB")
    assert device.kind == ("cuda" if cuda_available() else "sim")


def test_sim_capacity_is_parsed():
    assert get_device("sim", "2 KiB").capacity == 2048


def test_unknown_kind_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown device kind 'tpu'; expected one of auto, sim, cuda"):
        get_device("tpu")


@pytest.mark.skipif(cuda_available(), reason="this machine has a GPU")
def test_cuda_device_fails_only_when_used_without_a_gpu():
    with pytest.raises(DeviceUnavailableError, match="CuPy"):
        CudaDevice()
    with pytest.raises(DeviceUnavailableError):
        get_device("cuda")


def test_a_default_device_is_what_auto_returns_until_it_is_unset():
    from reference_impl.device import default_device, default_sim_device, set_default_device

    dev = SimDevice("1 MiB")
    assert set_default_device(dev) is None
    try:
        assert get_device("auto") is dev and default_device() is dev
        assert default_sim_device() is dev  # where arrays from other processes land
        assert get_device("auto", "1 MiB") is not dev  # an explicit capacity: a new device
        assert get_device("sim") is not dev  # "sim" always makes one
    finally:
        assert set_default_device(None) is dev
    assert default_device() is None and default_sim_device() is not dev
    with pytest.raises(TypeError, match="expected a Device or None, got str"):
        set_default_device("sim")
