"""The store machine's rules, one module per topic of the contract.

:mod:`conformance.store.machines` composes the machine's (setting, reading, removing, tiers,
externals, closing and the invariants) into ``StoreMachine``; :mod:`conformance.store.world`
composes the environment's (``world_*``) into ``WorldRules``. Each module is a mixin of
rules over the state :class:`base.MachineBase` and :class:`world_state.WorldState` keep.
"""
