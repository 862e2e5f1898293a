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
    impl: str = "reference"  # the adapters that reach the modules (--impl; comma-separated)

    @property
    def slice_key(self) -> str:
        """The baseline's key for this slice: the IDs, and the adapter when not the reference."""
        return self.ids if self.impl == "reference" else f"{self.impl}:{self.ids}"

    def pytest_args(self) -> list[str]:
        """One ``--impl`` per adapter: a mutant any of them fails is killed."""
        return [*PYTEST, *(f"--impl={impl}" for impl in self.impl.split(","))]


# No "conformance" path here: with node ids after it, pytest would run the whole directory too.
PYTEST = ["-m", "pytest", "--device=sim", "-p", "no:randomly"]
# The lazy shuffle's front end: only a shuffle under dask's own API reaches it.
FRONT_END = (
    "reference_impl/shuffle/carriers.py",
    "reference_impl/shuffle/frames.py",
    "reference_impl/shuffle/in_dask.py",
)


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
        _glob(
            "reference_impl/shuffle/*.py",
            skip=("__init__.py", "errors.py", "preload.py", *(m.rsplit("/", 1)[1] for m in FRONT_END)),
        ),
        "SHUF-*",
        in_process=False,
        # both adapters (issue 44): the destination path of run.py only the lazy one reaches
        impl="reference,reference-in-dask",
    ),
    Group("front-end", FRONT_END, "SHUF-*", in_process=False, impl="reference-in-dask"),
    # The Table's Arrow interchange and its logical types: every shuffle input and output
    # crosses them, on the workers.
    Group(
        "table",
        tuple(f"reference_impl/table/{m}.py" for m in (
            "arrow", "dtypes", "logical", "scalars", "table", "nested", "nested_encode", "nested_decode",
            "ranges",
        )),
        "SHUF-*",
        in_process=False,
    ),
    Group(
        "partition",
        ("reference_impl/table/partition.py", "reference_impl/kernels/cpu.py"),
        "SHUF-*",
        in_process=False,
        # partition_by_destination is reached only by a shuffle under dask's API (the coverage
        # map of 4f94ddd: 17 of its mutants reached by no eager test)
        impl="reference,reference-in-dask",
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
