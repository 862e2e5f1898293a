"""Errors that say which phase of a shuffle failed and on which worker."""

from __future__ import annotations

PHASES = ("plan", "transfer", "barrier", "unpack")


class ShuffleError(RuntimeError):
    """A shuffle failed; ``phase`` and ``worker`` say where, the message says why.

    It is raised by the output futures, so a caller sees one clear error instead
    of a hang or a partial result.
    """

    def __init__(self, shuffle_id: str, phase: str, worker: str | None, reason: str) -> None:
        self.shuffle_id = shuffle_id
        self.phase = phase
        self.worker = worker
        self.reason = reason
        where = f" on worker {worker}" if worker else ""
        super().__init__(f"shuffle {shuffle_id} failed in the {phase} phase{where}: {reason}")

    def __reduce__(self):  # keyword state does not survive the default pickling
        return type(self), (self.shuffle_id, self.phase, self.worker, self.reason)

    def copy(self) -> ShuffleError:
        """A fresh copy, without a traceback, to raise or return in another place.

        A stored exception raised again keeps the traceback of every raise, and with it
        the frames (the inputs and shards they hold) of each task it passed, in a cycle
        only a garbage collection frees."""
        return type(self)(self.shuffle_id, self.phase, self.worker, self.reason)


class ShuffleClosedError(ShuffleError):
    """The shuffle was already cleaned up on this worker (finished, failed or cancelled)."""


class RunSuperseded(ShuffleClosedError):
    """This run of the shuffle was replaced by a newer one (a worker left): a task that
    meets it is rescheduled, and runs again in the new run."""


class PeerLost(ShuffleError):
    """Shards could not reach a worker (``worker``): it may have left the cluster, in which
    case the coordinator restarts the shuffle and the sender's task runs again."""
