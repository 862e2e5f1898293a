"""Keys: Python equality decides what one key is, whatever its type, its str() or its repr();
any hashable key works, in every tier, and never leads a file outside spill_dir."""

from __future__ import annotations

import os

from conformance import conformance_id, requires
from conformance.store.harness import LIMIT, files_under, seed_digest, value_digest

N = LIMIT // 3

# Groups of keys that compare and hash equal: each group must be ONE key.
EQUAL_KEYS = ((1, 1.0, True), (0, 0.0, False), (("x", 1), ("x", 1.0), ("x", True)), (2.5,))
# Keys that are all different, although their str() or repr() collide.
COLLIDING_KEYS = (
    "1",
    1,
    "('a',)",
    ("a",),
    "b'x'",
    b"x",
    "('x', 1)",
    "None",
    None,
    "1.5",
    1.5,
)


def _pressure(h, count=4, seed=1000):
    """Values that push everything stored before them off the device."""
    for i in range(count):
        h.store[f"pressure-{i}"] = h.value(N, seed=seed + i)
    return {f"pressure-{i}" for i in range(count)}


@conformance_id("STORE-KEY-001", clause=("1.12", "1.13"))
@requires("store")
def test_equal_keys_are_one_key_and_colliding_names_are_not(impl, make_store):
    """1, 1.0 and True (and 0, 0.0, False; ('x', 1), ('x', 1.0), ('x', True)) are one key: the
    last set wins, len counts one, every spelling reads it, and the overwritten values leave
    every tier. Keys whose str()/repr() collide ("1" and 1, ("a",) and "('a',)", b"x" and
    "b'x'", None and "None") are distinct keys. Both hold after the values were spilled."""
    disk = {"store.limit.host", "store.spill.disk"} <= impl.capabilities
    h = make_store(host_limit=N + 4096) if disk else make_store()
    s = h.store
    seed = 0
    last = {}
    for group in EQUAL_KEYS:
        for k in group:
            s[k] = h.value(N, seed=seed)
            last[group] = seed
            seed += 1
            keys = set(_pressure(h, seed=9000 + seed)) | {g[0] for g in last}
            h.check(keys)
    assert len(s) == len(EQUAL_KEYS) + 4, (
        f"{len(EQUAL_KEYS)} groups of equal keys and 4 others, len(store) = {len(s)}: "
        f"{sorted(map(repr, s))}"
    )
    for group, sd in last.items():
        for k in group:
            assert k in s, f"{k!r} is not in the store, though an equal key is"
            assert value_digest(h.device, s[k]) == seed_digest(sd, N), (
                f"store[{k!r}] must return the value last stored under any of {group}"
            )
    for group in EQUAL_KEYS:
        del s[group[-1]]
        assert group[0] not in s, f"deleting {group[-1]!r} must delete {group[0]!r}: it is one key"
    h.check(_pressure(h, seed=9500))
    for k in list(s):
        del s[k]
    h.check(set())

    for i, k in enumerate(COLLIDING_KEYS):
        s[k] = h.value(N, seed=500 + i)
    keys = set(COLLIDING_KEYS) | _pressure(h, seed=9700)
    h.check(keys)
    assert len(s) == len(keys), f"{len(keys)} distinct keys, len(store) = {len(s)}"
    for i, k in enumerate(COLLIDING_KEYS):
        assert value_digest(h.device, s[k]) == seed_digest(500 + i, N), (
            f"store[{k!r}] returned another key's value (its str/repr collides with another key)"
        )
    h.check(keys)


ODD_KEYS = (
    "a/b",
    "a/b/../c",
    "..",
    ".",
    "../escape",
    "../../escape",
    "/etc/passwd-like",
    "~",
    "x" * 300,
    "odd \x01\x1f\x7f é ☃ \t\n\r ",
    ("tuple", "../t", "/"),
    b"../bytes",
    "CON",
    "",
)


@conformance_id("STORE-KEY-002", clause=("1.11", "9.2"))
@requires("store", "store.spill.disk")
def test_any_key_stays_inside_spill_dir(impl, make_store, tmp_path):
    """Keys with '/', '..', an absolute-looking path, '~', 300 characters, control and
    non-ASCII characters, an empty string, tuples and bytes of those: each is stored, spilled
    to disk and read back, and no file or directory appears outside spill_dir."""
    kw = {"host_limit": 0} if "store.limit.host" in impl.capabilities else {}
    h = make_store(**kw)
    outside = tmp_path.parent

    def around():
        listing = {}
        for root, dirs, files in os.walk(outside):
            if root.startswith(h.env.spill_dir):
                dirs[:] = []
                continue
            for name in dirs + files:
                listing[os.path.join(root, name)] = None
        return set(listing)

    before = around()
    for i, k in enumerate(ODD_KEYS):
        h.store[k] = h.value(N, seed=i)
    keys = set(ODD_KEYS) | _pressure(h, count=6)
    snap = h.check(keys)
    on_disk = [k for k in ODD_KEYS if snap.tiers[k] == "disk"]
    assert on_disk or not kw, f"with a host limit of 0 the odd keys belong on disk: {snap.tiers}"
    for i, k in enumerate(ODD_KEYS):
        assert value_digest(h.device, h.store[k]) == seed_digest(i, N), f"{k!r} came back wrong"
        h.check(keys)
    for k in ODD_KEYS:
        del h.store[k]
    created = around() - before
    assert not created, f"files or directories created outside spill_dir: {sorted(created)}"
    h.check(keys - set(ODD_KEYS))
    assert all(p.startswith(h.env.spill_dir) for p in files_under(h.env.spill_dir))
