"""The conformance pytest plugin (entry point ``pytest11: conformance``).

It owns every option, marker, profile and fixture of the suite, so both
``pytest conformance --impl=...`` and ``pytest --pyargs conformance --impl=...``
work. It is inert for runs that collect no conformance test: it loads nothing,
parametrizes nothing and prints nothing unless ``--impl`` is given or a test
carrying a ``conformance_id`` marker is collected.

Each job is a module of :mod:`conformance.runner`, loaded here as a plugin of its own,
each before the modules that import it (pytest warns of a plugin module already imported).
"""

pytest_plugins = [
    "conformance.runner.options",
    "conformance.runner.draws",
    "conformance.runner.deviations",
    "conformance.runner.environment",
    "conformance.runner.collection",
    "conformance.runner.fixtures",
    "conformance.runner.summary",
    "conformance.runner.heap",
]
