"""A shuffle during which the world moves: a fault at a phase boundary (a worker killed, the
shuffle cancelled, the scheduler stalled, spill files removed or cut), then a correct result
or a clear error, never wrong data or a hang (14.5, 14.14, 14.16-14.18).

Whether the fault fired is tallied in ``World.faults``; one that did not is ``not
exercised``, never a pass.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from hypothesis import note

from ... import conditions
from .. import faults as faults
from ..calls import ShuffleHang, forget_error
from ..judge import error_names
from ..rich_tables import describe
from .world import Loaded, World, healed


def _action(world: World, loaded: Loaded, kind: str, held: Callable[[], list[str]]) -> Callable[[], int]:
    """The fault ``kind`` (not a kill) as an action for ``ShuffleCluster.during``."""
    cluster = world.cluster
    if kind == "cancel":  # the inputs still held, and this shuffle's, are spared
        return faults.cancel_shuffle(cluster, lambda: {*held(), *loaded.keys})
    return {
        "stall": faults.stall,
        "remove files": faults.remove_spill(cluster),
        "truncate files": faults.truncate_spill(cluster),
    }[kind]


def shuffle_while(
    world: World, loaded: Loaded, kind: str, phase: str, held: Callable[[], list[str]]
) -> None:
    """Shuffle ``loaded`` while the fault ``kind`` strikes at ``phase``; ``held()`` lists the
    keys of the inputs the machine still holds (a cancel spares them)."""
    cluster, case, name = world.cluster, loaded.case, f"{kind} at {phase}"
    note(f"{name}: {describe(case)}")
    killer = None
    if kind == "kill":
        killer = cluster.kill_in(phase)
        action, fired = (lambda: 0), killer.fired
    else:
        action = _action(world, loaded, kind, held)
    error = None
    try:
        with cluster.during(phase, action) as plugin:
            fired = killer.fired if killer else plugin.fired
            try:
                run = cluster.shuffle(loaded.inputs, list(case.on), case.npartitions)
            except ShuffleHang:
                raise
            except Exception as exc:
                error = exc
    finally:
        if killer is not None:
            cluster.cluster.scheduler.remove_plugin(name=f"{killer.name}-{phase}")
            if killer.fired:  # the nanny restarts it; later steps start on a whole cluster
                killed = {worker for _key, worker, _pid in killer.fired}
                healed(cluster.client, cluster.env.n_workers, killed)
    exercised = bool(fired) and (kind == "kill" or bool(fired[0]))
    world.faults[(name, "fired" if exercised else "not exercised")] += 1
    if exercised and (phase, *conditions.MACHINE_FAULTS[kind]) in conditions.SHUFFLE_PRODUCED:
        conditions.fire(phase, *conditions.MACHINE_FAULTS[kind])
    if error is not None:
        failed(world, error, kind, phase, exercised, killer)
        return
    # whatever happened, what returned must be right (14.5, 14.14, 14.16-14.18)
    world.judge(case, run.outputs, f"returned after {name}")
    world.outcomes[f"correct after {name}"] += 1


def failed(world: World, exc: BaseException, kind: str, phase: str, exercised: bool, killer) -> None:
    """What an error after a fault must be; nothing else may fail."""
    name = f"{kind} at {phase}"
    text = f"{type(exc).__name__}: {exc}"
    if not exercised or kind == "stall":
        forget_error(exc)
        raise AssertionError(f"the shuffle failed ({name} {'did not fire' if not exercised else 'only delays'}): {text}")
    if kind == "kill" and world.has("shuffle.recover"):
        forget_error(exc)
        raise AssertionError(f"14.5: shuffle.recover is declared, yet {name} failed it: {text}")
    if kind == "kill":  # 14.5: the error names the phase or the lost worker
        host_port = killer.fired[0][1].rsplit("//", 1)[-1]
        ok = error_names(exc, re.escape(phase), re.escape(host_port))
        forget_error(exc)
        assert ok, f"14.5: after a kill in {phase} the error names neither it nor {host_port}: {text}"
    else:
        forget_error(exc)
    world.outcomes[f"error after {name}"] += 1
