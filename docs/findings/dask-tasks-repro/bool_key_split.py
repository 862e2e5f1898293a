"""The bool-key split of docs/findings/distributed-p2p-repro/bool_key_split.py with the task
shuffle (the hashing is dask's, shared by both methods). Run:
.venv/bin/python docs/findings/dask-tasks-repro/bool_key_split.py"""

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "tasks"]
    runpy.run_path(
        str(Path(__file__).parents[1] / "distributed-p2p-repro" / "bool_key_split.py"),
        run_name="__main__",
    )
