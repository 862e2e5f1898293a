"""Importing the reference registers nothing; only ``reference_impl.register()`` does.

Each check runs in a fresh interpreter, since registrations are process-wide. "Registers"
means a reference type in the lookup tables of distributed's ``dask_serialize`` /
``dask_deserialize`` / ``cuda_serialize`` / ``cuda_deserialize`` or of ``dask.sizeof``,
or a device type in the store's registry.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

REGISTERED = """
def registered():
    import importlib
    import dask.sizeof
    serialize = importlib.import_module("distributed.protocol.serialize")
    cuda = importlib.import_module("distributed.protocol.cuda")
    tables = {"sizeof": dask.sizeof.sizeof, "dask_serialize": serialize.dask_serialize,
              "dask_deserialize": serialize.dask_deserialize,
              "cuda_serialize": cuda.cuda_serialize, "cuda_deserialize": cuda.cuda_deserialize}
    out = {name: sorted(t.__module__ + "." + t.__qualname__ for t in d._lookup
                        if isinstance(t, type) and t.__module__.startswith("reference_impl"))
           for name, d in tables.items()}
    dispatch = sys.modules.get("reference_impl.store.dispatch")
    out["store device types"] = sorted(t.__qualname__ for t in getattr(dispatch, "_registry", {}))
    return {k: v for k, v in out.items() if v}
"""


def _run(body: str) -> dict:
    code = "import json, sys\n" + REGISTERED + textwrap.dedent(body)
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_device_layer_imports_alone_and_registers_nothing():
    out = _run("""
        import reference_impl.device
        dev = reference_impl.device.SimDevice("1 MiB")
        dev.asarray([1.0, 2.0])
        mods = sorted(m for m in sys.modules
                      if m.startswith(("reference_impl.store", "reference_impl.table",
                                       "reference_impl.shuffle")))
        print(json.dumps({"modules": mods, "distributed": "distributed" in sys.modules,
                          "registered": registered()}))
    """)
    assert out == {"modules": [], "distributed": False, "registered": {}}, out


def test_importing_after_distributed_leaves_only_a_lazy_hook():
    out = _run("""
        import dask.sizeof
        from distributed.protocol.serialize import dask_serialize
        import reference_impl.device
        print(json.dumps({"registered": registered(),
                          "lazy": "reference_impl" in dask_serialize._lazy}))
    """)
    assert out == {"registered": {}, "lazy": True}, out


def test_a_peer_adapter_registers_nothing_of_the_references():
    out = _run("""
        import dask.sizeof, distributed.protocol.serialize  # as a judging process has them
        from conformance.runner import loader
        impls = loader.load_all(["zict"])
        import reference_impl.device  # the suite's devices, as every peer run uses them
        reference_impl.device.get_device("sim", "1 MiB")
        print(json.dumps({"impls": [i.name for i in impls], "registered": registered()}))
    """)
    assert out["registered"] == {}, out


def test_root_names_register_everything_once():
    out = _run("""
        from reference_impl import ProxifyHostFile, Table  # noqa: F401
        print(json.dumps({"registered": registered()}))
    """)
    reg = out["registered"]
    assert "reference_impl.device.sim.SimArray" in reg["dask_serialize"], reg
    assert "reference_impl.store.proxy.ProxyObject" in reg["dask_deserialize"], reg
    assert "reference_impl.table.table.Table" in reg["sizeof"], reg
    assert "reference_impl.shuffle.comms.HostShards" in reg["dask_serialize"], reg
    assert reg["store device types"] == ["Table"], reg


def test_a_receiving_process_registers_lazily_on_first_dispatch():
    """A plain worker that unpickles a Table never calls register(): dask's lazy hook does."""
    out = _run("""
        import pickle
        import dask.sizeof
        from distributed.protocol import deserialize, serialize
        from reference_impl import Table  # the sender's side: registers
        import pyarrow as pa
        from reference_impl.device import SimDevice
        header, frames = serialize(Table.from_arrow(pa.table({"a": [1, 2, 3]}), SimDevice()),
                                   serializers=("dask",), on_error="raise")
        blob = pickle.dumps((header, [bytes(f) for f in frames]))
        import subprocess
        code = ("import pickle, sys, json, dask.sizeof; "
                "from distributed.protocol import deserialize; "
                "h, f = pickle.loads(sys.stdin.buffer.read()); t = deserialize(h, f); "
                "print(json.dumps([type(t).__name__, t.num_rows, dask.sizeof.sizeof(t)]))")
        proc = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True)
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
        print(proc.stdout.decode().strip().splitlines()[-1])
    """)
    assert out == ["Table", 3, 24], out


def test_moved_modules_import_under_their_old_names_with_a_warning():
    """Modules moved into conformance.runner/store/shuffle keep their old names, deprecated."""
    import importlib
    import sys

    import pytest

    import conformance.store.harness as new

    sys.modules.pop("conformance.harness", None)
    with pytest.warns(DeprecationWarning, match="conformance.harness moved to conformance.store.harness"):
        old = importlib.import_module("conformance.harness")
    assert old is new
