"""A pytest plugin (``-p no_pandas``) that makes pandas and dask's dataframe unimportable:
a plain install, without the ``shuffle`` extra, inside this repository's environment."""

import sys

assert "pandas" not in sys.modules, "pandas was imported before no_pandas could block it"

_BLOCKED = ("pandas", "dask.dataframe")


class _Block:
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in _BLOCKED):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by no_pandas)", name=name)
        return None


sys.meta_path.insert(0, _Block())
