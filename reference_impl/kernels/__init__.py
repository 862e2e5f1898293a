"""Hash-partition kernels: one hash spec, CPU (numba.njit) and CUDA (numba.cuda) twins.

See ``hashing`` for the hash specification and ``README.md`` for the design.
"""

from __future__ import annotations

from .api import PartitionResult, hash_columns, partition, partition_by_ids, partition_ids
from .hashing import hash_bytes, hash_numpy, hash_strings_numpy, pid_numpy
from .strings import Strings

__all__ = [
    "PartitionResult",
    "Strings",
    "hash_bytes",
    "hash_columns",
    "hash_numpy",
    "hash_strings_numpy",
    "partition",
    "partition_by_ids",
    "partition_ids",
    "pid_numpy",
]
