"""The machine's state: what it runs against, its stores with their models, and the small
helpers every rule shares (which store, which key, the value built for it).

What the machine runs against (adapter, capabilities, device kind, root, key kinds) is set
on a subclass by :meth:`MachineBase.configure`. Preconditions read only the model and the
machine's own records, never the store.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Self

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, initialize

from ...runner.heap import freeze_what_is_alive
from .. import strategies as S
from ..harness import LIMIT, StoreHarness, make_device
from ..model import Held, StoreModel
from .fit import native_only, scaled, without_dups

ROOT = "<root>"  # stands for the test's directory in drawn keys (an absolute-looking key)
KEYS = Bundle("keys")  # the machine's bundle of keys

_SIZES = st.one_of(
    st.sampled_from([0, 1, 8, 24, LIMIT // 3, LIMIT // 2, LIMIT, LIMIT + LIMIT // 4]),
    st.integers(1, 1024),
    st.integers(LIMIT // 8, LIMIT // 3),
)
# Drawn with every byte order; on a device without non-native orders they become native.
VALUES = S.value_specs("sim", _SIZES)
SIDES = st.integers(0, 1)  # which store, modulo how many there are
HOST_LIMITS = st.sampled_from([0, None, LIMIT // 2, 0, LIMIT, 4 * LIMIT])


def opened(machine: MachineBase) -> bool:
    """Precondition: ``start`` has opened the stores."""
    return bool(machine.sides)


def calm(machine: MachineBase) -> bool:
    """Precondition: the stores are open and the world stands still, for rules whose exact
    checks (unchanged snapshots, raised errors) an outside move would blur."""
    return not machine.world and bool(machine.sides)


@dataclass
class Side:
    """One store under test with its model; the machine may run two on one device."""

    h: StoreHarness
    model: StoreModel
    proxies: list[Any] = field(default_factory=list)  # externals, beside model.externals
    device_bytes: int = 0  # validated against the ledger by the last invariant check


class MachineBase:
    """A store and its model, on a device and a directory the suite owns."""

    adapter: Any = None
    caps: frozenset[str] = frozenset()
    device_kind = "sim"
    root = ""
    limit = LIMIT
    any_keys = False
    world = False  # the environment moves too (conformance.store.world)
    faults: Counter[str] = Counter()  # fault -> times it fired (configure gives each run its own)

    keys = KEYS

    @classmethod
    def configure(
        cls,
        adapter: Any,
        caps,
        device_kind: str,
        root,
        *,
        limit: int = LIMIT,
        any_keys: bool = False,
        world: bool = False,
        faults: Counter[str] | None = None,
    ) -> type[Self]:
        """A subclass running against ``adapter``; ``any_keys`` draws non-str keys too;
        ``faults`` tallies the environment's faults as they fire (a fresh one by default)."""
        name = f"StoreMachine_{adapter.name.replace('-', '_').replace(':', '_')}"
        attrs = dict(
            adapter=adapter,
            caps=frozenset(caps),
            device_kind=device_kind,
            root=str(root),
            limit=limit,
            any_keys=any_keys,
            world=world,
            faults=Counter() if faults is None else faults,
            __module__=cls.__module__,  # where StoreMachine is, not this module
        )
        return type(name, (cls,), attrs)

    def __init__(self) -> None:
        super().__init__()
        self.sides: list[Side] = []
        self.here = self.root  # this example's directory, under root (set by start)
        self.device: Any = None
        self.baseline = 0
        self.host_limit: int | None = None
        self.init_world()

    def has(self, cap: str) -> bool:
        return cap in self.caps

    @property
    def dedup(self) -> bool:
        return self.has("store.alias.dedup")

    @initialize(host_limit=HOST_LIMITS, n_stores=st.sampled_from([1, 1, 2]))
    def start(self, host_limit, n_stores):
        """Clauses 11.1 and 11.2: stores on one device and one parent directory stay isolated."""
        if self.world:
            host_limit = 0  # the environment's rules want values on disk, at once
        self.host_limit = host_limit if self.has("store.limit.host") else None
        # Everything that exists now (hypothesis's own state, the test process) goes to
        # the collector's permanent generation: the many collections this machine makes
        # to find the store's cyclic garbage then scan only what was made since (each
        # took 33 ms, 82% of the machine's time). teardown() thaws it.
        freeze_what_is_alive()
        # Each example in a directory of its own: what a failed example left behind (a
        # store that could not clean up) must not fail the next one, or its replay.
        self.here = tempfile.mkdtemp(prefix="example-", dir=self.root)
        self.device = make_device(self.device_kind, 8 * self.limit)
        self.baseline = self.device.bytes_in_use()
        self.sides = [self._new_side() for _ in range(n_stores)]

    def _new_side(self) -> Side:
        h = StoreHarness(
            self.adapter,
            self.device_kind,
            self.here,
            device_limit=self.limit,
            host_limit=self.host_limit,
            device=self.device,
            caps=self.caps,
        )
        h.baseline = self.baseline  # both stores are measured from the empty device
        return Side(h, StoreModel(self.dedup))

    # ------------------------------------------------------------ which store, which key
    def _side(self, i: int) -> Side:
        return self.sides[i % len(self.sides)]

    def _step(self, side: int, operation: str) -> Side:
        """The store a rule acts on, once the world has counted ``operation``'s conditions
        (:meth:`conformance.store.world.WorldRules.world_step`)."""
        self.world_step(operation)
        return self._side(side)

    def _stored(self, side: int, key: Hashable, operation: str | None = None) -> Side | None:
        """The store a rule about a stored ``key`` acts on (after the world's step for
        ``operation``, if named), or None where ``key`` is not stored there: the rule then
        does nothing."""
        if operation is not None:
            self.world_step(operation)
        s = self._side(side)
        return s if key in s.model else None

    def _key(self, key: Hashable) -> Hashable:
        return key.replace(ROOT, self.here) if isinstance(key, str) else key

    def _others_device(self, side: Side) -> int:
        return sum(s.device_bytes for s in self.sides if s is not side)

    def _over(self, side: Side, key: Hashable) -> int:
        return side.model.oversize(self.limit).get(side.model.canon(key), 0)

    # ------------------------------------------------------------ the values
    def _build(self, spec: Any) -> S.Built:
        if not self.dedup:
            spec = without_dups(spec)
        if self.device_kind != "sim":
            spec = native_only(spec)
        if self.limit != LIMIT:
            spec = scaled(spec, self.limit / LIMIT)
        try:
            return S.build(spec, self.device)
        except MemoryError:
            if not self.world_held():
                raise
            self.world_release()  # the environment gives its memory back to the caller
            self._reread_device_bytes()
            return S.build(spec, self.device)

    @staticmethod
    def _held(built: S.Built, payload: bool = True) -> Held:
        return Held(
            built.expected,
            built.allocs,
            built.shared_inside,
            built.host_only,
            built.host_payload if payload else 0,
            cut_from_larger=built.cut_from_larger,
            obj=built.obj,
        )
