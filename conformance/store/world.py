"""The environment as an adversary: what moves around a store while the machine runs.

Real stores break when the world moves: another library allocates on the device, the
device fills up in the middle of a spill, the disk fills up or loses files, another
thread reads while this one evicts, a value's serialization allocates, collects garbage
or raises half-way. :class:`WorldRules` gives :class:`conformance.store.machines.StoreMachine`
rules that make each of these happen, between operations and inside them, each with the
outcome the contract requires (the fault model: SPEC.md section 15).

Everything is injected through what the suite owns: the device (allocations outside
every store), the directory it gave the store (its files), the process's file-size
limit (a full disk), the values it builds (members that act when serialized), and its
own threads. Never through an implementation's internals, so that the same rules run
against every adapter. Ground truth is the device ledger, the files and the objects the
caller holds. Every fault counts when it fires, in the ``faults`` tally the test gives the
machine (``StoreMachine.configure(..., faults=...)``), so a run in which none fired is
reported as not exercised, never as a pass.
"""

from __future__ import annotations

import gc
import os
import random
import resource
import shutil
import signal
import threading
from collections.abc import Hashable
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, precondition, rule

from .. import conditions
from ..api import evict as adapter_evict
from . import strategies as S
from .harness import files_under

# The rule armed now, if any, and its machine: the one module-level state. A value's Trap is
# pickled by the store and rebuilt from a spill file, so it has no other way to find the
# machine; a rule arms it and disarms it before it returns.
_ARMED: dict[str, Any] = {"action": None, "world": None, "n": 0, "op": None}
_SIDES = st.integers(0, 1)
KEYS = Bundle("keys")  # the machine's bundle of keys
WHEN_ALL = ("before", "during", "after")
# values_misbehave's action -> the condition it makes (SPEC.md section 15)
ACTION_CONDITION = {"alloc": "D2", "hold": "D3", "gc": "T3", "raise": "V1", "lie": "V2"}
# values_misbehave's op -> the operation it is inside
OP_OPERATION = {"evict": "spill everything", "read": "get", "put": "set", "get": "get", "pop": "pop"}


class TrapError(RuntimeError):
    """What a trapped member raises when its serialization fails half-way."""


class Trap:
    """A host member of a value that acts while the store serializes it (pickle, on a spill)
    or deserializes it (on an unspill), or lies about its size, when a rule has armed it.

    Two traps are equal when their tags are: the expected value holds an inert one.
    """

    def __init__(self, tag: int) -> None:
        self.tag = tag

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Trap) and other.tag == self.tag

    def __hash__(self) -> int:
        return hash(self.tag)

    def __repr__(self) -> str:
        return f"Trap({self.tag})"

    def __reduce__(self):
        _fire("serialize")
        return _rebuild_trap, (self.tag,)

    def __sizeof__(self) -> int:
        if _ARMED["action"] == "lie" and _ARMED["world"] is not None:
            _ARMED["world"].faults["sizeof lies"] += 1
            operation = OP_OPERATION.get(_ARMED.get("op"))
            if operation is not None:
                conditions.fire(operation, "V2", "during")
            return 2**40  # a terabyte: a store must weigh device memory by its allocations
        return object.__sizeof__(self)


def _rebuild_trap(tag: int) -> Trap:
    _fire("deserialize")
    return Trap(tag)


def _fire(where: str) -> None:
    action, world = _ARMED["action"], _ARMED["world"]
    if action is None or action == "lie" or world is None:
        return
    world.faults[f"{action} during {where}"] += 1
    operation = OP_OPERATION.get(_ARMED.get("op"))
    if operation is not None and action in ACTION_CONDITION:
        conditions.fire(operation, ACTION_CONDITION[action], "during")
        if action == "alloc" and world.has("store.oom.on_demand"):
            conditions.fire("spill on demand", "D2", "during")
    if action == "raise":
        raise TrapError(f"a value's member failed half-way through its {where}")
    if action == "gc":
        gc.collect()
    elif action in ("alloc", "hold"):
        world.env_alloc(_ARMED["n"], keep=action == "hold")


