"""What a store must hold, and in what order, after a sequence of calls: the pure model.

No device memory, no store: only the expected host arrays of every key, which model
allocations each key (and each external) holds, and recency. The state machine
(:mod:`conformance.store.machines`) drives a store and this model side by side; every
expectation here cites the clause it comes from.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Held:
    """What the model knows of one key's value or one external."""

    expected: Any
    allocs: dict[int, int]
    shared_inside: bool
    host_only: bool
    host_payload: int
    cut_from_larger: bool = False  # a view smaller than its base: its size changes when moved
    obj: int = 0  # the object stored: one held under two keys is one object (clause 3.2)


@dataclass
class StoreModel:
    """The expected state of one store.

    ``dedup``: the store counts an allocation once however many keys hold it (clause 3.2),
    so keys sharing memory are used, and move, as one (clause 5.1).
    """

    dedup: bool
    keys: dict[Hashable, Held] = field(default_factory=dict)
    order: list[Hashable] = field(default_factory=list)  # recency, least -> most recent
    unsure: set[Hashable] = field(default_factory=set)  # recency unsettled: see use_shared
    externals: list[Held] = field(default_factory=list)

    # ------------------------------------------------------------ keys
    def canon(self, key: Hashable) -> Hashable:
        """The key object the model files ``key`` under (clause 1.12: 1, 1.0 and True are one)."""
        for k in self.keys:
            if k == key:
                return k
        return key

    def __contains__(self, key: Hashable) -> bool:
        return key in self.keys

    def held(self, key: Hashable) -> Held:
        return self.keys[self.canon(key)]

    def remember(self, key: Hashable, held: Held) -> None:
        """Clauses 1.1, 1.3 and 5.1: ``key`` now holds ``held`` and is the most recently used."""
        self.forget(key)
        self.keys[key] = held
        self.touch(key)

    def forget(self, key: Hashable) -> None:
        if key in self.keys:
            key = self.canon(key)
            del self.keys[key]
        if key in self.order:
            self.order.remove(key)
        self.unsure.discard(key)

    def clear(self) -> None:
        self.keys.clear()
        self.order.clear()
        self.unsure.clear()

    # ------------------------------------------------------------ recency
    def touch(self, key: Hashable) -> None:
        """``key`` becomes the most recently used; keys sharing memory with it are used too
        (clause 5.1: an alias group moves, and is used, as one)."""
        key = self.canon(key)
        self.use_shared(self.group_keys(key))
        self.unsure.discard(key)
        if key in self.order:
            self.order.remove(key)
        self.order.append(key)

    def use_shared(self, keys: Iterable[Hashable]) -> None:
        """``keys`` were used only through memory they share with what was used.

        The store may no longer share it: a spill copies a view apart from its base
        (clause 2.6 asks only for their content), and from then on using one rightly
        leaves the other alone. So their recency is unsettled: they move to the end,
        and leave the recency checks until they are used directly.
        """
        for k in keys:
            self.unsure.add(k)
            if k in self.order:
                self.order.remove(k)
            self.order.append(k)

    def users_of_external(self, i: int) -> set[Hashable]:
        """Clause 5.2: the keys a use of external ``i`` uses (through shared memory)."""
        holders = self.holders()
        users = {
            w for a in self.externals[i].allocs for kind, w in holders.get(a, ()) if kind == "key"
        }
        for k in list(users):
            users.update(self.group_keys(k))
        return users

    # ------------------------------------------------------------ sharing
    def holders(self) -> dict[int, list[tuple[str, Any]]]:
        """Model allocation -> the keys and externals (by index) holding it."""
        out: dict[int, list[tuple[str, Any]]] = {}
        for k, held in self.keys.items():
            for a in held.allocs:
                out.setdefault(a, []).append(("key", k))
        for i, held in enumerate(self.externals):
            for a in held.allocs:
                out.setdefault(a, []).append(("ext", i))
        return out

    def _of(self, who: tuple[str, Any]) -> Held:
        kind, name = who
        return self.keys[name] if kind == "key" else self.externals[name]

    def _group(self, start: tuple[str, Any], holders) -> tuple[set, dict[int, int]]:
        """The holders linked to ``start`` through shared allocations, and those allocations."""
        seen, stack, allocs = {start}, [start], {}
        while stack:
            who = stack.pop()
            for a, n in self._of(who).allocs.items():
                if a in allocs:
                    continue
                allocs[a] = n
                for other in holders[a]:
                    if other not in seen:
                        seen.add(other)
                        stack.append(other)
        return seen, allocs

    def group_keys(self, key: Hashable) -> list[Hashable]:
        """The other keys linked to ``key`` through shared allocations (externals included)."""
        if key not in self.keys or not self.dedup:
            return []
        seen, _ = self._group(("key", key), self.holders())
        return [who for kind, who in seen if kind == "key" and who != key]

    def aliased(self) -> set[Hashable]:
        """Keys sharing an allocation with another key, an external, or within themselves."""
        out = {k for k, held in self.keys.items() if held.shared_inside}
        for holders in self.holders().values():
            if len(holders) > 1:
                out |= {who for kind, who in holders if kind == "key"}
        return out

    def group_bytes(self) -> dict[Hashable, int]:
        """Device bytes of the alias group of every key (each allocation once)."""
        holders = self.holders()
        return {k: sum(self._group(("key", k), holders)[1].values()) for k in self.keys}

    def oversize(self, limit: int) -> dict[Hashable, int]:
        """Clause 4.1: the keys whose alias group alone is over the device limit."""
        return {k: n for k, n in self.group_bytes().items() if n > limit}

    # ------------------------------------------------------------ expectations
    def recency_violation(
        self,
        tiers: Mapping[Hashable, str],
        lru: Sequence[Hashable] | None,
        limit: int,
        host_cascade: bool,
    ) -> str | None:
        """Clauses 5.4 and 5.5 against a snapshot: why its recency is wrong, or None.

        ``lru`` is the store's reported order (None when it reports none); ``host_cascade``:
        a host limit is in force, so host values go to disk least recently used first.
        """
        aliased = self.aliased() | self.unsure  # unsettled recency: use_shared
        big = self.oversize(limit)
        if lru is not None:
            expect = [k for k in self.order if tiers.get(k) == "device" and k not in aliased]
            got = [k for k in lru if k not in aliased]
            if got != expect:
                return f"inspect().lru {list(lru)!r} != keys by recency {expect!r}"
        plain = [
            k
            for k in self.order
            if k not in aliased
            and k not in big
            and not (self.keys[k].host_only and tiers.get(k) != "device")
        ]
        spilled = None
        for k in reversed(plain):  # most recent first
            if tiers[k] != "device":
                spilled = k
            elif spilled is not None:
                return (
                    f"{k!r} is on the device but the more recently used {spilled!r} was "
                    f"spilled: device-resident keys must be a most-recently-used suffix "
                    f"(recency {self.order!r}, tiers {dict(tiers)!r})"
                )
        if not host_cascade:
            return None
        lower = [k for k in plain if not self.keys[k].host_only and tiers[k] != "device"]
        on_host = None
        for k in lower:  # least recent first: disk keys, then host keys
            if tiers[k] == "host":
                on_host = k
            elif on_host is not None:
                return (
                    f"{k!r} went to disk while the less recently used {on_host!r} stayed "
                    f"on host: the host tier cascades least-recently-used first "
                    f"(tiers {dict(tiers)!r})"
                )
        return None

    def last_moved_off(
        self, before: Mapping[Hashable, str], after: Mapping[Hashable, str], limit: int
    ) -> tuple[Hashable, int] | None:
        """Clause 4.9: the most recently used key one operation moved off the device, and its
        size there, when that size is certain (no shared memory, no view smaller than its
        base, not over the limit); None otherwise."""
        moved = [
            k for k in self.order if before.get(k) == "device" and after.get(k) not in (None, "device")
        ]
        unsettled = self.aliased() | self.unsure
        if not moved or self.externals or any(k in unsettled for k in moved):
            return None  # externals and unsettled recency: which moved last is not certain
        key = moved[-1]
        held = self.keys[key]
        if (
            key in self.oversize(limit)
            or held.host_only
            or held.shared_inside
            or held.cut_from_larger
        ):
            return None
        return key, sum(held.allocs.values())

    def host_payload_floor(self, tiers: Mapping[Hashable, str]) -> int:
        """Clause 3.7: the host-tier bytes host-only values hold at least (measured deeply).

        With dedup, one object under several keys is counted once (clause 3.2, as
        STORE-ALIAS-004 checks): its payload is in the floor once, not once per key."""
        counted: dict[Hashable, int] = {}
        for k, held in self.keys.items():
            if held.host_only and tiers.get(k) == "host":
                counted[held.obj if self.dedup and held.obj else ("key", k)] = held.host_payload
        return sum(counted.values())
