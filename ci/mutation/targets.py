"""What is mutated, which part of the suite judges it, and which mutation operators apply.

Only the conformance suite judges (issue 23): it is what judges third parties, so a mutant
that only `tests/` kills is a property the contract lacks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Group:
    """Modules judged by one slice of the suite."""

    name: str
    modules: tuple[str, ...]
    ids: str  # --conformance-ids for the slice
    in_process: bool  # the code runs in the pytest process, so line coverage selects tests


def _glob(pattern: str, skip: tuple[str, ...] = ()) -> tuple[str, ...]:
    root = Path(__file__).resolve().parents[2]
    found = sorted(str(p.relative_to(root)) for p in root.glob(pattern))
    return tuple(p for p in found if not p.endswith(skip))


GROUPS = (
    Group(
        "store",
        _glob("reference_impl/store/*.py", skip=("__init__.py", "errors.py")),
        "STORE-*",
        in_process=True,
    ),
    # The shuffle, the partitioner and the CPU kernels run in dask worker processes: line
    # coverage in the pytest process cannot see them, so every SHUF test is a candidate.
    Group(
        "shuffle",
        _glob("reference_impl/shuffle/*.py", skip=("__init__.py", "errors.py", "preload.py")),
        "SHUF-*",
        in_process=False,
    ),
    Group(
        "partition",
        ("reference_impl/table/partition.py", "reference_impl/kernels/cpu.py"),
        "SHUF-*",
        in_process=False,
    ),
)


def group_of(module: str) -> Group:
    for g in GROUPS:
        if module in g.modules:
            return g
    raise KeyError(f"{module} is not a mutation target (targets: {[g.name for g in GROUPS]})")


# One natural replacement per operator (the classic AOR/ROR/LCR sets) instead of cosmic-ray's
# every-to-every table: `a + b` becomes `a - b`, not also `a ** b`, `a >> b` and seven more,
# which would be 2,387 binary-operator mutants in these modules alone and add little.
KEEP_BINARY = {
    "Add_Sub", "Sub_Add", "Mul_Div", "Div_Mul", "FloorDiv_Mul", "Mod_FloorDiv", "Pow_Mul",
    "LShift_RShift", "RShift_LShift", "BitOr_BitAnd", "BitAnd_BitOr", "BitXor_BitOr",
}  # fmt: skip
KEEP_COMPARISON = {
    "Eq_NotEq", "NotEq_Eq", "Lt_LtE", "LtE_Lt", "Gt_GtE", "GtE_Gt", "Lt_GtE", "Gt_LtE",
    "Is_IsNot", "IsNot_Is",
}  # fmt: skip
KEEP_UNARY = {"USub_UAdd", "Delete_Not", "Delete_Invert", "Delete_USub"}


def keep_operator(name: str) -> bool:
    """Whether cosmic-ray's operator ``core/...`` is in the policy."""
    short = name.split("/", 1)[-1]
    for prefix, keep in (
        ("ReplaceBinaryOperator_", KEEP_BINARY),
        ("ReplaceComparisonOperator_", KEEP_COMPARISON),
        ("ReplaceUnaryOperator_", KEEP_UNARY),
    ):
        if short.startswith(prefix):
            return short[len(prefix) :] in keep
    return short not in ("VariableReplacer", "VariableInserter")
