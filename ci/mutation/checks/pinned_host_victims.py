"""Evidence for the triage of bb9d0e6222d1 (docs/mutation-triage.toml): does a host -> disk
cascade ever meet a pinned unit ahead of an unpinned one?

``Recency.host_victims`` skips pinned units; the mutant stops at the first one instead. The two
differ only when a live unpinned host unit comes after a pinned one in the heap's order when a
cascade starts (a cascade pushes nothing while it runs). This wraps ``host_victims`` to count
that, under random stores of host and device values, views, reads, uses, deletes and evicts.

    .venv/bin/python ci/mutation/checks/pinned_host_victims.py [--seeds 2] [--stores 300]
"""

from __future__ import annotations

import argparse
import random
import tempfile

import numpy as np

import reference_impl
from reference_impl import get_device
from reference_impl.store import recency

N = 1024


def _instrument(counts: dict[str, int]) -> None:
    original = recency.Recency.host_victims

    def host_victims(self, size=None):
        live = sorted(item for item in self._heap if item[2].seq == item[1])
        if self.pinned and any(item[2] not in self.pinned for item in live):
            counts["pinned, others queued"] += 1
        met_pin = False
        for item in live:
            if item[2] in self.pinned:
                met_pin = True
            elif met_pin:
                counts["unpinned behind a pinned unit"] += 1
                break
        return original(self, size)

    recency.Recency.host_victims = host_victims


def _value(rng: random.Random, store, device):
    kind = rng.random()
    if kind < 0.4:
        return bytearray(rng.randbytes(rng.choice([N // 2, N, 2 * N])))
    if kind < 0.8:
        data = np.frombuffer(rng.randbytes(rng.choice([N // 2, N, 2 * N])), np.uint8)
        return device.asarray(data)
    keys = list(store.keys())
    if not keys:
        return bytearray(8)
    v = store[rng.choice(keys)]
    return v[: max(1, len(v) // 2)] if rng.random() < 0.5 and hasattr(v, "shape") else v


def _one_store(rng: random.Random, spill_dir: str) -> None:
    device = get_device("sim", 1 << 22)
    store = reference_impl.ProxifyHostFile(
        device=device,
        device_memory_limit=rng.choice([2 * N, 4 * N, 8 * N]),
        memory_limit=rng.choice([0, N, 2 * N, 3 * N, 5 * N]),
        local_directory=spill_dir,
    )
    held: dict = {}
    for _ in range(60):
        op, k = rng.random(), rng.randrange(8)
        if op < 0.3:
            store[k] = _value(rng, store, device)
        elif op < 0.6 and k in store:
            v = store[k]
            if rng.random() < 0.3:
                held[k] = v
        elif op < 0.7 and k in store:
            del store[k]
        elif op < 0.8:
            store.evict(rng.choice([1, N, 100 * N]))
        elif op >= 0.8:
            for key, v in list(held.items()):
                if not isinstance(v, bytearray):
                    np.asarray(v + 0)  # a use through the proxy
                if rng.random() < 0.5:
                    del held[key]
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--stores", type=int, default=300)
    args = parser.parse_args()
    reference_impl.register()
    counts = {"pinned, others queued": 0, "unpinned behind a pinned unit": 0}
    _instrument(counts)
    for seed in range(1, args.seeds + 1):
        rng = random.Random(seed)
        for _ in range(args.stores):
            with tempfile.TemporaryDirectory() as d:
                _one_store(rng, d)
    print(f"{args.seeds * args.stores} stores: {counts}")


if __name__ == "__main__":
    main()
