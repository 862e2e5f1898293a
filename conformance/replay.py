"""A failing store machine, replayed as a standalone program (issue 43).

Hypothesis prints a failing machine's steps (``state = StoreMachine_x()``, ``state.put(...)``)
and suggests ``@reproduce_failure`` on "your test function", which an installed suite does not
let a user edit. The suite prints instead a whole program, imports included::

    from conformance.replay import *
    StoreMachine_x = machine("mystore:adapter", "sim")
    state = StoreMachine_x()
    ...

which runs with ``python`` wherever the suite and the adapter import. The value specs the
steps name (``ArraySpec``, ``Node``, ``HostSpec``, ``Dup``) come with the star import.
"""

from __future__ import annotations

import re
import tempfile
from typing import Any

from conformance.store.strategies import ArraySpec, Dup, HostSpec, Node  # noqa: F401 - for the program

__all__ = ["ArraySpec", "Dup", "HostSpec", "Node", "machine"]


def machine(spec: str, device: str = "sim", *, any_keys: bool = False, world: bool = False) -> Any:
    """The machine class the failing test ran, for ``--impl=spec`` on ``device``."""
    from conformance.runner.loader import load_all
    from conformance.store.machines import StoreMachine

    (impl,) = load_all([spec])
    root = tempfile.mkdtemp(prefix="conformance-replay-")
    return StoreMachine.configure(impl.adapter, impl.capabilities, device, root,
                                  any_keys=any_keys, world=world)


def program(exc: BaseException, spec: str, device: str, *, any_keys: bool, world: bool) -> str | None:
    """The standalone program for a machine failure, from hypothesis's printed steps."""
    text = "\n".join(str(n) for n in getattr(exc, "__notes__", ()) or ())
    m = re.search(r"^state = (StoreMachine_\w+)\(\)$.*?^state\.teardown\(\)$", text, re.M | re.S)
    if m is None:
        return None
    opts = "".join(
        f", {name}=True" for name, on in (("any_keys", any_keys), ("world", world)) if on
    )
    return "\n".join([
        "# a standalone replay of this failure: save it as replay.py and run python replay.py",
        "from conformance.replay import *",
        "",
        f"{m.group(1)} = machine({spec!r}, {device!r}{opts})",
        m.group(0),
    ])
