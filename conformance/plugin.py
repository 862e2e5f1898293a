"""Deprecated name of the conformance pytest plugin, now :mod:`conformance.runner.plugin`
(the ``pytest11`` entry point ``conformance``); ``-p conformance.plugin`` still loads it."""

import warnings

warnings.warn(
    "conformance.plugin moved to conformance.runner.plugin", DeprecationWarning, stacklevel=2
)

pytest_plugins = ["conformance.runner.plugin"]
