"""Broken stores that are mutants of the reference: each is one mutation that survived the
conformance suite (ci/mutation), fixed in place by swapping the code of one function.

A mutant survivor is a property the contract lacked; the clause added for it is proven by the
zoo catching the same mutant. The patch is textual (``old`` -> ``new`` once, inside the named
function), so an entry fails loudly when the reference's code moves on and the text is gone.
The patch is process-wide (``Patching``): a zoo process makes it only around the mutant's own
tests.
"""

from __future__ import annotations

import importlib
import inspect
import textwrap
from typing import Any

from broken_base import Patching


def _target(module: Any, qualname: str) -> Any:
    obj: Any = module
    for part in qualname.split("."):
        obj = vars(obj)[part] if isinstance(obj, type) or inspect.ismodule(obj) else getattr(obj, part)
    if isinstance(obj, staticmethod):
        return obj.__func__
    return obj.fget if isinstance(obj, property) else obj


def mutated_function(module_name: str, qualname: str, old: str, new: str) -> Any:
    """A copy of one function of the reference with ``old`` replaced by ``new`` (once)."""
    module = importlib.import_module(module_name)
    func = _target(module, qualname)
    source = textwrap.dedent(inspect.getsource(func))
    if source.count(old) != 1:
        raise AssertionError(
            f"{module_name}.{qualname}: {old!r} occurs {source.count(old)} times (want once): "
            "the reference changed; update this mutant"
        )
    lines = source.splitlines()
    while lines and lines[0].lstrip().startswith("@"):
        lines.pop(0)  # the decorators already applied to the live function
    namespace: dict[str, Any] = {}
    code = compile("\n".join(lines).replace(old, new, 1), inspect.getsourcefile(func), "exec")
    exec(code, vars(module), namespace)  # noqa: S102 - the reference's own code, one change
    mutated = namespace[func.__name__]
    if mutated.__code__.co_freevars != func.__code__.co_freevars:
        raise AssertionError(f"{qualname}: the mutant's closure differs from the original")
    return mutated


class Mutant(Patching):
    """The reference with one function mutated (``module``, ``qualname``, ``old`` -> ``new``)."""

    module = ""
    qualname = ""
    old = ""
    new = ""

    def patch(self) -> None:
        """Swap in the mutated code of one function of the reference, in place."""
        func = _target(importlib.import_module(self.module), self.qualname)
        mutated = mutated_function(self.module, self.qualname, self.old, self.new)
        self.set(func, "__code__", mutated.__code__)


def mutant(name: str, violates: tuple[str, ...], module: str, qualname: str, old: str, new: str) -> type:
    attrs = dict(name=name, violates=violates, module=module, qualname=qualname, old=old, new=new)
    return type(name.title().replace("-", ""), (Mutant,), attrs)


