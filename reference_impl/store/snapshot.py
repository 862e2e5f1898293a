"""What a store holds, as one immutable reading (the store's only report type)."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class StoreSnapshot:
    """What the store holds, read without unspilling or touching recency.

    ``device_bytes``/``host_bytes``/``disk_bytes`` include externals; ``lru``
    lists device-resident keys from least to most recently used.
    """

    tiers: dict[Hashable, str] = field(default_factory=dict)
    device_bytes: int = 0
    host_bytes: int = 0
    disk_bytes: int = 0
    lru: list[Hashable] = field(default_factory=list)
    n_externals: int = 0
