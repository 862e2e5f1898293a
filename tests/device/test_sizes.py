import pytest

from reference_impl.device import SimDevice, parse_bytes


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2 GiB", 2 * 2**30), ("512MB", 512 * 10**6), ("1.5 KiB", 1536), (4096, 4096), ("10", 10)],
)
def test_parse_bytes_accepts_common_spellings(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("bad", [-1, "-5 MB", "lots", "2 GiBs", "", None, True, 1.5])
def test_parse_bytes_rejects_bad_input(bad):
    with pytest.raises(ValueError, match="capacity"):
        parse_bytes(bad, what="capacity")


def test_zero_needs_allow_zero():
    assert parse_bytes(0, allow_zero=True) == 0
    with pytest.raises(ValueError, match="must be positive, got 0"):
        parse_bytes(0)


@pytest.mark.parametrize("bad", [0, -1, "-1 GiB", "many bytes", "0 MB"])
def test_device_capacity_rejects_bad_values(bad):
    with pytest.raises(ValueError, match="device capacity"):
        SimDevice(bad)