# Mutants that survived the suite before their clause existed (docs/mutation-triage.toml).
SIZEOF_UNSPILLS = mutant(
    "mutant-sizeof-unspills", ("5.6",), "reference_impl.store.proxy", "_sizeof_proxy",
    'return int(state_of(proxy).meta.get("nbytes", 0))', "return int(_use(proxy).nbytes)",
)
UFUNC_OUT_COPIES = mutant(
    "mutant-ufunc-out-copies", ("13.3", "13.1"), "reference_impl.store.proxy",
    "ProxyObject.__array_ufunc__", "tuple(unwrap(o) for o in", "tuple(unwrap(o).copy() for o in",
)
SEND_UNSPILLS = mutant(
    "mutant-send-unspills", ("13.4", "5.3"), "reference_impl.store.comms", "_host_payload",
    "state = manager.proxy_host_state(pxy) if manager is not None else pxy.held",
    "state = (manager.proxy_use(pxy), manager.proxy_host_state(pxy))[1] if manager is not None else pxy.held",
)
CLOSED_READS_ZEROS = mutant(
    "mutant-closed-reads-zeros", ("11.7",), "reference_impl.store.proxy", "use_unmanaged",
    "raise StoreClosedError(",
    'return state.device.zeros(state.meta["shape"], state.meta["dtype"])\n            raise StoreClosedError(',
)
DEAD_HANDLER_CLAIMS = mutant(
    "mutant-dead-oom-handler-claims-progress", ("11.6",), "reference_impl.store.hostfile",
    "_OomHook.__call__", "return False\n    return store._on_oom", "return True\n    return store._on_oom",
)
CONTAINS_UNHASHABLE = mutant(
    "mutant-contains-unhashable", ("1.16",), "reference_impl.store.hostfile",
    "ProxifyHostFile.__contains__", "return False", "return True",
)
MISSING_FILE_UNNAMED = mutant(
    "mutant-missing-file-unnamed", ("10.7",), "reference_impl.store.disk", "SpillDir.read",
    "except FileNotFoundError as exc:", "except LookupError as exc:",
)
# The survivor behind 11.8 (an adopted host proxy's bytes added to its record but not to the
# host total) cannot be written against the store's single-writer accounting (issue 28); the
# clause is held by a store that adopts a proxy another open store still manages.
ADOPTED_WHILE_MANAGED = mutant(
    "mutant-adopted-while-managed", ("11.8", "3.1"), "reference_impl.store.tracker",
    "Tracker.adopt", "if owner is not None and not owner.closed:",
    "if owner is not None and not owner.closed and False:",
)
DISK_WRITE_BACK_ADDS = mutant(
    "mutant-disk-write-back-adds", ("3.5",), "reference_impl.store.mover", "TierMover.write_back",
    "self.accounting.resize(rec, new_file.nbytes)",
    "self.accounting.resize(rec, new_file.nbytes + rec.held_nbytes)",
)
HOST_USE_NOT_TOUCHED = mutant(
    "mutant-host-use-not-touched", ("5.4",), "reference_impl.store.recency", "Recency.touch",
    "elif lru == HOST:", "elif lru == HOST and False:",
)
BIG_BODY_UNHASHED = mutant(
    "mutant-big-body-unhashed", ("9.10", "10.1"), "reference_impl.store.disk", "_Mac._drain",
    "if not queue:", "if queue:",
)
TABLE_COUNTS_ONE_BUFFER = mutant(
    "mutant-table-counts-one-buffer", ("3.8", "3.1"), "reference_impl.store.records",
    "Record.set_allocs", "if len(allocs) == 1:", "if len(allocs) >= 1:",
)
ALIAS_LOOKUP_BY_SIZE = mutant(
    "mutant-alias-lookup-by-size", ("3.2",), "reference_impl.store.tracker", "Tracker._leaf",
    "None if pair is None else pair[0]", "None if pair is None else pair[1]",
)
HOST_OBJECT_NOT_LINKED = mutant(
    "mutant-host-object-not-linked", ("3.2",), "reference_impl.store.index",
    "UnitIndex.link_host_value", "if other is None or other.value is not value:", "if True:",
)
TABLE_SLICE_NOT_REBASED = mutant(
    "mutant-table-slice-not-rebased", ("2.7",), "reference_impl.table.frames", "encode",
    "            if start:", "            if False:",
)
UNSPILL_ROOM_OF_BASE = mutant(
    "mutant-unspill-room-of-base", ("4.9",), "reference_impl.store.index", "UnitIndex.add_allocs",
    'int(state.meta.get("nbytes", 0)) or rec.device_nbytes',
    'int(state.meta.get("nbytes", 0)) and rec.device_nbytes',
)
# Not a survivor: the plain case of the same property, written by hand in the same form.
SET_EVICTS_THRICE = mutant(
    "mutant-set-evicts-thrice", ("4.9",), "reference_impl.store.mover", "TierMover._place_new",
    "self.evict_device(accounting.device_bytes - self.device_memory_limit)",
    "self.evict_device(3 * (accounting.device_bytes - self.device_memory_limit))",
)