def moving(machine: Any) -> bool:
    """Precondition: the stores are open and the world is on (``world=True``)."""
    return bool(machine.world and machine.sides)


class WorldRules:
    """The environment's state, and the rules that move it (only when ``world`` is set)."""

    # ------------------------------------------------------------ state
    def init_world(self) -> None:
        self._outside: list[Any] = []  # device arrays the environment holds
        self._world_held = 0
        self._world_peak = 0
        self._tags = 0
        self._disk_failed = False
        self._trapped = 0  # trapped values stored so far

    def world_held(self) -> int:
        """Device bytes the environment holds now, outside every store."""
        return self._world_held

    def world_peak_held(self) -> int:
        """The most the environment held since the last reset (allocations inside an op)."""
        return self._world_peak

    def world_reset_peak(self) -> None:
        self._world_peak = self._world_held

    def env_alloc(self, n: int, keep: bool) -> None:
        """Another allocation on the device, outside every store (kept, or freed at once)."""
        n = max(0, int(n)) // 8 * 8
        try:
            block = self.device.empty(n, "uint8")
        except MemoryError:
            self.faults["outside allocation refused (device full)"] += 1
            return
        self._world_peak = max(self._world_peak, self._world_held + n)
        if keep:
            self._outside.append(block)
            self._world_held += n
        del block

    def world_step(self, operation: str) -> None:
        """The machine is about to run ``operation``: count the standing conditions it runs
        under (D1: an outside allocation held across it) and the garbage collection the
        machine runs after every step (T3, after)."""
        if not self.world:
            return
        if self._outside:  # and the inspect check_all runs after the step
            conditions.fire_all([operation, "inspect"], "D1", ("before", "during"))
        conditions.fire(operation, "T3", "after")

    def world_release(self) -> None:
        self._outside.clear()
        self._world_held = 0
        gc.collect()

    def world_before_close(self, side) -> None:
        pass

    def world_teardown(self) -> None:
        _ARMED.update(action=None, world=None, n=0)
        self.world_release()

    def _free(self) -> int:
        return self.device.capacity - self.device.bytes_in_use()

    def _settle(self, side) -> None:
        """After a fault, recency is unsettled (reads raced, spills failed): leave it to the
        next direct uses."""
        side.model.use_shared(list(side.model.keys))

    def _disk_fails(self) -> None:
        self._disk_failed = True
        for s in self.sides:
            s.h.caps = s.h.caps - {"store.limit.host"}

    def _read_back_everything(self, side, what: str) -> None:
        """Nothing lost: every key of ``side`` reads back exactly (clauses 2.1, 9.6)."""
        for key in list(side.model.keys):
            try:
                got = side.h.store[key]
            except Exception as exc:
                raise AssertionError(f"after {what}, store[{key!r}] raised {exc!r}") from exc
            why = S.mismatch(self.device, got, side.model.held(key).expected)
            del got
            assert why is None, f"after {what}, store[{key!r}] came back wrong: {why}"
        self._settle(side)

    # ------------------------------------------------------------ the device
    @precondition(moving)
    @rule(frac=st.sampled_from([0.25, 0.5, 0.9, 1.0]))
    def outside_takes(self, frac):
        """Clauses 3.1, 4.1, 4.2 and 8.1: another library allocates and keeps device memory;
        with spill on demand the stores make room, and every clause holds with it counted as
        the caller's."""
        room = self.device.capacity - self.baseline - self._world_held - 3 * self.limit
        if not self.has("store.oom.on_demand"):
            room = min(room, self._free() - 3 * self.limit)
        self.faults["outside allocation held"] += 1
        conditions.fire("spill on demand", "D1", "during")
        conditions.fire("inspect", "D1", "after")
        self.env_alloc(frac * max(0, room), keep=True)
        for s in self.sides:
            s.device_bytes = s.h.snapshot().device_bytes

    @precondition(lambda self: self.world and self._outside)
    @rule()
    def outside_releases(self):
        """The other library frees what it held."""
        self.world_release()

    @precondition(
        lambda self: (
            self.world
            and self.has("store.unspill.on_access")
            and any(s.model.keys for s in self.sides)
        )
    )
    @rule(side=_SIDES, pick=st.integers(0, 63), spill=st.booleans())
    def device_full_read(self, side, pick, spill):
        """Clause 6.5: the environment holds all of the device but a few bytes while a spilled
        value is read. The read returns it exactly or raises the device's out-of-memory
        error; either way it stays stored and reads back once the memory is free."""
        s = self._side(side)
        if spill and self.has("store.evict.manual"):
            adapter_evict(self.adapter, s.h.store, 16 * self.limit)
        tiers = s.h.snapshot().tiers
        keys = [k for k in s.model.keys if tiers.get(k) != "device"]
        if not keys:
            return
        key = keys[pick % len(keys)]
        self.env_alloc(self._free() - 64, keep=True)
        self.faults["device full during a read"] += 1
        conditions.fire_all(["get"], "D4", WHEN_ALL)
        if spill and self.has("store.evict.manual"):
            conditions.fire("evict", "D4", "after")
        try:
            got = s.h.store[key]
        except MemoryError:
            got = None
        else:
            self._check_value(s, key, got)
        del got
        assert key in s.h.store, f"a read of {key!r} on a full device lost the key"
        self.world_release()
        for x in self.sides:
            x.device_bytes = x.h.snapshot().device_bytes
        self._read_back_everything(s, f"a read of {key!r} on a full device")

    # ------------------------------------------------------------ values misbehaving
    @precondition(moving)
    @rule(
        target=KEYS,
        side=_SIDES,
        key=S.str_keys("<root>"),
        spec=st.one_of(st.none(), S.host_specs()),
    )
    def put_trapped(self, side, key, spec):
        """A value with a member that acts when armed (see :class:`Trap`): beside a device
        array (spec None) or in a host-only value, which a store serializes when it goes
        to disk."""
        s = self._side(side)
        key = self._key(key)
        inner = spec if spec is not None else S.ArraySpec("=i8", 4096, 1, "none", self._tags)
        built = self._build(inner)
        self._tags += 1
        value = S.Box(built.value, Trap(self._tags))
        with self._window(s, f"store[{key!r}] = <trapped value>"):
            s.h.store[key] = value
        del value, built.value, built.leaves
        built.expected = S.Box(built.expected, Trap(self._tags))
        s.model.remember(key, self._held(built))
        self._trapped += 1
        return key

    @precondition(lambda self: self.world and self._trapped and self.sides)
    @rule(
        side=_SIDES,
        action=st.sampled_from(["raise", "alloc", "hold", "gc", "lie"]),
        op=st.sampled_from(["evict", "read", "put"]),
        spec=st.one_of(S.host_specs(), S.value_specs("sim", st.sampled_from([64, 4096, 30_000]))),
    )
    def values_misbehave(self, side, action, op, spec):
        """Clauses 9.6, 13.3, 6.5 and 8.3: while traps are armed, a spill of everything, a
        read of everything or a new set goes through values whose serialization raises,
        allocates on the device (forcing the OOM handler), fills the device, collects
        garbage, or whose size lies. The operation may fail only with the trap's error or
        the device's out-of-memory error; afterwards nothing is lost or corrupted."""
        s = self._side(side)
        n = self._free() + self.limit // 2 if action == "alloc" else self._free() - self.limit // 4
        _ARMED.update(action=action, world=self, n=n, op=op)
        fired_before = sum(self.faults.values())
        errors: list[tuple[Hashable, BaseException]] = []
        try:
            if op == "evict" and self.has("store.evict.manual"):
                try:
                    adapter_evict(self.adapter, s.h.store, 16 * self.limit)
                except Exception as exc:
                    errors.append(("evict", exc))
            elif op == "put":  # a trapped value, serialized (or measured) as it is stored
                self._tags += 1
                key = f"trap-put-{self._tags}"
                built = self._build(spec)
                value = S.Box(built.value, Trap(self._tags))
                built.expected = S.Box(built.expected, Trap(self._tags))
                try:
                    s.h.store[key] = value
                except Exception as exc:
                    errors.append((key, exc))
                    if key in s.h.store:  # kept: it must read back (below)
                        s.model.remember(key, self._held(built))
                else:
                    s.model.remember(key, self._held(built))
                del value, built
            else:
                for key in list(s.model.keys):
                    try:
                        got = s.h.store[key]
                    except Exception as exc:
                        errors.append((key, exc))
                        continue
                    why = S.mismatch(self.device, got, s.model.held(key).expected)
                    del got
                    assert why is None, f"store[{key!r}] came back wrong with traps armed: {why}"
        finally:
            _ARMED.update(action=None, world=None, n=0, op=None)
        if sum(self.faults.values()) > fired_before:  # the read back below is after the fault
            conditions.fire("get", ACTION_CONDITION[action], "after")
        for where, exc in errors:
            allowed = TrapError if action == "raise" else MemoryError
            assert _caused_by(exc, allowed), (
                f"{where}: with {action!r} armed the store raised {exc!r}; only the trap's "
                f"own error or the device's out-of-memory error may come out"
            )
        self.world_release()
        gc.collect()
        for x in self.sides:  # what the environment held is gone: re-read the stores
            x.device_bytes = x.h.snapshot().device_bytes
        self._read_back_everything(s, f"{op} with {action!r} armed")

    @precondition(moving)
    @rule(side=_SIDES, spec=S.host_specs(), where=st.sampled_from(["get", "pop"]))
    def deserialization_raises(self, side, spec, where):
        """Clause 13.5: a host value with a member whose deserialization raises half-way is
        read back (from disk, where the host limit of 0 put it): the read raises that error
        or returns the value; the value stays stored and reads back once the member behaves."""
        s = self._side(side)
        self._tags += 1
        key = f"raises-{self._tags}"
        built = self._build(spec)
        with self._window(s, f"store[{key!r}] = <trapped host value>"):
            s.h.store[key] = S.Box(built.value, Trap(self._tags))
        built.value = None
        built.expected = S.Box(built.expected, Trap(self._tags))
        s.model.remember(key, self._held(built))
        _ARMED.update(action="raise", world=self, n=0, op=where)
        fired_before = sum(self.faults.values())
        try:
            got = s.h.store.pop(key) if where == "pop" else s.h.store[key]
        except Exception as exc:
            assert _caused_by(exc, TrapError), f"{where}({key!r}) raised {exc!r}"
            got = None
        finally:
            _ARMED.update(action=None, world=None, n=0, op=None)
        if sum(self.faults.values()) > fired_before:
            conditions.fire("get", "V1", "after")
        if got is not None:
            self._check_value(s, key, got)
            if where == "pop":
                s.model.forget(key)
        del got
        self._read_back_everything(s, f"a deserialization that raised ({where})")

    # ------------------------------------------------------------ the disk
    @precondition(
        lambda self: (
            self.world
            and self.has("store.spill.disk")
            and any(s.model.keys for s in self.sides)
        )
    )
    @rule(
        side=_SIDES,
        how=st.sampled_from(["flip", "truncate", "remove", "replace", "dir"]),
        pick=st.integers(0, 63),
        via=st.sampled_from(["get", "pop"]),
    )
    def disk_damaged(self, side, how, pick, via):
        """Clauses 10.1, 10.2, 10.3, 10.6 and 10.7: the environment changes, truncates,
        removes or replaces a spill file, or removes the whole spill directory, while values
        are on disk. Reading each disk value gives it back exactly or raises an error naming
        its key (a changed or truncated file must raise); a damaged key can be deleted; every
        other key is intact."""
        s = self._side(side)
        if how == "replace" and not self.has("store.spill.authenticated"):
            how = "flip"  # an authentic file under another key: only authentication (10.3) sees it
        if self.has("store.evict.manual"):
            adapter_evict(self.adapter, s.h.store, 16 * self.limit)
        tiers = s.h.snapshot().tiers
        on_disk = [k for k in s.model.keys if tiers.get(k) == "disk"]
        spill_dir = s.h.env.spill_dir
        files = sorted(files_under(spill_dir))
        if not on_disk or not files or s.proxies:
            return  # with externals on disk, a file may be theirs: never read back here
        path = files[pick % len(files)]
        self.faults[f"spill file {how}"] += 1
        condition = "F3" if how == "dir" else "F2"
        conditions.fire(via, condition, "before")
        conditions.fire("get", condition, "after")
        if how == "flip":
            with open(path, "r+b") as f:
                size = os.fstat(f.fileno()).st_size
                if size == 0:
                    return
                f.seek(random.Random(pick).randrange(size))
                b = f.read(1)
                f.seek(-1, os.SEEK_CUR)
                f.write(bytes([b[0] ^ 0x5A]))
        elif how == "truncate":
            os.truncate(path, os.path.getsize(path) // 2)
        elif how == "remove":
            os.unlink(path)
        elif how == "replace":
            others = [p for p in files if p != path]
            if not others:
                return
            shutil.copyfile(others[pick % len(others)], path)
        else:
            shutil.rmtree(spill_dir)
            os.makedirs(spill_dir, mode=0o700)
            self._disk_fails()  # what the store made inside is gone: later writes may fail
        raised = []
        for key in on_disk:
            try:
                got = s.h.store.pop(key) if via == "pop" else s.h.store[key]
            except Exception as exc:
                assert _names(exc, key), (
                    f"reading {key!r} after its spill file was damaged ({how}) raised "
                    f"{exc!r}, which does not name the key"
                )
                raised.append(key)
                continue
            why = S.mismatch(self.device, got, s.model.held(key).expected)
            del got
            assert why is None, (
                f"after a spill file was damaged ({how}), store[{key!r}] came back wrong: {why}"
            )
            if via == "pop":
                s.model.forget(key)
        if how in ("flip", "truncate", "replace"):
            assert raised, (
                f"a spill file was damaged ({how}: {os.path.relpath(path, spill_dir)}) and every "
                f"value on disk read back without an error"
            )
        for key in raised:
            if key in s.h.store:
                del s.h.store[key]  # clause 10.6: a damaged key can be deleted
            s.model.forget(key)
        self._settle(s)

    @precondition(
        lambda self: (
            self.world
            and self.has("store.spill.disk")
            and self.sides
            and threading.current_thread() is threading.main_thread()
        )
    )
    @rule(
        side=_SIDES,
        op=st.sampled_from(["evict", "put"]),
        spec=S.value_specs("sim", st.sampled_from([4096, 30_000, 60_000])),
    )
    def disk_full(self, side, op, spec):
        """Clause 9.6: every write fails (the process's file-size limit is 0, like a full
        disk) during a spill of everything or a set that must spill. The set's value is
        stored all the same; nothing is lost or corrupted; sections 3 and 4 hold, the host
        limit excepted."""
        s = self._side(side)
        hits = []
        old = signal.signal(signal.SIGXFSZ, lambda *a: hits.append(1))
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        built = self._build(spec) if op == "put" else None
        before = {k: v for k, v in files_under(s.h.env.spill_dir).items()}
        try:
            resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))
            try:
                if op == "put":
                    s.h.store["full-disk"] = built.value
                elif self.has("store.evict.manual"):
                    adapter_evict(self.adapter, s.h.store, 16 * self.limit)
            except Exception:
                pass  # an error is allowed; losing the value is not
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            signal.signal(signal.SIGXFSZ, old)
        if hits or files_under(s.h.env.spill_dir) != before:
            self.faults["disk full"] += 1
            conditions.fire("set" if op == "put" else "spill everything", "F1", "during")
            conditions.fire("get", "F1", "after")
        self._disk_fails()
        if built is not None:
            assert "full-disk" in s.h.store, (
                "a set on a full disk lost its value: the key is not in the store"
            )
            s.model.remember("full-disk", self._held(built))
            del built
        self._read_back_everything(s, "a full disk")

    # ------------------------------------------------------------ threads
    @precondition(
        lambda self: (
            self.world
            and self.has("store.threadsafe")
            and self.has("store.evict.manual")
            and any(s.model.keys for s in self.sides)
        )
    )
    @rule(side=_SIDES, pick=st.integers(0, 63))
    def reader_thread_during_evict(self, side, pick):
        """Clauses 12.1 and 12.3: another thread reads a key again and again while this one
        spills everything and reads the rest back; every read is exact, nothing hangs."""
        s = self._side(side)
        keys = list(s.model.keys)
        if not keys:
            return
        key = keys[pick % len(keys)]
        expected = s.model.held(key).expected
        errors: list[str] = []
        stop = threading.Event()

        def reader() -> None:
            for _ in range(200):
                if stop.is_set():
                    return
                try:
                    got = s.h.store[key]
                    why = S.mismatch(self.device, got, expected)
                    del got
                except Exception as exc:
                    why = repr(exc)
                if why:
                    errors.append(why)
                    return

        t = threading.Thread(target=reader, name="conformance-world-reader", daemon=True)
        self.faults["reader thread"] += 1
        conditions.fire_all(["spill everything", "get"], "T1", ["during"])
        conditions.fire("get", "T1", "after")
        t.start()
        try:
            for _ in range(3):
                adapter_evict(self.adapter, s.h.store, 16 * self.limit)
                for k in keys:
                    got = s.h.store[k]
                    del got
        finally:
            stop.set()
            t.join(30)
        assert not t.is_alive(), f"a thread reading store[{key!r}] hung (deadlock?)"
        assert not errors, f"a thread reading store[{key!r}] during evictions got: {errors[0]}"
        self._read_back_everything(s, "a reader thread")

    @precondition(
        lambda self: (
            self.world
            and self.has("store.threadsafe")
            and self.has("store.external")
            and any(len(s.model.keys) >= 2 for s in self.sides)
        )
    )
    @rule(
        side=_SIDES,
        spec=S.value_specs("sim", st.sampled_from([64, 4096, 30_000])),
        spill=st.booleans(),
    )
    def external_dies_on_thread(self, side, spec, spill):
        """Clauses 7.3, 7.5 and 12.4: an external's last reference dies on another thread
        (perhaps while spilled); its bytes go from every tier, and nothing deadlocks."""
        s = self._side(side)
        built = self._build(spec)
        box = [self.adapter.register_external(s.h.store, built.value)]
        del built
        if spill and self.has("store.evict.manual"):
            adapter_evict(self.adapter, s.h.store, 16 * self.limit)

        def die() -> None:
            box.clear()
            gc.collect()

        t = threading.Thread(target=die, name="conformance-world-finalizer", daemon=True)
        self.faults["external dies on a thread"] += 1
        conditions.fire("register_external", "T2", "after")
        conditions.fire("inspect", "T2", "after")
        if spill and self.has("store.evict.manual"):
            conditions.fire("spill everything", "T2", "after")
        t.start()
        t.join(30)
        assert not t.is_alive(), "an external dying on another thread hung (deadlock?)"
        gc.collect()
        self._settle(s)


def _caused_by(exc: BaseException, kind: type) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, kind):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _names(exc: BaseException, key: Hashable) -> bool:
    text = str(exc)
    seen = set()
    while exc is not None and id(exc) not in seen:
        text += " " + str(exc)
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return repr(key) in text or str(key) in text
