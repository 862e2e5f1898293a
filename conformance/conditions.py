"""The operations x conditions matrix of SPEC.md section 15, as code: which rule produces
each cell, which cells are untested and why, and how often each cell fired in this run.

A cell is (operation, condition, when): ``when`` is before, during or after the operation.
The store's cells are produced by the rules of ``conformance/store/world.py`` (driven by the
machine of ``conformance/store/machines.py``), the shuffle's by the fault tests of
``conformance/shuffle/test_s14_faults.py`` and the shuffle machine. ``render()`` writes the
matrix SPEC.md holds between its ``matrix`` markers; ``tests/meta/test_conditions.py``
checks the two agree. ``fire()`` counts a cell as its fault happens (in each open :func:`recording`), and the
report prints the counts, so that a cell that never fires is seen, not trusted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

WHEN = ("before", "during", "after")

STORE_OPERATIONS = (
    "set", "get", "delete", "pop", "popitem", "clear", "setdefault", "contains/len/iter",
    "evict", "spill everything", "register_external", "close_store", "inspect",
    "spill on demand", "use of a value",
)  # fmt: skip
STORE_CONDITIONS = ("D1", "D2", "D3", "D4", "F1", "F2", "F3", "T1", "T2", "T3", "V1", "V2")

SHUFFLE_PHASES = ("transfer", "barrier", "unpack", "outputs read")
CLUSTER_CONDITIONS = ("W1", "W2", "W3", "C1", "S1", "S2", "L1", "T1")
CLUSTER_MEANING = {
    "W1": "a worker SIGKILLed (it held a finished task of the phase)",
    "W2": "a second worker SIGKILLed in the restart the first loss started",
    "W3": "a worker holding the only copy of inputs SIGKILLed",
    "C1": "the client cancels every task of the shuffle",
    "S1": "the spill files removed",
    "S2": "the spill files cut to half their size",
    "L1": "a link between two workers failing while the workers live",
    "T1": "the scheduler stalled for a while (timing: a slow link or a busy scheduler)",
}

_EVERY_OP = STORE_OPERATIONS
_MACHINE_OPS = ("set", "get", "delete", "pop", "popitem", "clear", "setdefault", "contains/len/iter",
                "evict", "spill everything", "register_external", "close_store", "inspect",
                "use of a value")  # fmt: skip

# (operation, condition, when) -> the rule (or test) that produces it
PRODUCED: dict[tuple[str, str, str], str] = {}


def _produce(rule: str, ops, condition: str, whens) -> None:
    for op in ops:
        for when in whens:
            PRODUCED[(op, condition, when)] = rule


# D1: another allocation held across operations: every operation the machine runs while it
# is held is one before which (and during which) it holds; outside_takes' own allocation is
# the spill on demand.
_produce("outside_takes", _MACHINE_OPS, "D1", ("before", "during"))
_produce("outside_takes", ("spill on demand",), "D1", ("during",))
_produce("outside_takes", ("inspect",), "D1", ("after",))
for _c, _action in (("D2", "alloc"), ("D3", "hold"), ("T3", "gc"), ("V1", "raise"), ("V2", "lie")):
    _produce(f"values_misbehave({_action})", ("spill everything", "get", "set"), _c, ("during",))
    _produce(f"values_misbehave({_action})", ("get",), _c, ("after",))
_produce("values_misbehave(alloc)", ("spill on demand",), "D2", ("during",))
_produce("device_full_read", ("get",), "D4", ("before", "during", "after"))
_produce("device_full_read", ("evict",), "D4", ("after",))
_produce("disk_full", ("set", "spill everything"), "F1", ("during",))
_produce("disk_full", ("get",), "F1", ("after",))
_produce("disk_damaged", ("get", "pop"), "F2", ("before",))
_produce("disk_damaged", ("delete", "get"), "F2", ("after",))
_produce("disk_damaged(dir)", ("get", "pop"), "F3", ("before",))
_produce("disk_damaged(dir)", ("get", "close_store"), "F3", ("after",))
_produce("reader_thread_during_evict", ("spill everything", "get"), "T1", ("during",))
_produce("reader_thread_during_evict", ("get",), "T1", ("after",))
_produce("external_dies_on_thread", ("register_external", "spill everything"), "T2", ("after",))
_produce("external_dies_on_thread", ("inspect",), "T2", ("after",))
_produce("deserialization_raises", ("get", "pop"), "V1", ("during",))
_produce("deserialization_raises", ("get",), "V1", ("after",))
_produce("check_all (gc.collect between steps)", _MACHINE_OPS, "T3", ("after",))

# Why a cell is untested, by condition and when (the first that matches).
UNTESTED: dict[str, str] = {
    "a": "the condition is made and undone inside one rule, around the operations that rule "
    "drives; the machine's other operations never run inside it",
    "b": "the suite has no hook inside this operation where the condition could start: it "
    "starts only through a value's own code (serialization, size), which this operation "
    "does not call, or through what the suite owns between calls",
    "d": "the condition needs a value on disk, which this operation does not read or write",
    "l": "a condition held across operations: after one operation is before the next, and "
    "is counted there",
    "e": "another thread's work racing the model's expectations; concurrent writers are "
    "STORE-THREAD-*'s (section 12), not the machine's",
}


def untested_reason(op: str, condition: str, when: str) -> str:
    """The key of :data:`UNTESTED` for a cell no rule produces."""
    if condition in ("F2", "F3") and op not in ("get", "pop", "delete", "close_store"):
        return "d"
    if condition in ("T1", "T2"):
        return "e"
    if when == "during" and condition in ("D2", "D3", "T3", "V1", "V2"):
        return "b"
    if condition == "D1" and when == "after":
        return "l"
    if when == "during":
        return "b"
    return "a"


# ----------------------------------------------------------------------- the shuffle
# (phase, condition, when) -> the conformance ID that produces it
SHUFFLE_PRODUCED: dict[tuple[str, str, str], str] = {
    ("transfer", "W1", "during"): "SHUF-FAULT-001",
    ("unpack", "W1", "during"): "SHUF-FAULT-002",
    ("outputs read", "W1", "before"): "SHUF-FAULT-004",
    ("transfer", "W2", "during"): "SHUF-FAULT-005",
    ("transfer", "W3", "during"): "SHUF-FAULT-006",
    ("barrier", "W3", "during"): "SHUF-FAULT-006",
    ("transfer", "C1", "before"): "SHUF-STATE-001",
    ("unpack", "C1", "before"): "SHUF-STATE-001",
    ("unpack", "S1", "before"): "SHUF-FAULT-003",
    ("unpack", "S2", "before"): "SHUF-STATE-001",
    ("transfer", "T1", "before"): "SHUF-STATE-001",
    ("unpack", "T1", "before"): "SHUF-STATE-001",
}
# the shuffle machine's faults (``shuffle.machine.world_moves.shuffle_while``'s kind) -> (condition, when)
MACHINE_FAULTS = {
    "kill": ("W1", "during"),
    "cancel": ("C1", "before"),
    "stall": ("T1", "before"),
    "remove files": ("S1", "before"),
    "truncate files": ("S2", "before"),
}


SHUFFLE_UNTESTED: dict[str, str] = {
    "f": "a link fails only with its workers in this cluster: the suite kills processes, it "
    "has no proxy between two live workers (loopback only)",
    "g": "a stall (the scheduler's loop stopped, SHUF-STATE-001) is made as a phase starts; "
    "inside a running phase it only lengthens that phase, and no timeout of a shuffle's own "
    "is in the contract (14.5 bounds the whole at 120 s)",
    "h": "the phase has not begun or is over for this condition: a kill there is a loss "
    "before or after the shuffle, which the inputs' or the outputs' rows cover (W1 on the "
    "outputs read, W3's inputs)",
    "i": "no files exist in this phase (shards are written in the transfer and read in the "
    "unpack): the condition changes nothing",
    "j": "a second loss is judged in the transfer's restart only; the other phases restart "
    "the same way, from the transfer",
    "k": "cancelling is judged as the phase starts (14.17); later it races the phase's end",
}


def shuffle_untested_reason(phase: str, condition: str, when: str) -> str:
    if condition == "L1":
        return "f"
    if condition == "T1":
        return "g"
    if condition in ("S1", "S2"):
        return "i"
    if condition == "W2":
        return "j"
    if condition == "C1":
        return "k"
    return "h"


# ----------------------------------------------------------------------- counting
_TALLIES: list[Counter[str]] = []  # the tallies of the recordings open now


@contextmanager
def recording() -> Iterator[Counter[str]]:
    """A test's own tally of the cells fired while the block runs (``"op|condition|when"`` ->
    times): nothing to clear by hand, nothing carried from one test into the next."""
    tally: Counter[str] = Counter()
    _TALLIES.append(tally)
    try:
        yield tally
    finally:
        _TALLIES[:] = [t for t in _TALLIES if t is not tally]  # by identity: tallies compare equal


def fire(op: str, condition: str, when: str, n: int = 1) -> None:
    """Count cell (op, condition, when) as fired; a cell that is not in the matrix is a
    bug of the suite's (a rule firing where SPEC.md says nothing is produced)."""
    if (op, condition, when) not in PRODUCED and (op, condition, when) not in SHUFFLE_PRODUCED:
        raise KeyError(f"cell {(op, condition, when)} is not produced by any rule in SPEC.md")
    for tally in _TALLIES:
        tally[f"{op}|{condition}|{when}"] += n


