"""The shuffle machine: what users do with a shuffle on one cluster, drawn by hypothesis.

Programs of shuffles in any order, two at once, rejected calls, shuffles cancelled mid-
flight, and shuffles during which the world moves (a worker killed, the scheduler stalled,
spill files removed or truncated), over inputs carrying everything a Table holds
(``rich_tables``). Every shuffle, whatever its outcome, is judged against the whole of
SPEC.md section 14; after every step nothing may be left behind (14.11).

One cluster serves a whole run (``World``, set on the class by ``run_shuffle_machine``):
starting one per example would cost more than the examples. A fault that never fired is
counted ``not exercised`` in ``World.faults``, never as a pass.
"""

from __future__ import annotations

import concurrent.futures
import functools
import gc
import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

import distributed
import pyarrow as pa
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from .. import conditions
from . import faults as faults
from .harness import SHUFFLE_TIMEOUT, ShuffleHang, forget_error
from .judge import Landing, error_names, field_metadata_kept, outcome_problems
from .rich_tables import describe, rich_cases
from .tables import ShuffleCase, uniform_case

MAX_LOADED = 3  # inputs kept on the cluster for later shuffles
SETTLE = 10.0  # clause 14.11
HEAL = 60.0  # seconds for a killed worker's nanny to bring it back


class NannyNeverRestarted(RuntimeError):
    """The environment, not the shuffle: distributed's nanny did not bring a SIGKILLed worker
    back (about 1 in 40 kills). ci/flake_report.py names it an environment failure."""


def _healed(client, n_workers: int) -> None:
    try:
        client.wait_for_workers(n_workers, timeout=HEAL)
    except TimeoutError as exc:
        raise NannyNeverRestarted(
            f"environment: the nanny never restarted the killed worker ({n_workers} workers "
            f"wanted, not back within {HEAL:.0f} s); not the implementation's failure: rerun"
        ) from exc


SPILL_CASE_MAX = 3 * 2**19  # bytes; an implementation that always writes shards needs no more


@dataclass
class World:
    """What one machine run shares across its examples: the cluster and the tallies."""

    cluster: Any
    capabilities: frozenset
    landing: Landing = field(default_factory=Landing)
    faults: Counter = field(default_factory=Counter)  # (fault, "fired" | "not exercised")
    outcomes: Counter = field(default_factory=Counter)  # what the shuffles did
    seconds: Counter = field(default_factory=Counter)  # per rule
    watch: faults.PhaseWatch | None = None

    @property
    def phase_of(self):
        return getattr(self.cluster.adapter, "phase_of", None)

    def has(self, *caps: str) -> bool:
        return set(caps) <= self.capabilities

    def summary(self) -> str:
        done = ", ".join(f"{k} {n}" for k, n in sorted(self.outcomes.items()))
        fired = ", ".join(f"{f} {how} {n}" for (f, how), n in sorted(self.faults.items()))
        spent = ", ".join(f"{k} {v:.0f} s" for k, v in sorted(self.seconds.items()))
        return f"{done}; faults: {fired or 'none drawn'}; {spent}"


class Drawn:
    """A drawn case with a short repr, for the printed program."""

    def __init__(self, case: ShuffleCase) -> None:
        self.case = case

    def __repr__(self) -> str:
        return f"<{describe(self.case)}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # hypothesis prints programs so
        p.text(repr(self))


@dataclass
class Loaded:
    case: ShuffleCase
    inputs: Any

    @property
    def keys(self) -> list[str]:
        # futures_of looks into exact lists only: an adapter's list subclass (the dask
        # adapters' Inputs) would hide its futures, and the inputs would read as leftovers
        inputs = list(self.inputs) if isinstance(self.inputs, list) else self.inputs
        return [str(f.key) for f in distributed.futures_of(inputs)]

    def __repr__(self) -> str:
        return f"<inputs on the cluster: {describe(self.case)}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))


