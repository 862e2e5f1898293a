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