def fire_all(ops, condition: str, whens) -> None:
    for op in ops:
        for when in whens:
            fire(op, condition, when)


# ----------------------------------------------------------------------- rendering
def _cell(produced, reason_of, row: str, condition: str) -> str:
    parts = []
    for when in WHEN:
        rule = produced.get((row, condition, when))
        parts.append(when[0].upper() if rule else reason_of(row, condition, when))
    return " ".join(parts)


def render() -> str:
    """The matrix as SPEC.md holds it: a cell is three marks, before, during and after:
    ``B``/``D``/``A`` where a rule produces it, else the letter of its reason."""
    lines = ["| operation | " + " | ".join(STORE_CONDITIONS) + " |",
             "|---|" + "---|" * len(STORE_CONDITIONS)]  # fmt: skip
    for op in STORE_OPERATIONS:
        cells = [_cell(PRODUCED, untested_reason, op, c) for c in STORE_CONDITIONS]
        lines.append(f"| {op} | " + " | ".join(cells) + " |")
    lines += ["", "Untested, by letter:", ""]
    lines += [f"- **{k}** {v}" for k, v in UNTESTED.items()]
    lines += ["", "| shuffle phase | " + " | ".join(CLUSTER_CONDITIONS) + " |",
              "|---|" + "---|" * len(CLUSTER_CONDITIONS)]  # fmt: skip
    for phase in SHUFFLE_PHASES:
        cells = [_cell(SHUFFLE_PRODUCED, shuffle_untested_reason, phase, c) for c in CLUSTER_CONDITIONS]
        lines.append(f"| {phase} | " + " | ".join(cells) + " |")
    lines += ["", "Cluster conditions:", ""]
    lines += [f"- **{k}** {v}" for k, v in CLUSTER_MEANING.items()]
    lines += ["", "Untested, by letter:", ""]
    lines += [f"- **{k}** {v}" for k, v in SHUFFLE_UNTESTED.items()]
    lines += ["", "Produced by (store: rules of `conformance/store/world.py`; shuffle: conformance IDs):", ""]
    by_rule: dict[str, list[str]] = {}
    for (op, c, when), rule in PRODUCED.items():
        by_rule.setdefault(rule, []).append(f"{op} {c} {when}")
    for (phase, c, when), cid in SHUFFLE_PRODUCED.items():
        by_rule.setdefault(cid, []).append(f"{phase} {c} {when}")
    lines += [f"- `{rule}`: {len(cells)} cells" for rule, cells in by_rule.items()]
    return "\n".join(lines)


def fired_lines(fired: dict[str, int]) -> list[str]:
    """The report's section: every produced cell with how often it fired (0 shown)."""
    lines = ["| cell (operation or phase, condition, when) | produced by | fired |", "|---|---|---|"]
    for (op, c, when), rule in [*sorted(PRODUCED.items()), *sorted(SHUFFLE_PRODUCED.items())]:
        lines.append(f"| {op}, {c}, {when} | `{rule}` | {fired.get(f'{op}|{c}|{when}', 0)} |")
    return lines
