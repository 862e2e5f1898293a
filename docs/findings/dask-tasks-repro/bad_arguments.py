"""The same front-end checks as distributed-p2p's (ddf.shuffle is shared): see
docs/findings/distributed-p2p-repro/bad_arguments.py. Run:
.venv/bin/python docs/findings/dask-tasks-repro/bad_arguments.py"""

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "tasks"]
    runpy.run_path(
        str(Path(__file__).parents[1] / "distributed-p2p-repro" / "bad_arguments.py"),
        run_name="__main__",
    )
