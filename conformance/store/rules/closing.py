"""Closing: a store closed and reopened mid-program, and the machine's teardown, which reads
every value back and then closes every store."""

from __future__ import annotations

import gc
import os
import sys

from hypothesis.stateful import precondition, rule

from ...runner.heap import thaw
from .. import strategies as S
from ..harness import files_under
from .base import SIDES


class ClosingRules:
    """Clauses of section 11 (close), and the teardown's final read."""

    @precondition(lambda self: not self.world and (any(len(s.model.keys) >= 2 for s in self.sides)))
    @rule(side=SIDES)
    def close_and_reopen(self, side):
        """Clauses 11.3 and 11.2: close() leaves nothing and touches no other store."""
        s = self._step(side, "close_store")
        others = [x for x in self.sides if x is not s]
        files_before = {id(x): files_under(x.h.env.spill_dir) for x in others}
        s.proxies.clear()
        s.model.externals.clear()
        gc.collect()
        self.world_before_close(s)
        s.h.close(check=False)
        gc.collect()
        left = files_under(s.h.env.spill_dir) | {d: 0 for d in _dirs_under(s.h.env.spill_dir)}
        assert not left, f"close() left {sorted(left)} under spill_dir"
        measured = self.device.bytes_in_use() - self.baseline - self.world_held()
        assert measured == self._others_device(s), (
            f"after close() the device holds {measured:,} bytes; the other store "
            f"{self._others_device(s):,}"
        )
        for x in others:
            assert files_under(x.h.env.spill_dir) == files_before[id(x)], (
                "closing one store changed another store's files"
            )
        self.sides[self.sides.index(s)] = self._new_side()

    def teardown(self):
        try:
            self._teardown(failing=sys.exc_info()[0] is not None)
        finally:
            self.world_teardown()
            thaw()  # what start() froze

    def _teardown(self, failing: bool) -> None:
        """``failing``: a rule already failed, so only clean up."""
        for s in self.sides:
            s.proxies.clear()
            s.model.externals.clear()
        gc.collect()
        if failing:
            for s in self.sides:
                s.h.close(check=False)
            self.sides = []
            return
        # Read every value, but judge only after every store is closed: a mismatch
        # raised with stores open leaves their files behind, and hypothesis's replay of
        # the example then fails earlier on those (FlakyStrategyDefinition, stray files)
        # instead of on the real failure.
        wrong = []
        sides, self.sides = self.sides, []
        try:
            for s in sides:
                for key in list(s.model.keys):
                    got = s.h.store[key]
                    why = S.mismatch(self.device, got, s.model.held(key).expected)
                    del got
                    if why is not None:
                        wrong.append(f"store[{key!r}] came back wrong at teardown: {why}")
        finally:
            for s in sides:
                s.h.close(check=False)
            gc.collect()
        assert not wrong, "\n".join(wrong)
        if sides:
            in_use = self.device.bytes_in_use() - self.baseline - self.world_held()
            assert in_use == 0, (
                f"after closing every store {in_use:,} device bytes are still in use"
            )
            for s in sides:
                left = files_under(s.h.env.spill_dir)
                assert not left, f"after close() spill_dir holds {sorted(left)}"


def _dirs_under(path: str) -> list[str]:
    return [os.path.join(r, d) for r, ds, _f in os.walk(path) for d in ds]