# Survivors of the issue-44 sample (commit 55c51d5, docs/mutation-triage.toml), one each.
SHARED_TAKEN_FOR_LONE = mutant(
    "mutant-shared-taken-for-lone", ("3.9", "5.5"), "reference_impl.store.index",
    "UnitIndex.solo_record", "if type(rec.holders) is set:", "if not type(rec.holders) is set:",
)
LAST_KEY_LEFT_AS_SET = mutant(
    "mutant-last-key-left-as-set", ("3.9", "3.3"), "reference_impl.store.index",
    "UnitIndex.discard_key", "if len(holders) == 1:", "if len(holders) != 1:",
)
LINKS_UNCOUNTED_TWICE = mutant(
    "mutant-links-uncounted-twice", ("3.9", "5.5"), "reference_impl.store.index",
    "UnitIndex.discard_key", "self.links -= 1", "self.links -= 2",
)
TUPLE_KEY_KEEPS_ITS_HOLD = mutant(
    "mutant-tuple-key-keeps-its-hold", ("3.9", "5.5"), "reference_impl.store.hostfile",
    "ProxifyHostFile._remove_entry", "rec = records.get(pid)\n        if rec is not None:",
    "rec = records.get(pid)\n        if not rec is not None:",
)
TUPLE_TAKEN_FOR_ITS_LAST_ARRAY = mutant(
    "mutant-tuple-taken-for-its-last-array", ("3.9", "3.6"), "reference_impl.store.index",
    "UnitIndex.add_entry", "if len(entry.pids) == 1:", "if not len(entry.pids) == 1:",
)
EXTERNAL_STORED_CRASHES = mutant(
    "mutant-external-stored-crashes", ("7.4",), "reference_impl.store.index",
    "UnitIndex.add_entry", "if queued is None:", "if not queued is None:",
)
TABLE_WITHOUT_BUFFERS_REFUSED = mutant(
    "mutant-table-without-buffers-refused", ("2.7",), "reference_impl.store.records",
    "Record.set_allocs", "if len(allocs) == 1:", "if len(allocs) == 0:",
)
CLEAN_COPY_LEAVES_A_BYTE = mutant(
    "mutant-clean-copy-leaves-a-byte", ("6.4", "3.5"), "reference_impl.store.accounting",
    "Accounting.reuse_clean", "rec.clean_nbytes = 0", "rec.clean_nbytes = 1",
)

UNPICKLED_VALUE_REFUSED = mutant(
    "mutant-unpickled-value-refused", ("13.7",), "reference_impl.store.tracker",
    "Tracker.adopt", "if owner is not None and not owner.closed:",
    "if owner is not None or not owner.closed:",
)

TABLE_SHARING_UNSEEN = mutant(
    "mutant-table-sharing-unseen", ("3.9",), "reference_impl.store.index",
    "UnitIndex.solo_record", "for aid in rec.more_allocs or ():", "for aid in []:",
)

USE_DECIDES_BEFORE_FORGETTING = mutant(
    "mutant-use-decides-before-forgetting", ("4.9",), "reference_impl.store.hostfile",
    "ProxifyHostFile.proxy_use", "if self._inbox:", "if not self._inbox:",
)

HOST_QUEUE_DROPS_KEPT = mutant(
    "mutant-host-queue-drops-kept", ("9.11", "4.4"), "reference_impl.store.recency",
    "Recency.host_victims", "if unit.lru != HOST:", "if not unit.lru != HOST:",
)
# Not a survivor: the plain case of 9.6's part-way failure (the survivor f45f81efa9d9 leaves the
# files to the SpillFile finalizers, which remove them within the same call).
FAILED_GROUP_FILES_KEPT = mutant(
    "mutant-failed-group-files-kept", ("9.6", "3.5"), "reference_impl.store.mover",
    "TierMover.spill_to_disk", "item[1].remove()",
    "self.stats.setdefault('leaked', []).append(item[1])",
)

HOST_PEER_COUNTED_BY_ANOTHER = mutant(
    "mutant-host-peer-counted-by-another", ("3.3",), "reference_impl.store.index",
    "UnitIndex.owner", "return peers[0] if peers else entry",
    "return peers[1] if peers else entry",
)

EMPTY_TABLE_SIZED_ONE_BYTE = mutant(
    "mutant-empty-table-sized-one-byte", ("6.1",), "reference_impl.store.records",
    "Record.device_nbytes", "if self.more_allocs else 0", "if self.more_allocs else 1",
)

