"""Carrying nested columns: from_arrow + to_arrow of list and struct columns on the sim
device, against the same values as plain columns, measured in the same run.

    python benchmarks/nested.py [--rows 1e6] [--mean-length 4] [--repeat 3]

Two cases, each against its flat baseline:

- ``list<int64>``, ``--mean-length`` values per row on average (lengths uniform in
  ``0..2*mean``, 5% null rows, 5% null items) against one int64 column of the same values;
- ``struct<a: int64, b: string>`` (5% null structs, 5% null fields, strings of 0-8 bytes)
  against an int64 column and a string column of the same values.

A nested column is encoded to one large_binary row per value (``reference_impl.table.nested``)
on the way in and decoded on the way out, so the ratio is what the encoding costs over
copying the flat buffers. ``held`` is the device bytes of the held column, against the
flat columns' device bytes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import best_of, machine  # noqa: E402

from reference_impl import Table  # noqa: E402
from reference_impl.device import SimDevice  # noqa: E402


def lists(rows: int, mean: int, rng: np.random.Generator) -> tuple[pa.Table, pa.Table]:
    lengths = rng.integers(0, 2 * mean + 1, rows)
    offsets = np.zeros(rows + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = pa.array(rng.integers(-(2**62), 2**62, int(offsets[-1])), mask=rng.random(int(offsets[-1])) < 0.05)
    nested = pa.ListArray.from_arrays(pa.array(offsets), values, mask=pa.array(rng.random(rows) < 0.05))
    return pa.table({"c": nested}), pa.table({"c": values})


def structs(rows: int, rng: np.random.Generator) -> tuple[pa.Table, pa.Table]:
    a = pa.array(rng.integers(-(2**62), 2**62, rows), mask=rng.random(rows) < 0.05)
    lengths = rng.integers(0, 9, rows)
    offsets = np.zeros(rows + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    chars = rng.integers(97, 123, int(offsets[-1]), dtype=np.uint8)
    nulls = rng.random(rows) < 0.05
    b = pa.Array.from_buffers(
        pa.string(), rows, [pa.py_buffer(np.packbits(~nulls, bitorder="little")), pa.py_buffer(offsets), pa.py_buffer(chars)]
    )
    nested = pa.StructArray.from_arrays([a, b], ["a", "b"], mask=pa.array(rng.random(rows) < 0.05))
    return pa.table({"c": nested}), pa.table({"a": a, "b": b})


def measure(data: pa.Table, dev: SimDevice, repeat: int) -> tuple[float, float, int]:
    """Best seconds of from_arrow, of to_arrow, and the table's device bytes."""
    loaded = Table.from_arrow(data, dev)
    held = loaded.nbytes
    t_in = best_of(repeat, lambda: Table.from_arrow(data, dev))
    t_out = best_of(repeat, loaded.to_arrow)
    assert loaded.to_arrow().equals(data)
    return t_in, t_out, held


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=1e6)
    parser.add_argument("--mean-length", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    rows = int(args.rows)
    rng = np.random.default_rng(0)
    dev = SimDevice("8 GiB")

    print(f"machine: {machine()}")
    print(f"{rows:,} rows; best of {args.repeat}; from_arrow + to_arrow on the sim device")
    head = f"{'case':<34}{'in':>9}{'out':>9}{'total':>9}{'vs flat':>9}{'held MB':>9}{'vs flat':>9}"
    print(head)
    for name, (nested, flat) in [
        (f"list<int64>, mean length {args.mean_length}", lists(rows, args.mean_length, rng)),
        ("struct<a: int64, b: string>", structs(rows, rng)),
    ]:
        n_in, n_out, n_bytes = measure(nested, dev, args.repeat)
        f_in, f_out, f_bytes = measure(flat, dev, args.repeat)
        for label, t_in, t_out, nbytes in [
            (name, n_in, n_out, n_bytes),
            ("  flat baseline (same values)", f_in, f_out, f_bytes),
        ]:
            ratio = (t_in + t_out) / (f_in + f_out)
            print(
                f"{label:<34}{t_in * 1e3:>7.0f}ms{t_out * 1e3:>7.0f}ms{(t_in + t_out) * 1e3:>7.0f}ms"
                f"{ratio:>8.1f}x{nbytes / 1e6:>9.1f}{nbytes / f_bytes:>8.2f}x"
            )


if __name__ == "__main__":
    main()
