"""The README's store and partition-hash examples run and print what the README says."""

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_store_example_prints_what_the_readme_shows():
    section = README.read_text().split("## Use the reference store", 1)[1]
    code, shown = re.findall(r"```(?:python)?\n(.*?)```", section, flags=re.S)[:2]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue() == shown


def test_partition_hash_example_prints_what_the_readme_shows():
    section = README.read_text().split("### The partition hash", 1)[1]
    code, shown = re.findall(r"```(?:python)?\n(.*?)```", section, flags=re.S)[:2]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue() == shown