SET_AFTER_CLOSE_ACCEPTED = mutant(
    "mutant-set-after-close-accepted", ("11.9",), "reference_impl.store.hostfile",
    "ProxifyHostFile.__setitem__", "if self._closed:", "if not self._closed:",
)

READ_BACK_STORED_AGAIN_COUNTED_TWICE = mutant(
    "mutant-read-back-stored-again-counted-twice", ("3.2",), "reference_impl.store.index",
    "UnitIndex._name_raw", "if proxy is not None else None", "if not proxy is not None else None",
)

SHARED_USE_TOUCHES_ONE = mutant(
    "mutant-shared-use-touches-one", ("5.2", "5.4", "3.9"), "reference_impl.store.hostfile",
    "ProxifyHostFile._touch_record", "if not index.links or", "if index.links or",
)

ZOO: dict[str, tuple[type, str]] = {
    "mutant_unspill_room_of_base": (UNSPILL_ROOM_OF_BASE, "STORE-LIMIT-008"),
    "mutant_set_evicts_thrice": (SET_EVICTS_THRICE, "STORE-LIMIT-008"),
    "mutant_table_slice_not_rebased": (TABLE_SLICE_NOT_REBASED, "STORE-TABLE-001"),
    "mutant_alias_lookup_by_size": (ALIAS_LOOKUP_BY_SIZE, "STORE-ALIAS-003"),
    "mutant_host_object_not_linked": (HOST_OBJECT_NOT_LINKED, "STORE-ALIAS-004"),
    "mutant_table_counts_one_buffer": (TABLE_COUNTS_ONE_BUFFER, "STORE-TABLE-001"),
    "mutant_big_body_unhashed": (BIG_BODY_UNHASHED, "STORE-DISK-013"),
    "mutant_host_use_not_touched": (HOST_USE_NOT_TOUCHED, "STORE-CASCADE-004"),
    "mutant_disk_write_back_adds": (DISK_WRITE_BACK_ADDS, "STORE-INPLACE-002"),
    "mutant_adopted_while_managed": (ADOPTED_WHILE_MANAGED, "STORE-MAP-011"),
    "mutant_contains_unhashable": (CONTAINS_UNHASHABLE, "STORE-MAP-010"),
    "mutant_missing_file_unnamed": (MISSING_FILE_UNNAMED, "STORE-INTEG-006"),
    "mutant_sizeof_unspills": (SIZEOF_UNSPILLS, "STORE-USE-001"),
    "mutant_ufunc_out_copies": (UFUNC_OUT_COPIES, "STORE-USE-002"),
    "mutant_send_unspills": (SEND_UNSPILLS, "STORE-USE-003"),
    "mutant_closed_reads_zeros": (CLOSED_READS_ZEROS, "STORE-USE-004"),
    "mutant_dead_oom_handler_claims_progress": (DEAD_HANDLER_CLAIMS, "STORE-CLOSE-002"),
    "mutant_shared_taken_for_lone": (SHARED_TAKEN_FOR_LONE, "STORE-ALIAS-005"),
    "mutant_last_key_left_as_set": (LAST_KEY_LEFT_AS_SET, "STORE-ALIAS-005"),
    "mutant_links_uncounted_twice": (LINKS_UNCOUNTED_TWICE, "STORE-ALIAS-005"),
    "mutant_tuple_key_keeps_its_hold": (TUPLE_KEY_KEEPS_ITS_HOLD, "STORE-ALIAS-005"),
    "mutant_tuple_taken_for_its_last_array": (TUPLE_TAKEN_FOR_ITS_LAST_ARRAY, "STORE-ALIAS-005"),
    "mutant_external_stored_crashes": (EXTERNAL_STORED_CRASHES, "STORE-EXT-006"),
    "mutant_table_without_buffers_refused": (TABLE_WITHOUT_BUFFERS_REFUSED, "STORE-TABLE-002"),
    "mutant_clean_copy_leaves_a_byte": (CLEAN_COPY_LEAVES_A_BYTE, "STORE-UNSPILL-005"),
    "mutant_unpickled_value_refused": (UNPICKLED_VALUE_REFUSED, "STORE-PICKLE-003"),
    "mutant_table_sharing_unseen": (TABLE_SHARING_UNSEEN, "STORE-TABLE-003"),
    "mutant_use_decides_before_forgetting": (USE_DECIDES_BEFORE_FORGETTING, "STORE-LIMIT-009"),
    "mutant_host_queue_drops_kept": (HOST_QUEUE_DROPS_KEPT, "STORE-DISK-014"),
    "mutant_failed_group_files_kept": (FAILED_GROUP_FILES_KEPT, "STORE-DISK-015"),
    "mutant_host_peer_counted_by_another": (HOST_PEER_COUNTED_BY_ANOTHER, "STORE-ALIAS-006"),
    "mutant_empty_table_sized_one_byte": (EMPTY_TABLE_SIZED_ONE_BYTE, "STORE-TABLE-002"),
    "mutant_set_after_close_accepted": (SET_AFTER_CLOSE_ACCEPTED, "STORE-CLOSE-003"),
    "mutant_read_back_stored_again_counted_twice": (
        READ_BACK_STORED_AGAIN_COUNTED_TWICE,
        "STORE-ALIAS-007",
    ),
    "mutant_shared_use_touches_one": (SHARED_USE_TOUCHES_ONE, "STORE-RECENCY-004"),
}