def _step(fn):
    """A rule: counted, timed, and until the invariant after it passes, not known clean."""

    @functools.wraps(fn)
    def step(self, *args, **kwargs):
        self.clean = False
        self.counts[fn.__name__] += 1
        start = time.perf_counter()
        try:
            return fn(self, *args, **kwargs)
        finally:
            self.world.seconds[fn.__name__] += time.perf_counter() - start

    return step


def _always(m: ShuffleMachine) -> bool:
    return True


def _holds_inputs(m: ShuffleMachine) -> bool:
    """Inputs kept from an earlier shuffle are on the cluster."""
    return bool(m.loaded)


def _checks(m: ShuffleMachine) -> bool:
    return m.world.has("shuffle.checks")


def _phases_seen(m: ShuffleMachine) -> bool:
    """The adapter names a task's phase, so a fault can be timed to one."""
    return m.world.phase_of is not None


def _spills_by_phase(m: ShuffleMachine) -> bool:
    return m.world.phase_of is not None and m.world.has("shuffle.spill")


# When each rule can run (see ShuffleMachine: a rule runs only while no other that can has
# run fewer times in this example).
APPLIES = {
    "shuffle": _always,
    "shuffle_again": _holds_inputs,
    "two_at_once": _always,
    "rejected": _checks,
    "release_inputs": _holds_inputs,
    "kill_a_worker": _phases_seen,
    "cancel_mid_flight": _phases_seen,
    "stall_the_scheduler": _phases_seen,
    "remove_spill_files": _spills_by_phase,
    "truncate_spill_files": _spills_by_phase,
}


def _fair(name: str):
    """The precondition of rule ``name``: it applies, and no rule that applies has run fewer
    times in this example."""

    def fair(m: ShuffleMachine) -> bool:
        if not APPLIES[name](m):
            return False
        return m.counts[name] <= min(m.counts[n] for n, can in APPLIES.items() if can(m))

    fair.__name__ = f"fair_{name}"
    return precondition(fair)


BAD_ARGUMENTS = ("column", "npartitions", "empty on", "schemas")


@dataclass(frozen=True)
class Rekey:
    """Other keys and another count for inputs already shuffled, drawn before the inputs'
    columns are known: ``picks`` index the usable columns, ``count`` the partitions (each
    modulo what there is)."""

    picks: tuple[int, ...]
    count: int

    def of(self, names: list[str], num_rows: int) -> tuple[list[str], int]:
        on = list(dict.fromkeys(names[p % len(names)] for p in self.picks))
        return on, 1 + self.count % (num_rows + 3)


# Rule arguments. Null keys are drawn for every implementation; one without shuffle.nulls
# gets the rows whose keys hold none (_without_null_keys).
CASES = st.deferred(lambda: rich_cases().map(Drawn))
SMALL_CASES = st.deferred(lambda: rich_cases(max_rows=30).map(Drawn))
MOVING_CASES = st.deferred(lambda: rich_cases(max_rows=400, max_inputs=6).map(Drawn))
REKEYS = st.builds(
    Rekey, st.lists(st.integers(0, 2**8), min_size=1, max_size=3).map(tuple), st.integers(0, 2**16)
)
PHASES = st.sampled_from(["unpack", "transfer"])


