"""The steps of ``ci/gpu_check.sh``: one prepared run that proves and measures the CUDA path.

    python3 -m ci.gpu_check --out DIR [--dry-run] [--budget SECONDS]   # from the checkout

Each step (one module in ``ci/gpu_check/steps/``) runs in its own subprocess (``--step NAME``)
with a timeout taken from what is left of ``--budget``; after every step ``DIR/gpu-check.json``
and ``DIR/gpu-results.md`` are rewritten (``report.py``), so a run cut short still leaves the
earlier results on disk. The table is printed last. ``--dry-run`` (CI, no GPU) checks imports,
runs the CUDA kernels under numba's simulator and the measuring code on the sim device at small
sizes, and says which GPU steps it skipped and why. Exit status: 1 if a step failed, erred or
timed out (or, in a real run, was skipped), else 0.
"""
