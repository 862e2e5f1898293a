"""The generative store machine: random programs over every mapping method, checked
against the pure model (:mod:`conformance.store.model`) after every step, with the
device's own peak during every operation.

A module-level :class:`StoreMachine` in the style of hypothesis's ``DatabaseComparison``:
a bundle of keys, short rules that each cite their clause, and every rule argument an
explicit strategy, so a failure prints a program that replays as it reads::

    state = StoreMachine.configure(adapter, caps, "sim", tmp_path)()
    state.start(host_limit=None, n_stores=1)
    keys_0 = state.add_key(key='a')
    state.put(side=0, key=keys_0, spec=ArraySpec(dtype='>i8', ...))
    state.teardown()

What the machine runs against (adapter, capabilities, device kind, root, key kinds)
is set on a subclass by :meth:`StoreMachine.configure`. Capabilities gate rules through
preconditions and change what the model expects; preconditions read only the model and
the machine's own records, never the store. The environment rules (the device, the
disk, other threads and the values themselves moving under the store) are in
:mod:`conformance.store.world` and run when ``world`` is set.

The rules live in :mod:`conformance.store.rules`, one module per topic: ``setting``,
``reading``, ``removing``, ``tiers`` (evict, spill everything, spill on demand),
``externals``, ``closing`` (close, and the teardown) and ``invariants``; the state and
the helpers they share in ``base`` and ``checks``.
"""

from __future__ import annotations

from hypothesis.stateful import RuleBasedStateMachine

from .rules.base import HOST_LIMITS, KEYS, ROOT, SIDES, VALUES, MachineBase, Side, calm, opened
from .rules.checks import Checks
from .rules.closing import ClosingRules
from .rules.externals import ExternalRules
from .rules.invariants import Invariants
from .rules.reading import ReadingRules
from .rules.removing import RemovingRules
from .rules.setting import SettingRules
from .rules.tiers import TierRules
from .world import WorldRules

__all__ = [
    "HOST_LIMITS", "KEYS", "ROOT", "SIDES", "VALUES", "Side", "StoreMachine", "calm", "opened",
]  # fmt: skip


class StoreMachine(
    SettingRules,
    ReadingRules,
    RemovingRules,
    TierRules,
    ExternalRules,
    ClosingRules,
    Invariants,
    Checks,
    MachineBase,
    WorldRules,
    RuleBasedStateMachine,
):
    """A store and its model, on a device and a directory the suite owns."""
