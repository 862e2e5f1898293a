"""The example files conformance/README.md shows, as a user would save them: each block that
follows "Save it as `NAME`:" (the in-house store, its adapter and manifest) and the copyable
shuffle adapter. Used by the tests that run them, so the README cannot rot."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "conformance" / "README.md"


def store_example_files() -> dict[str, str]:
    """File name -> text of the guide's worked example."""
    text = README.read_text()
    found = re.findall(r"Save it as `([\w.]+)`:\s*\n\n```(?:python|toml)\n(.*?)```", text, re.S)
    files = dict(found)
    assert set(files) == {"tiny_store.py", "tiny_adapter.py", "tiny.toml"}, sorted(files)
    return files


def shuffle_example() -> str:
    section = README.read_text().split("A complete shuffle adapter that you can copy", 1)[1]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)[0]
