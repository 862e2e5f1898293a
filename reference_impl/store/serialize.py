"""Host payloads: pickle protocol 5 with out-of-band frames.

Out-of-band frames keep large buffers zero-copy between the device copy, the
disk writer and the reader, and give the disk tier one buffer per frame.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Payload:
    """A serialized object: a pickle ``header`` and its out-of-band ``frames``."""

    header: bytes
    frames: list[memoryview] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return len(self.header) + sum(f.nbytes for f in self.frames)

    @property
    def frames_nbytes(self) -> int:
        return sum(f.nbytes for f in self.frames)

    def __reduce_ex__(self, protocol: int):
        if protocol >= 5:
            frames = [pickle.PickleBuffer(f) for f in self.frames]
        else:
            frames = [bytes(f) for f in self.frames]
        return _rebuild_payload, (self.header, frames)


def _rebuild_payload(header: bytes, frames: list[Any]) -> Payload:
    return Payload(header, [memoryview(f).cast("B") for f in frames])


def _as_bytes_view(buf: pickle.PickleBuffer) -> memoryview:
    view = buf.raw()  # contiguous, format "B"
    return view


def dumps(obj: Any) -> Payload:
    """Serialize ``obj`` on the host, keeping large buffers out of band."""
    buffers: list[pickle.PickleBuffer] = []
    header = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    return Payload(header, [_as_bytes_view(b) for b in buffers])


def loads(payload: Payload) -> Any:
    return pickle.loads(payload.header, buffers=payload.frames)
