"""Line coverage in every process of a coverage-map run, labelled with the running test.

On ``PYTHONPATH`` only while ``covmap.py`` records its map: the pytest process, dask's nannies
and their worker processes all start here. The pytest plugin (``covmap_plugin.py``) writes the
running test's node id to ``$COVMAP_DIR/current``; a thread here follows it, so the lines a
worker runs for a test are recorded under that test even though the cluster is shared.
"""

import os

if os.environ.get("COVMAP_DIR"):
    import atexit
    import threading
    import time
    from multiprocessing import util

    import coverage

    _dir = os.environ["COVMAP_DIR"]
    _cov = coverage.Coverage(
        data_file=os.path.join(_dir, "cov"),
        data_suffix=True,
        source=os.environ["COVMAP_SOURCE"].split(os.pathsep),
        config_file=False,
    )
    _cov.start()
    _lock = threading.Lock()
    _state = {"name": None, "stopped": False}

    def _read() -> str:
        try:
            with open(os.path.join(_dir, "current")) as f:
                return f.read()
        except OSError:
            return ""

    def _follow() -> None:
        """Switch to the running test's context; every half second switch again to flush
        what was seen (a worker the test kills loses at most that much)."""
        last_flush = time.monotonic()
        while True:
            name = _read()
            with _lock:
                if _state["stopped"]:
                    return
                if name != _state["name"] or time.monotonic() - last_flush > 0.5:
                    _cov.switch_context(name)
                    _state["name"] = name
                    last_flush = time.monotonic()
            time.sleep(0.01)

    def _save() -> None:
        with _lock:
            if _state["stopped"]:
                return
            _state["stopped"] = True
            _cov.stop()
            _cov.save()

    def switch(name: str) -> None:
        """Switch at once (the pytest process's own test code must not wait for the thread)."""
        with _lock:
            if not _state["stopped"] and name != _state["name"]:
                _cov.switch_context(name)
                _state["name"] = name

    _cov.switch_context(_read())
    _state["name"] = _read()
    threading.Thread(target=_follow, name="covmap-follow", daemon=True).start()
    atexit.register(_save)
    util.Finalize(None, _save, exitpriority=100)  # multiprocessing children skip atexit
