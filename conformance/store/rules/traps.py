"""Values that misbehave on cue: a member that raises, allocates, fills the device, collects
garbage or lies about its size while the store serializes, deserializes or measures it.

The rule armed now, if any, and its machine is the one module-level state: a value's
:class:`Trap` is pickled by the store and rebuilt from a spill file, so it has no other way
to find the machine. A rule arms it (:func:`arm`) and disarms it before it returns.
"""

from __future__ import annotations

import gc
from typing import Any

from ... import conditions

_ARMED: dict[str, Any] = {"action": None, "world": None, "n": 0, "op": None}
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


def arm(action: str, world: Any, n: int, op: str) -> None:
    """Traps act from now on: ``action`` (``n`` bytes for alloc and hold) inside ``op``."""
    _ARMED.update(action=action, world=world, n=n, op=op)


def disarm() -> None:
    _ARMED.update(action=None, world=None, n=0, op=None)


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


def caused_by(exc: BaseException, kind: type) -> bool:
    """Whether ``exc`` or an exception in its chain (cause or context) is a ``kind``."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, kind):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False
