"""The preamble every store call shares, as one decorator (zict's ``@locked`` idea).

A store call takes the store's lock, refuses a closed store, and forgets the proxies
that died since the last call (their finalizers only queue them: no finalizer may
take a lock); when it returns, it forgets those its own work let die, so the totals
it leaves are exact.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import StoreClosedError

F = TypeVar("F", bound=Callable[..., Any])


def locked(method: F | None = None, *, check: Callable[..., None] | None = None) -> Any:
    """Run ``method`` under the store's lock with the shared preamble.

    ``check`` validates the arguments first, outside the lock, so a bad argument is
    named even on a closed store.
    """

    def decorate(method: F) -> F:
        @functools.wraps(method)
        def call(self: Any, *args: Any) -> Any:
            if check is not None:
                check(*args)
            with self._lock:
                if self._closed:
                    raise StoreClosedError("this ProxifyHostFile was closed")
                if self._inbox:
                    self._tracker.drain()
                try:
                    return method(self, *args)
                finally:
                    if self._inbox:
                        self._tracker.drain()

        return call  # type: ignore[return-value]

    return decorate if method is None else decorate(method)
