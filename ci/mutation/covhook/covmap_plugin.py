"""pytest plugin of a coverage-map run: publishes the running test's node id (setup, call and
teardown) to ``$COVMAP_DIR/current`` for every process's coverage to follow."""

import os

import pytest


def _publish(name: str) -> None:
    path = os.path.join(os.environ["COVMAP_DIR"], "current")
    with open(path + ".tmp", "w") as f:
        f.write(name)
    os.replace(path + ".tmp", path)
    import sitecustomize

    switch = getattr(sitecustomize, "switch", None)
    if switch is not None:
        switch(name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _publish(item.nodeid)
    yield
    _publish("")
