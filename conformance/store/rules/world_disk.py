"""The disk moving under the stores: spill files changed, truncated, removed or swapped,
the spill directory removed, and a full disk (every write fails)."""

from __future__ import annotations

import os
import random
import resource
import shutil
import signal
import threading
from collections.abc import Hashable

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from ... import conditions
from ...api import evict as adapter_evict
from .. import strategies as S
from ..harness import files_under
from .base import SIDES, Side


class DiskRules:
    """Damaged spill files and a full disk (conditions F1, F2 and F3)."""

    @precondition(
        lambda self: (
            self.world
            and self.has("store.spill.disk")
            and any(s.model.keys for s in self.sides)
        )
    )
    @rule(
        side=SIDES,
        how=st.sampled_from(["flip", "truncate", "remove", "replace", "dir"]),
        pick=st.integers(0, 63),
        via=st.sampled_from(["get", "pop"]),
    )
    def disk_damaged(self, side, how, pick, via):
        """Clauses 10.1, 10.2, 10.3, 10.6 and 10.7: the environment changes, truncates,
        removes or replaces a spill file, or removes the whole spill directory, while values
        are on disk. Reading each disk value gives it back exactly or raises an error naming
        its key (a changed or truncated file must raise); a damaged key can be deleted; every
        other key is intact."""
        s = self._side(side)
        if how == "replace" and not self.has("store.spill.authenticated"):
            how = "flip"  # an authentic file under another key: only authentication (10.3) sees it
        if self.has("store.evict.manual"):
            adapter_evict(self.adapter, s.h.store, 16 * self.limit)
        tiers = s.h.snapshot().tiers
        on_disk = [k for k in s.model.keys if tiers.get(k) == "disk"]
        spill_dir = s.h.env.spill_dir
        files = sorted(files_under(spill_dir))
        if not on_disk or not files or s.proxies:
            return  # with externals on disk, a file may be theirs: never read back here
        path = files[pick % len(files)]
        self.faults[f"spill file {how}"] += 1
        condition = "F3" if how == "dir" else "F2"
        conditions.fire(via, condition, "before")
        conditions.fire("get", condition, "after")
        if not self._damage(how, path, files, pick, spill_dir):
            return
        raised = self._read_damaged(s, on_disk, how, via)
        if how in ("flip", "truncate", "replace"):
            assert raised, (
                f"a spill file was damaged ({how}: {os.path.relpath(path, spill_dir)}) and every "
                f"value on disk read back without an error"
            )
        for key in raised:
            if key in s.h.store:
                del s.h.store[key]  # clause 10.6: a damaged key can be deleted
            s.model.forget(key)
        self._settle(s)

    def _damage(self, how: str, path: str, files: list[str], pick: int, spill_dir: str) -> bool:
        """Damage ``path`` (or, for ``dir``, the whole ``spill_dir``) as ``how`` says;
        False where there was nothing to damage (an empty file, no other file to copy)."""
        if how == "flip":
            with open(path, "r+b") as f:
                size = os.fstat(f.fileno()).st_size
                if size == 0:
                    return False
                f.seek(random.Random(pick).randrange(size))
                b = f.read(1)
                f.seek(-1, os.SEEK_CUR)
                f.write(bytes([b[0] ^ 0x5A]))
        elif how == "truncate":
            os.truncate(path, os.path.getsize(path) // 2)
        elif how == "remove":
            os.unlink(path)
        elif how == "replace":
            others = [p for p in files if p != path]
            if not others:
                return False
            shutil.copyfile(others[pick % len(others)], path)
        else:
            shutil.rmtree(spill_dir)
            os.makedirs(spill_dir, mode=0o700)
            self._disk_fails()  # what the store made inside is gone: later writes may fail
        return True

    def _read_damaged(self, s: Side, on_disk: list[Hashable], how: str, via: str) -> list[Hashable]:
        """Read (or pop) every key that was on disk: exact, or an error naming the key.
        The keys whose read raised."""
        raised = []
        for key in on_disk:
            try:
                got = s.h.store.pop(key) if via == "pop" else s.h.store[key]
            except Exception as exc:
                assert _names(exc, key), (
                    f"reading {key!r} after its spill file was damaged ({how}) raised "
                    f"{exc!r}, which does not name the key"
                )
                raised.append(key)
                continue
            why = S.mismatch(self.device, got, s.model.held(key).expected)
            del got
            assert why is None, (
                f"after a spill file was damaged ({how}), store[{key!r}] came back wrong: {why}"
            )
            if via == "pop":
                s.model.forget(key)
        return raised

    @precondition(
        lambda self: (
            self.world
            and self.has("store.spill.disk")
            and self.sides
            and threading.current_thread() is threading.main_thread()
        )
    )
    @rule(
        side=SIDES,
        op=st.sampled_from(["evict", "put"]),
        spec=S.value_specs("sim", st.sampled_from([4096, 30_000, 60_000])),
    )
    def disk_full(self, side, op, spec):
        """Clause 9.6: every write fails (the process's file-size limit is 0, like a full
        disk) during a spill of everything or a set that must spill. The set's value is
        stored all the same; nothing is lost or corrupted; sections 3 and 4 hold, the host
        limit excepted."""
        s = self._side(side)
        hits = []
        old = signal.signal(signal.SIGXFSZ, lambda *a: hits.append(1))
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        built = self._build(spec) if op == "put" else None
        before = {k: v for k, v in files_under(s.h.env.spill_dir).items()}
        try:
            resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))
            try:
                if op == "put":
                    s.h.store["full-disk"] = built.value
                elif self.has("store.evict.manual"):
                    adapter_evict(self.adapter, s.h.store, 16 * self.limit)
            except Exception:
                pass  # an error is allowed; losing the value is not
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            signal.signal(signal.SIGXFSZ, old)
        if hits or files_under(s.h.env.spill_dir) != before:
            self.faults["disk full"] += 1
            conditions.fire("set" if op == "put" else "spill everything", "F1", "during")
            conditions.fire("get", "F1", "after")
        self._disk_fails()
        if built is not None:
            assert "full-disk" in s.h.store, (
                "a set on a full disk lost its value: the key is not in the store"
            )
            s.model.remember("full-disk", self._held(built))
            del built
        self._read_back_everything(s, "a full disk")


def _names(exc: BaseException, key: Hashable) -> bool:
    """Whether ``exc``'s message, or one in its chain, names ``key``."""
    text = str(exc)
    seen = set()
    while exc is not None and id(exc) not in seen:
        text += " " + str(exc)
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return repr(key) in text or str(key) in text
