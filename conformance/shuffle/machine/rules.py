"""The shuffle machine's rules: what users do with a shuffle on one cluster (see the
package's docstring), each rule naming the clauses of SPEC.md section 14 it exercises."""

from __future__ import annotations

import concurrent.futures
import gc
import os
import time
from collections import Counter
from typing import Any, ClassVar

from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from .. import faults as faults
from ..calls import SHUFFLE_TIMEOUT, ShuffleHang, forget_error
from ..judge import error_names
from ..rich_tables import describe
from ..tables import ShuffleCase
from .arguments import (
    BAD_ARGUMENTS,
    CASES,
    MOVING_CASES,
    PHASES,
    REKEYS,
    SMALL_CASES,
    Drawn,
    Rekey,
    bad_call,
    key_columns,
    spilling_case,
    without_null_keys,
)
from .schedule import fair, step
from .world import Loaded, World
from .world_moves import shuffle_while

MAX_LOADED = 3  # inputs kept on the cluster for later shuffles
SETTLE = 10.0  # clause 14.11


class ShuffleMachine(RuleBasedStateMachine):
    """Rules read as SPEC.md section 14; each names the clauses it exercises.

    Every rule argument is an explicit strategy, so a failure prints a program that reads as
    it ran. The one departure from hypothesis's own choice of rule is a fair schedule
    (``schedule.fair``): a rule runs only while no applicable rule has run fewer times in the
    example, so that every example of a few steps meets every rule.
    """

    world: ClassVar[World | None] = None

    def __init__(self) -> None:
        super().__init__()
        assert self.world is not None, "run_shuffle_machine sets the world"
        self.cluster = self.world.cluster
        self.nulls = self.world.has("shuffle.nulls")
        self.loaded: list[Loaded] = []
        self.clean = False  # the last step ended with nothing left behind
        self.counts: Counter = Counter()
        self.world.outcomes["examples"] += 1
        self.inherited: tuple[set[str], set[str]] = self._inherit()

    def _inherit(self) -> tuple[set[str], set[str]]:
        """What a failed example before this one left (its traceback holds its inputs, the
        files it failed on): cancelled, and what still stays is not this example's doing.
        A passing example was checked clean at its teardown, so nothing escapes."""
        start = time.perf_counter()
        clean = self.cluster.settled(timeout=1.0) is None
        self.world.seconds["(start)"] += time.perf_counter() - start
        if clean:
            return set(), set()
        faults.cancel_all(self.cluster)
        gc.collect()
        if self.cluster.settled(timeout=SETTLE) is None:
            return set(), set()
        tasks = {k for s in self.cluster.surface().values() for k in s["tasks"]}
        self.world.outcomes["examples inheriting a failed one's leftovers"] += 1
        return tasks, set(self.cluster.files())

    # ---------------------------------------------------------------- helpers
    def _load(self, case: ShuffleCase, keep: bool) -> Loaded:
        loaded = Loaded(case, self.cluster.load(case.tables))
        if keep:
            self.loaded.append(loaded)
            while len(self.loaded) > MAX_LOADED:
                self.loaded.pop(0)
        return loaded

    def _kept(self) -> list[str]:
        return [k for x in self.loaded for k in x.keys]

    def _run(self, loaded: Loaded, on, npartitions, what: str, *, measure: bool = False):
        """One shuffle, judged; returns its ShuffleRun."""
        case = ShuffleCase(loaded.case.tables, tuple(on), npartitions)
        note(f"{what}: {describe(case)}")
        run = self.cluster.shuffle(loaded.inputs, list(on), npartitions, measure=measure)
        self.world.judge(case, run.outputs, what)
        self.world.within_budget(run, case)
        self.world.outcomes[what] += 1
        return run

    # ---------------------------------------------------------------- rules
    @initialize(drawn=CASES, rekey=REKEYS)
    def start(self, drawn: Drawn, rekey: Rekey) -> None:
        """14.16: a first shuffle, and its inputs (kept) shuffled again by other keys or
        into another count, as users do."""
        case = drawn.case if self.nulls else without_null_keys(drawn.case)
        loaded = self._load(case, keep=True)
        self._run(loaded, case.on, case.npartitions, "first shuffle")
        on, n = rekey.of(key_columns(loaded.case, self.nulls), loaded.case.num_rows)
        self._run(loaded, on, n, "shuffle again")

    @fair("shuffle")
    @rule(drawn=CASES)
    @step
    def shuffle(self, drawn: Drawn) -> None:
        """14.1, 14.2, 14.6-14.9, 14.15: one shuffle of fresh inputs (kept for later ones)."""
        case = drawn.case if self.nulls else without_null_keys(drawn.case)
        loaded = self._load(case, keep=True)
        self._run(loaded, case.on, case.npartitions, "shuffle", measure=self.world.has("shuffle.bounded"))

    @fair("shuffle_again")
    @rule(which=st.integers(0, MAX_LOADED - 1), rekey=REKEYS)
    @step
    def shuffle_again(self, which: int, rekey: Rekey) -> None:
        """14.9, 14.16: inputs shuffled before (the ``which``-th kept, modulo how many),
        again, by other keys or into another count."""
        loaded = self.loaded[which % len(self.loaded)]
        on, n = rekey.of(key_columns(loaded.case, self.nulls), loaded.case.num_rows)
        self._run(loaded, on, n, "shuffle again")

    @fair("two_at_once")
    @rule(a=CASES, b=CASES)
    @step
    def two_at_once(self, a: Drawn, b: Drawn) -> None:
        """14.10: two shuffles in flight at once, each judged as if it ran alone."""
        cases = [x.case if self.nulls else without_null_keys(x.case) for x in (a, b)]
        loaded = [self._load(c, keep=False) for c in cases]
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            runs = [
                pool.submit(self.cluster.shuffle, x.inputs, list(x.case.on), x.case.npartitions)
                for x in loaded
            ]
            outputs = [r.result().outputs for r in runs]
        for name, x, out in zip("ab", loaded, outputs, strict=True):
            self.world.judge(x.case, out, f"two at once, shuffle {name}")
        self.world.outcomes["two at once"] += 1

    @fair("rejected")
    @rule(
        kind=st.sampled_from(BAD_ARGUMENTS),
        drawn=SMALL_CASES,
        missing=st.sampled_from(["no_such_column", "K0", "row_id2"]),
        bad_n=st.sampled_from([0, -1, 2.5, "3"]),
        retype=st.integers(0, 2**16),
    )
    @step
    def rejected(self, kind: str, drawn: Drawn, missing: str, bad_n: Any, retype: int) -> None:
        """14.12: a bad argument of ``kind`` raises before any data moves, names what is
        wrong, and the same inputs then shuffle correctly. ``missing`` is the absent key
        column, ``bad_n`` the bad count, ``retype`` which column the last input retypes
        (modulo how many)."""
        case = drawn.case if self.nulls else without_null_keys(drawn.case)
        tables, on, n, pattern = bad_call(kind, case, missing, bad_n, retype)
        loaded = Loaded(ShuffleCase(tuple(tables), case.on, case.npartitions), self.cluster.load(tables))
        note(f"rejected ({kind}): on={on} npartitions={n!r}")
        if self.world.watch is not None:
            self.world.watch.clear()
        try:
            self.cluster.shuffle(loaded.inputs, on, n)
        except ShuffleHang:
            raise
        except Exception as exc:
            ok = error_names(exc, pattern)
            forget_error(exc)
            assert ok, f"14.12: the error for a bad {kind} does not name it ({pattern})"
        else:
            raise AssertionError(f"14.12: a bad {kind} (on={on}, npartitions={n!r}) did not raise")
        if self.world.watch is not None:
            moved = sorted(self.world.watch.seen)
            if moved and kind == "schemas" and self.world.has("shuffle.lazy"):
                self.world.outcomes["rejected schemas after transfers ran (shuffle.lazy)"] += 1
            else:
                assert not moved, f"14.12: a bad {kind} raised after tasks of {moved} had run"
        self.world.outcomes[f"rejected {kind}"] += 1
        if kind != "schemas":  # the inputs are intact: they shuffle correctly now
            self._run(loaded, case.on, case.npartitions, f"after a rejected {kind}")

    @fair("kill_a_worker")
    @rule(drawn=MOVING_CASES, phase=PHASES)
    @step
    def kill_a_worker(self, drawn: Drawn, phase: str) -> None:
        """14.5: a worker SIGKILLed (its nanny restarts it) as it finishes the first task
        of ``phase``: correct outputs, or an error naming the phase or the worker."""
        self._world_moves(drawn, "kill", phase)

    @fair("cancel_mid_flight")
    @rule(drawn=MOVING_CASES, phase=PHASES)
    @step
    def cancel_mid_flight(self, drawn: Drawn, phase: str) -> None:
        """14.17: the client cancels what it wants of the shuffle as ``phase`` starts."""
        self._world_moves(drawn, "cancel", phase)

    @fair("stall_the_scheduler")
    @rule(drawn=MOVING_CASES, phase=PHASES)
    @step
    def stall_the_scheduler(self, drawn: Drawn, phase: str) -> None:
        """14.16: the scheduler's loop stops for a while as ``phase`` starts (a slow link):
        only the timing changes, so the shuffle must succeed."""
        self._world_moves(drawn, "stall", phase)

    @fair("remove_spill_files")
    @rule(seed=st.integers(0, 2**16))
    @step
    def remove_spill_files(self, seed: int) -> None:
        """14.14: every spill file removed as the unpack phase starts."""
        self._world_moves(None, "remove files", "unpack", seed=seed)

    @fair("truncate_spill_files")
    @rule(seed=st.integers(0, 2**16))
    @step
    def truncate_spill_files(self, seed: int) -> None:
        """14.18: every spill file cut to half its size as the unpack phase starts."""
        self._world_moves(None, "truncate files", "unpack", seed=seed)

    def _world_moves(self, drawn: Drawn | None, kind: str, phase: str, seed: int = 0) -> None:
        """A shuffle during which something happens at a phase boundary; a correct result
        or a clear error, never wrong data or a hang (``world_moves.shuffle_while``)."""
        if "files" in kind:  # data over the device and host tiers: shards in files
            # The inputs kept so far go first: spilled by this shuffle, their files would be
            # theirs (not left behind), and cut or removed, they could not be read again.
            self.loaded.clear()
            gc.collect()
            case = spilling_case(self.cluster, seed)
        else:
            case = drawn.case if self.nulls else without_null_keys(drawn.case)
        shuffle_while(self.world, self._load(case, keep=False), kind, phase, self._kept)

    @fair("release_inputs")
    @rule()
    @step
    def release_inputs(self) -> None:
        """14.11: the caller lets go of the inputs it kept; they must go too."""
        self.loaded.clear()

    # ---------------------------------------------------------------- invariants
    @invariant()
    def nothing_left_behind(self) -> None:
        """14.11: within 10 s of every step, nothing but the inputs still held remains."""
        self.clean = False
        start = time.perf_counter()
        gc.collect()
        left = self._left(SETTLE)
        self.world.seconds["(invariant)"] += time.perf_counter() - start
        assert left is None, "14.11: left behind: " + "; ".join(left) + self._states(left)
        self.clean = True

    def _states(self, left: list[str]) -> str:
        """The workers' states of the tasks left behind (for the report)."""
        try:
            states = self.cluster.client.run(_task_states)
        except Exception as exc:  # the report must not hide the failure
            return f" (task states unavailable: {exc!r})"
        held = {w: s for w, s in states.items() if s}
        return f" (worker task states: {held})" if held else ""

    def _left(self, timeout: float) -> list[str] | None:
        tasks, files = self.inherited
        skip = tuple(f"file {os.path.relpath(p, self.cluster.spill_dir)} (" for p in files)
        return self.cluster.settled(timeout, keep=[*self._kept(), *tasks], ignore=skip)

    def teardown(self) -> None:
        """14.11 once the inputs are let go, after a clean last step (after a failure the
        failure is the report, and the next example inherits what it left)."""
        clean, self.loaded = self.clean, []
        if clean:
            gc.collect()
            left = self._left(SETTLE)
            assert left is None, "14.11: left behind once the inputs were released: " + "; ".join(left)


def _task_states(dask_worker: Any) -> dict[str, str]:
    return {str(k): ts.state for k, ts in dask_worker.state.tasks.items()}


def run_shuffle_machine(cluster: Any, capabilities: frozenset, settings: Any) -> World:
    """Run the machine on ``cluster`` under ``settings``; the world's tallies. A phase
    watch stays on the scheduler for the run (a rejected call must not start tasks)."""
    world = World(cluster, frozenset(capabilities))
    name = None
    if world.phase_of is not None:
        world.watch = faults.PhaseWatch(world.phase_of)
        name = world.watch.name
        cluster.cluster.scheduler.add_plugin(world.watch, name=name)
    ShuffleMachine.world = world
    try:
        run_state_machine_as_test(ShuffleMachine, settings=settings)
    finally:
        ShuffleMachine.world = None
        if name is not None:
            cluster.cluster.scheduler.remove_plugin(name=name)
    return world


assert SHUFFLE_TIMEOUT <= 120  # clause 14.5 and 14.14 promise an answer within 120 s
