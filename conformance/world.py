"""The environment as an adversary: what moves around a store while the machine runs.

Filled in by the environment rules; :class:`WorldRules` is mixed into
:class:`conformance.machines.StoreMachine`.
"""

from __future__ import annotations


class WorldRules:
    """The environment's state and rules (none yet)."""

    def init_world(self) -> None:
        self._world_held = 0
        self._world_peak = 0

    def world_held(self) -> int:
        """Device bytes the environment holds now, outside every store."""
        return self._world_held

    def world_peak_held(self) -> int:
        return self._world_peak

    def world_reset_peak(self) -> None:
        self._world_peak = self._world_held

    def world_before_close(self, side) -> None:
        pass

    def world_teardown(self) -> None:
        pass
