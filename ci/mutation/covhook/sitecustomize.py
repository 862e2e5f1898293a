"""Line coverage in every process of a coverage-map run, labelled with the running test.

On ``PYTHONPATH`` only while ``covmap.py`` records its map: the pytest process, dask's nannies
and their worker processes all start here. The pytest plugin (``covmap_plugin.py``) writes the
running test's node id to ``$COVMAP_DIR/current``; a thread here follows it, so the lines a
worker runs for a test are recorded under that test even though the cluster is shared. A
forked child gets a data file of its own (sharing the parent's corrupts it).
"""

import os

if os.environ.get("COVMAP_DIR"):
    import atexit
    import threading
    import time
    from multiprocessing import util

    import coverage

    _dir = os.environ["COVMAP_DIR"]
    _lock = threading.Lock()
    _state: dict = {}

    def _read() -> str:
        try:
            with open(os.path.join(_dir, "current")) as f:
                return f.read()
        except OSError:
            return ""

    def _begin() -> None:
        cov = coverage.Coverage(
            data_file=os.path.join(_dir, "cov"),
            data_suffix=True,
            source=os.environ["COVMAP_SOURCE"].split(os.pathsep),
            config_file=False,
        )
        cov.start()
        name = _read()
        cov.switch_context(name)
        _state.update(cov=cov, name=name, stopped=False)
        threading.Thread(target=_follow, args=(cov,), name="covmap-follow", daemon=True).start()

    def _follow(cov) -> None:
        """Switch to the running test's context; every half second switch again to flush
        what was seen (a worker the test kills loses at most that much)."""
        last_flush = time.monotonic()
        while True:
            name = _read()
            with _lock:
                if _state["stopped"] or _state["cov"] is not cov:
                    return
                if name != _state["name"] or time.monotonic() - last_flush > 0.5:
                    cov.switch_context(name)
                    _state["name"] = name
                    last_flush = time.monotonic()
            time.sleep(0.01)

    def switch(name: str) -> None:
        """Switch at once (the pytest process's own test code must not wait for the thread)."""
        with _lock:
            if not _state["stopped"] and name != _state["name"]:
                _state["cov"].switch_context(name)
                _state["name"] = name

    def _save() -> None:
        with _lock:
            if _state["stopped"]:
                return
            _state["stopped"] = True
            _state["cov"].stop()
            _state["cov"].save()

    def _after_fork() -> None:
        """The child drops the parent's collector unsaved and starts its own data file."""
        global _lock
        _lock = threading.Lock()  # the parent's may have been held by its thread
        _state["stopped"] = True
        _state["cov"].stop()
        _begin()

    _begin()
    atexit.register(_save)
    util.Finalize(None, _save, exitpriority=100)  # multiprocessing children skip atexit
    os.register_at_fork(after_in_child=_after_fork)