# Issue 44, the store survivors at cf91b7b still "property to add" (branch propB): each is
# caught by the ID written for it.
LEN_OF_LAST_AXIS = mutant(
    "mutant-len-of-last-axis", ("2.1",), "reference_impl.store.dispatch",
    "ArrayType.metadata", 'meta["__len__"] = int(shape[0])', 'meta["__len__"] = int(shape[-1])',
)

CUDA_PROBE_UNSPILLS = mutant(
    "mutant-cuda-probe-unspills", ("5.3",), "reference_impl.store.proxy",
    "ProxyObject.__cuda_array_interface__", "if not hasattr(state_of(self).type_,",
    "if not not hasattr(state_of(self).type_,",
)

ADOPTED_ROOM_OF_FRAMES = mutant(
    "mutant-adopted-room-of-frames", ("13.7", "4.2"), "reference_impl.store.tracker",
    "Tracker.track", 'int(state.meta.get("nbytes", 0)) or payload.frames_nbytes',
    'int(state.meta.get("nbytes", 0)) and payload.frames_nbytes',
)

CLEAN_COPY_KEPT_FOR_ARRAY = mutant(
    "mutant-clean-copy-kept-for-array", ("6.4", "13.1"), "reference_impl.store.index",
    "UnitIndex.add_allocs", "if not is_immutable(handler):\n" + " " * 20 + "self._drop_clean_of((holders,))",
    "if is_immutable(handler):\n" + " " * 20 + "self._drop_clean_of((holders,))",
)
CLEAN_COPIES_NEVER_DROPPED = mutant(
    "mutant-clean-copies-never-dropped", ("6.4", "13.1"), "reference_impl.store.index",
    "UnitIndex._drop_clean_of", "for p in pids:", "for p in []:",
)

ZOO.update({
    "mutant_len_of_last_axis": (LEN_OF_LAST_AXIS, "STORE-VALUE-004"),
    "mutant_cuda_probe_unspills": (CUDA_PROBE_UNSPILLS, "STORE-USE-005"),
    "mutant_adopted_room_of_frames": (ADOPTED_ROOM_OF_FRAMES, "STORE-PICKLE-004"),
    "mutant_clean_copy_kept_for_array": (CLEAN_COPY_KEPT_FOR_ARRAY, "STORE-UNSPILL-006"),
    "mutant_clean_copies_never_dropped": (CLEAN_COPIES_NEVER_DROPPED, "STORE-UNSPILL-006"),
})

SENDS_HELD_STATE = mutant(
    "mutant-sends-held-state", ("13.4",), "reference_impl.store.comms",
    "_host_payload", "if manager is not None else pxy.held", "if manager is None else pxy.held",
)
ZOO["mutant_sends_held_state"] = (SENDS_HELD_STATE, "STORE-USE-003")