class ShuffleMachine(RuleBasedStateMachine):
    """Rules read as SPEC.md section 14; each names the clauses it exercises.

    Every rule argument is an explicit strategy, so a failure prints a program that reads as
    it ran. The one departure from hypothesis's own choice of rule is a fair schedule
    (``_fair``): a rule runs only while no applicable rule has run fewer times in the
    example. A cluster makes examples dear (the ci profile affords 2 examples of 8 steps),
    and left to itself a derandomized run of 3 examples of 8 steps never drew
    ``shuffle_again``; with the schedule every example of a few steps meets every rule.
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

    def _judge(self, case: ShuffleCase, outputs: Any, what: str) -> None:
        """Everything section 14 says about a shuffle that returned."""
        problems = outcome_problems(case, outputs, self.world.landing, what)
        assert not problems, f"{what}: " + "; ".join(problems)
        if any(f.metadata for f in case.schema):
            kept = field_metadata_kept(outputs, case.schema)
            self.world.outcomes["field metadata kept" if kept else "field metadata dropped"] += 1

    def _bounded(self, run: Any, case: ShuffleCase) -> None:
        """Clause 14.2: the measured peak within the budget plus twice the largest partition."""
        if run.peaks is None:
            return
        largest = max([t.nbytes for t in case.tables] + [t.nbytes for t in run.outputs] + [0])
        limit = self.cluster.budget() + 2 * largest
        over = {w: p for w, p in run.peaks.items() if p > limit}
        assert not over, f"14.2: peaks {over} above budget + 2 x {largest:,} = {limit:,}"

    def _run(self, loaded: Loaded, on, npartitions, what: str, *, measure: bool = False):
        """One shuffle, judged; returns its ShuffleRun."""
        case = ShuffleCase(loaded.case.tables, tuple(on), npartitions)
        note(f"{what}: {describe(case)}")
        run = self.cluster.shuffle(loaded.inputs, list(on), npartitions, measure=measure)
        self._judge(case, run.outputs, what)
        self._bounded(run, case)
        self.world.outcomes[what] += 1
        return run

    def _rekey(self, rekey: Rekey, loaded: Loaded) -> tuple[list[str], int]:
        """Other key columns and another ``npartitions`` for inputs already shuffled; never
        a pandas index column (14.23: keys are data columns)."""
        case = loaded.case
        index = {c for c in (case.schema.pandas_metadata or {}).get("index_columns", ()) if isinstance(c, str)}
        names = [
            f.name
            for f in case.schema
            if f.name not in index
            and (self.nulls or all(t.column(f.name).null_count == 0 for t in case.tables))
        ]
        return rekey.of(names, case.num_rows)

    # ---------------------------------------------------------------- rules
    @initialize(drawn=CASES, rekey=REKEYS)
    def start(self, drawn: Drawn, rekey: Rekey) -> None:
        """14.16: a first shuffle, and its inputs (kept) shuffled again by other keys or
        into another count, as users do."""
        case = drawn.case if self.nulls else _without_null_keys(drawn.case)
        loaded = self._load(case, keep=True)
        self._run(loaded, case.on, case.npartitions, "first shuffle")
        on, n = self._rekey(rekey, loaded)
        self._run(loaded, on, n, "shuffle again")

    @_fair("shuffle")
    @rule(drawn=CASES)
    @_step
    def shuffle(self, drawn: Drawn) -> None:
        """14.1, 14.2, 14.6-14.9, 14.15: one shuffle of fresh inputs (kept for later ones)."""
        case = drawn.case if self.nulls else _without_null_keys(drawn.case)
        loaded = self._load(case, keep=True)
        self._run(loaded, case.on, case.npartitions, "shuffle", measure=self.world.has("shuffle.bounded"))

    @_fair("shuffle_again")
    @rule(which=st.integers(0, MAX_LOADED - 1), rekey=REKEYS)
    @_step
    def shuffle_again(self, which: int, rekey: Rekey) -> None:
        """14.9, 14.16: inputs shuffled before (the ``which``-th kept, modulo how many),
        again, by other keys or into another count."""
        loaded = self.loaded[which % len(self.loaded)]
        on, n = self._rekey(rekey, loaded)
        self._run(loaded, on, n, "shuffle again")

    @_fair("two_at_once")
    @rule(a=CASES, b=CASES)
    @_step
    def two_at_once(self, a: Drawn, b: Drawn) -> None:
        """14.10: two shuffles in flight at once, each judged as if it ran alone."""
        cases = [x.case if self.nulls else _without_null_keys(x.case) for x in (a, b)]
        loaded = [self._load(c, keep=False) for c in cases]
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            runs = [
                pool.submit(self.cluster.shuffle, x.inputs, list(x.case.on), x.case.npartitions)
                for x in loaded
            ]
            outputs = [r.result().outputs for r in runs]
        for name, x, out in zip("ab", loaded, outputs, strict=True):
            self._judge(x.case, out, f"two at once, shuffle {name}")
        self.world.outcomes["two at once"] += 1

    @_fair("rejected")
    @rule(
        kind=st.sampled_from(BAD_ARGUMENTS),
        drawn=SMALL_CASES,
        missing=st.sampled_from(["no_such_column", "K0", "row_id2"]),
        bad_n=st.sampled_from([0, -1, 2.5, "3"]),
        retype=st.integers(0, 2**16),
    )
    @_step
    def rejected(self, kind: str, drawn: Drawn, missing: str, bad_n: Any, retype: int) -> None:
        """14.12: a bad argument of ``kind`` raises before any data moves, names what is
        wrong, and the same inputs then shuffle correctly. ``missing`` is the absent key
        column, ``bad_n`` the bad count, ``retype`` which column the last input retypes
        (modulo how many)."""
        case = drawn.case if self.nulls else _without_null_keys(drawn.case)
        tables, on, n = list(case.tables), list(case.on), case.npartitions
        if kind == "column":
            on, pattern = [*on, missing], re.escape(missing)
        elif kind == "empty on":
            on, pattern = [], r"\bon\b|key"
        elif kind == "npartitions":
            n, pattern = bad_n, "npartitions"
        else:
            if len(tables) < 2:
                tables.append(tables[0].slice(0, 0))
            names = tables[0].schema.names
            target = names[retype % len(names)]
            tables[-1] = _retyped(tables[-1], target)
            pattern = re.escape(target)
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

    @_fair("kill_a_worker")
    @rule(drawn=MOVING_CASES, phase=PHASES)
    @_step
    def kill_a_worker(self, drawn: Drawn, phase: str) -> None:
        """14.5: a worker SIGKILLed (its nanny restarts it) as it finishes the first task
        of ``phase``: correct outputs, or an error naming the phase or the worker."""
        self._world_moves(drawn, "kill", phase)

    @_fair("cancel_mid_flight")
    @rule(drawn=MOVING_CASES, phase=PHASES)
    @_step
    def cancel_mid_flight(self, drawn: Drawn, phase: str) -> None:
        """14.17: the client cancels what it wants of the shuffle as ``phase`` starts."""
        self._world_moves(drawn, "cancel", phase)

    @_fair("stall_the_scheduler")
    @rule(drawn=MOVING_CASES, phase=PHASES)
    @_step
    def stall_the_scheduler(self, drawn: Drawn, phase: str) -> None:
        """14.16: the scheduler's loop stops for a while as ``phase`` starts (a slow link):
        only the timing changes, so the shuffle must succeed."""
        self._world_moves(drawn, "stall", phase)

    @_fair("remove_spill_files")
    @rule(seed=st.integers(0, 2**16))
    @_step
    def remove_spill_files(self, seed: int) -> None:
        """14.14: every spill file removed as the unpack phase starts."""
        self._world_moves(None, "remove files", "unpack", seed=seed)

    @_fair("truncate_spill_files")
    @rule(seed=st.integers(0, 2**16))
    @_step
    def truncate_spill_files(self, seed: int) -> None:
        """14.18: every spill file cut to half its size as the unpack phase starts."""
        self._world_moves(None, "truncate files", "unpack", seed=seed)

    def _world_moves(self, drawn: Drawn | None, kind: str, phase: str, seed: int = 0) -> None:
        """A shuffle during which something happens at a phase boundary; a correct result
        or a clear error, never wrong data or a hang."""
        if "files" in kind:  # data over the device and host tiers: shards in files
            # The inputs kept so far go first: spilled by this shuffle, their files would be
            # theirs (not left behind), and cut or removed, they could not be read again.
            self.loaded.clear()
            gc.collect()
            case = _spilling_case(self.cluster, seed)
        else:
            case = drawn.case if self.nulls else _without_null_keys(drawn.case)
        loaded = self._load(case, keep=False)
        self._faulted(loaded, kind, phase)

    def _faulted(self, loaded: Loaded, kind: str, phase: str) -> None:
        case, name = loaded.case, f"{kind} at {phase}"
        note(f"{name}: {describe(case)}")
        killer = None
        if kind == "kill":
            killer = self.cluster.kill_in(phase)
            action, fired = (lambda: 0), killer.fired
        else:
            action = {
                "cancel": faults.cancel_shuffle(
                    self.cluster, lambda: {*self._kept(), *loaded.keys}
                ),
                "stall": faults.stall,
                "remove files": faults.remove_spill(self.cluster),
                "truncate files": faults.truncate_spill(self.cluster),
            }[kind]
        error = None
        try:
            with self.cluster.during(phase, action) as plugin:
                fired = killer.fired if killer else plugin.fired
                try:
                    run = self.cluster.shuffle(loaded.inputs, list(case.on), case.npartitions)
                except ShuffleHang:
                    raise
                except Exception as exc:
                    error = exc
        finally:
            if killer is not None:
                self.cluster.cluster.scheduler.remove_plugin(name=f"{killer.name}-{phase}")
                if killer.fired:  # the nanny restarts it; later steps start on a whole cluster
                    _healed(self.cluster.client, self.cluster.env.n_workers)
        exercised = bool(fired) and (kind == "kill" or bool(fired[0]))
        self.world.faults[(name, "fired" if exercised else "not exercised")] += 1
        if exercised and (phase, *conditions.MACHINE_FAULTS[kind]) in conditions.SHUFFLE_PRODUCED:
            conditions.fire(phase, *conditions.MACHINE_FAULTS[kind])
        if error is not None:
            self._failed(error, kind, phase, exercised, killer)
            return
        # whatever happened, what returned must be right (14.5, 14.14, 14.16-14.18)
        self._judge(case, run.outputs, f"returned after {name}")
        self.world.outcomes[f"correct after {name}"] += 1

    def _failed(self, exc: BaseException, kind: str, phase: str, exercised: bool, killer) -> None:
        """What an error after a fault must be; nothing else may fail."""
        name = f"{kind} at {phase}"
        text = f"{type(exc).__name__}: {exc}"
        if not exercised or kind == "stall":
            forget_error(exc)
            raise AssertionError(f"the shuffle failed ({name} {'did not fire' if not exercised else 'only delays'}): {text}")
        if kind == "kill" and self.world.has("shuffle.recover"):
            forget_error(exc)
            raise AssertionError(f"14.5: shuffle.recover is declared, yet {name} failed it: {text}")
        if kind == "kill":  # 14.5: the error names the phase or the lost worker
            host_port = killer.fired[0][1].rsplit("//", 1)[-1]
            ok = error_names(exc, re.escape(phase), re.escape(host_port))
            forget_error(exc)
            assert ok, f"14.5: after a kill in {phase} the error names neither it nor {host_port}: {text}"
        else:
            forget_error(exc)
        self.world.outcomes[f"error after {name}"] += 1

    @_fair("release_inputs")
    @rule()
    @_step
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


def _without_null_keys(case: ShuffleCase) -> ShuffleCase:
    """For implementations without ``shuffle.nulls``: the rows whose keys hold no null."""
    import pyarrow.compute as pc

    def keep(t: pa.Table) -> pa.Table:
        valid = None
        for k in case.on:
            v = pc.is_valid(t.column(k))
            valid = v if valid is None else pc.and_(valid, v)
        return t.filter(valid) if valid is not None else t

    return ShuffleCase(tuple(keep(t) for t in case.tables), case.on, case.npartitions)


def _retyped(table: pa.Table, name: str) -> pa.Table:
    """``table`` with column ``name`` of another type (int64 <-> string)."""
    i = table.schema.get_field_index(name)
    col = table.column(i)
    if pa.types.is_string(col.type):
        new = pa.array([0] * table.num_rows, pa.int64())
    else:
        new = pa.array(["x"] * table.num_rows, pa.string())
    return table.set_column(i, pa.field(name, new.type), new)


def _spilling_case(cluster: Any, seed: int) -> ShuffleCase:
    """1.5 times what the device and host tiers of the workers hold (at most
    SPILL_CASE_MAX), in 8 inputs."""
    host = cluster.env.host_limit or 0
    total = min(3 * (cluster.budget() + host) * cluster.env.n_workers // 2, SPILL_CASE_MAX)
    return uniform_case(8, max(1, total // 8 // 24), 4, seed=seed)


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
