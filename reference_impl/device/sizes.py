"""Parse byte sizes such as ``"2 GiB"`` or ``"512MB"`` strictly.

dask's ``parse_bytes`` accepts floats and negative numbers silently; limits are
safety rails, so a typo must be an error rather than a surprising value.
"""

from __future__ import annotations

import re

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
}
_PATTERN = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_bytes(value: int | str, *, what: str = "size", allow_zero: bool = False) -> int:
    """Return ``value`` as a non-negative number of bytes.

    ``what`` names the setting in the error message so the user knows which
    argument was wrong.
    """
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a byte count or a string like '2 GiB', got {value!r}")
    if isinstance(value, int):
        nbytes = value
    elif isinstance(value, float) and value.is_integer():
        nbytes = int(value)
    elif isinstance(value, str):
        match = _PATTERN.match(value)
        unit = match.group(2).lower() if match else None
        if match is None or unit not in _UNITS:
            raise ValueError(
                f"{what}: cannot parse {value!r} as a byte size; use an integer or a "
                "string such as '512MB' or '2 GiB'"
            )
        nbytes = int(float(match.group(1)) * _UNITS[unit])
    else:
        raise ValueError(
            f"{what} must be a byte count or a string like '2 GiB', got {type(value).__name__}"
        )
    if nbytes < 0 or (nbytes == 0 and not allow_zero):
        bound = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{what} must be {bound}, got {value!r}")
    return nbytes


def format_bytes(nbytes: int) -> str:
    """Human-readable size for messages and reports."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes} B"
