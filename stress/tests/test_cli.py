"""Bad input fails fast with one clear line (exit 2, nothing started)."""

from __future__ import annotations

import pytest

from stress.cli import main


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["nope"], "unknown scenario 'nope'"),
        (["shuffle", "--impl", "no-such-impl"], "no-such-impl"),
        (["shuffle", "--data", "1KiB"], "smaller than one partition"),
        (["shuffle", "--device-memory", "lots"], "--device-memory 'lots': not a size"),
        (["shuffle", "--workers", "0"], "at least one worker"),
        (["shuffle", "--device", "cuda", "--workers", "64"], "cuda"),
        (["shuffle", "--device", "tpu"], "--device 'tpu'"),
        (["shuffle", "--workers", "4", "--device-memory", "64TiB"], "exceeds this machine"),
        (["shuffle", "--bogus"], "unrecognized arguments: --bogus"),
        (["shuffle", "--kill-every", "0"], "--kill-every 0.0: must be positive seconds"),
        (["faults", "--kill-every", "5"], "--kill-every: only the shuffle scenario kills workers, not faults"),
        (["shuffle", "--kill-every", "5", "--workers", "1"], "--kill-every with --workers 1"),
        (["shuffle", "--kill-every", "5", "--scheduler", "tcp://127.0.0.1:1"], "only local ones can be killed"),
    ],
)
def test_bad_input_is_one_line(argv, needle, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("stress: error: "), err
    assert needle in err, err
    assert not (tmp_path / "r").exists()  # nothing started


def test_the_fork_server_is_not_a_worker_left_running_but_what_it_forked_is():
    """Under distributed's ``forkserver`` method a run's workers are forked from one server
    that lives as long as the process: the cleanup check names a worker it forked and left
    running, never the server itself (a fresh-clone CI run once failed stress so)."""
    import multiprocessing
    import time
    from multiprocessing import forkserver

    import psutil

    from stress.cli import _children_left

    worker = multiprocessing.get_context("forkserver").Process(target=time.sleep, args=(60,))
    worker.start()
    server = forkserver._forkserver._forkserver_pid
    assert server is not None and psutil.Process(worker.pid).ppid() == server
    assert _children_left(timeout=0.5) == [worker.pid]  # named, and killed
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert psutil.Process(server).is_running()
    assert _children_left(timeout=0.5) == []
