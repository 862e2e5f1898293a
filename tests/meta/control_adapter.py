"""The reference wrapped exactly like the broken adapters, without a bug (the zoo's control)."""

from broken_adapters import _Broken


class control(_Broken):  # noqa: N801 - a factory name used as --impl=control_adapter:control
    name = "wrapped-reference"
