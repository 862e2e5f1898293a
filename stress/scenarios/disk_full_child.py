"""Child process of the store disk-full case: ``python -m stress.scenarios.disk_full_child
SPEC KIND ROOT``; prints ``RESULT{json}``. Every write past 2 KiB fails (EFBIG) and the
SIGXFSZ it raises is counted, proving the fault fired."""

from __future__ import annotations

import json
import resource
import signal
import sys
from pathlib import Path

from conformance.runner.loader import resolve

from .store_faults import LIMIT, N_VALUES, _harness, _read


def main(spec: str, kind: str, root: str) -> None:
    adapter = resolve(spec)
    h = _harness(adapter, kind, Path(root))
    fired: list[int] = []
    signal.signal(signal.SIGXFSZ, lambda *a: fired.append(1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    stored, put_errors = {}, []
    for i in range(N_VALUES):
        try:
            h.store[f"k{i}"] = h.value(LIMIT // 3, seed=i)
            stored[f"k{i}"] = i
        except Exception as exc:
            put_errors.append(f"k{i}: {type(exc).__name__}: {str(exc)[:100]}")
    intact, wrong, lost = _read(h, stored)
    print("RESULT" + json.dumps({"signals": len(fired), "intact": intact, "wrong": wrong,
                                 "lost": lost, "put_errors": put_errors}))
    h.close(check=False)


if __name__ == "__main__":
    main(*sys.argv[1:4])
