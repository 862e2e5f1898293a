"""Four threads share one zict.Buffer (a 64 KiB fast LRU over Func(pickle) + File); each
sets, reads and deletes only its own five keys, 500 operations per thread per round, and
checks each read against what it last wrote. Prints the first round in which a thread reads
a KeyError or a stale value for one of its own keys, or that 20 rounds passed cleanly."""

import hashlib
import pickle
import random
import sys
import tempfile
import threading

import numpy as np
import zict

LIMIT = 64 * 1024


def one_round(seed: int) -> list[str]:
    slow = zict.Func(pickle.dumps, pickle.loads, zict.File(tempfile.mkdtemp()))
    buf = zict.Buffer({}, slow, n=LIMIT, weight=lambda k, v: v.nbytes)
    errors: list[str] = []

    def value(n: int, s: int) -> np.ndarray:
        return np.random.default_rng(s).integers(0, 255, n, dtype=np.uint8)

    def digest(v) -> str:
        return hashlib.sha1(np.asarray(v).tobytes()).hexdigest()

    def worker(t: int) -> None:
        rng = random.Random(seed * 10 + t)
        model: dict[str, str] = {}
        try:
            for op in range(500):
                k = f"t{t}-{rng.randrange(5)}"  # only thread t ever touches k
                r = rng.random()
                if r < 0.5:
                    v = value(rng.choice([64, 1000, LIMIT // 3]), t * 100_000 + op)
                    buf[k] = v
                    model[k] = digest(v)
                elif r < 0.85 and k in model:
                    if digest(buf[k]) != model[k]:
                        errors.append(f"stale value for {k}")
                elif k in model:
                    del buf[k]
                    del model[k]
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return errors


for seed in range(20):
    errs = one_round(seed)
    if errs:
        print(f"zict {zict.__version__}: round {seed}: {errs[:3]}")
        sys.exit(0)
print(f"zict {zict.__version__}: 20 rounds without a KeyError or stale value")
sys.exit(1)
