"""Programs on which the conformance state machine failed this store while the store kept
its contract: the machine's model was wrong (docs/findings/reference.md). Each program is
replayed rule by rule through the machine, so its model cannot drift back."""

from __future__ import annotations

from conformance import strategies as S
from conformance.loader import resolve
from conformance.machines import make_store_machine


class _Script:
    """Stands in for hypothesis' ``data``: hands out the given draws in order."""

    def __init__(self, *draws):
        self._draws = list(draws)

    def draw(self, strategy, label=None):
        return self._draws.pop(0)


def _array(nbytes: int, seed: int = 1) -> S.ArraySpec:
    return S.ArraySpec("=f8", nbytes, 1, "none", seed)


def _replay(tmp_path, *steps) -> None:
    """Run ``(rule, draws, kwargs)`` steps on one store, checking after each like hypothesis."""
    adapter = resolve("reference")
    machine = make_store_machine(adapter, adapter.capabilities, "sim", tmp_path)()
    machine.start(host_limit=None, n_stores=1)
    try:
        for rule, draws, kw in steps:
            getattr(machine, rule)(data=_Script(*draws), **kw)
            machine.check_all()
    except BaseException:
        machine.teardown()  # sees the failure, so it only cleans up
        raise
    machine.teardown()


def test_setdefault_of_a_present_key_leaves_the_default_to_the_caller(tmp_path):
    """The unused default (48 KiB) sits on the device beside 32 KiB the store holds while 'a'
    comes back: 33 KiB for the store, under the 64 KiB limit. The machine used to bound the
    peak by max(entry, limit), with the default in entry but not beside the limit."""
    _replay(
        tmp_path,
        ("put", (True, "a", _array(1024)), {}),
        ("evict", (), {"frac": 1.0}),
        ("put", (True, "b", _array(32768, 2)), {}),
        ("setdefault", (True, "a", _array(49152, 3)), {}),
    )


def test_a_view_spilled_apart_from_its_base_is_not_used_with_it(tmp_path):
    """A spill copies 'view' apart from 'base' and 'view' comes back alone, so popping 'base'
    does not use 'view'. The machine used to touch 'view' with its old alias group and then
    find it spilled behind the less recent 'other'."""
    _replay(
        tmp_path,
        ("put", (True, "base", _array(4096)), {}),
        ("put_view_of_stored", ("base", "view"), {}),
        ("evict", (), {"frac": 2.0}),
        ("get", ("view",), {}),
        ("put", (True, "other", _array(64, 2)), {}),
        ("evict", (), {"frac": 0.01}),
        ("pop", ("base",), {"with_default": False}),
    )


def test_reading_an_external_uses_the_key_holding_it(tmp_path):
    """The external is the proxy stored under 'a'; reading it brings 'a' back as the most
    recently used (clause 5.2). The machine used to leave 'a' behind 'b' in its model."""
    _replay(
        tmp_path,
        ("put", (True, "a", _array(1024)), {}),
        ("put", (True, "b", _array(1024, 2)), {}),
        ("register_stored_value", ("a",), {}),
        ("get", ("b",), {}),
        ("evict", (), {"frac": 2.0}),
        ("drop_external", (0, True), {}),
    )
