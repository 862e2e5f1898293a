"""Hash-partition kernels: one hash spec, CPU (numba.njit) and CUDA (numba.cuda) twins.

See ``hashing`` for the hash specification and ``README.md`` for the design.
"""

from __future__ import annotations

from .api import PartitionResult, hash_columns, partition, partition_ids
from .hashing import hash_numpy, pid_numpy

__all__ = [
    "PartitionResult",
    "hash_columns",
    "hash_numpy",
    "partition",
    "partition_ids",
    "pid_numpy",
]
