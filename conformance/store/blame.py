"""Which clause a state machine's failure broke (issue 43).

A machine cites every clause it checks (STORE-STATE-001 cites forty), so its failure would
name them all. The failing step names fewer: the failure's own text first (an invariant's
message says which rule of the contract it checks), then the failing rule's docstring.
"""

from __future__ import annotations

import re

# Messages of the store-wide checks (conformance.store.harness, conformance.store.machines) -> clause.
MESSAGES: tuple[tuple[str, str], ...] = (
    (r"device_bytes [0-9,]+ > device limit", "4.1"),
    (r"the store reports device_bytes=.*device ledger", "3.1"),
    (r"disk_bytes [0-9,]+ != [0-9,]+ bytes in", "3.5"),
    (r"no key is on disk, yet spill_dir holds", "3.5"),
    (r"host_bytes [0-9,]+ > host limit", "4.4"),
    (r"keys\(\)/len\(\) disagree", "1.1"),
    (r"inspect\(\) tiers cover", "1.1"),
    (r"the device peaked at", "4.2"),
    (r"came back wrong", "2.1"),
    (r"files outside every store's spill_dir", "9.2"),
    (r"host-only values in the host tier hold", "3.7"),
)
_STEP = re.compile(r"^(?:\w+ = )?state\.(\w+)\(", re.M)
_CLAUSE = re.compile(r"\b(\d{1,2}\.\d{1,2})\b")


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def failed_clauses(exc: BaseException, machine: type, cited: tuple[str, ...] | None = None) -> list[str]:
    """The clauses ``exc`` broke (among ``cited``, when given), in order; [] if none is clear."""
    found: list[str] = []
    for leaf in _leaves(exc):
        text = f"{type(leaf).__name__}: {leaf}"
        hits = [c for pattern, c in MESSAGES if re.search(pattern, text)]
        lead = re.match(r"\s*(\d{1,2}\.\d{1,2}):", str(leaf))  # "14.5: ..." names its clause
        if lead:
            hits.insert(0, lead.group(1))
        if not hits:
            notes = "\n".join(map(str, getattr(leaf, "__notes__", ()) or ()))
            steps = _STEP.findall(notes)
            rule = getattr(machine, steps[-1], None) if steps else None
            hits = _CLAUSE.findall((getattr(rule, "__doc__", None) or "").split("\n\n")[0])
        found += [c for c in hits if (cited is None or c in cited) and c not in found]
    return found
