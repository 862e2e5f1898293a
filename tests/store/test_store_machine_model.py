"""Programs on which the conformance state machine failed this store while the store kept
its contract: the machine's model was wrong (docs/findings/reference.md). Each program is
replayed through the machine as hypothesis prints it, so its model cannot drift back."""

from __future__ import annotations

from conformance.runner.loader import resolve
from conformance.store import strategies as S
from conformance.store.machines import StoreMachine


def _array(nbytes: int, seed: int = 1) -> S.ArraySpec:
    return S.ArraySpec("=f8", nbytes, 1, "none", seed)


def _machine(tmp_path):
    """The machine on one reference store, as hypothesis prints a failing program."""
    adapter = resolve("reference")
    state = StoreMachine.configure(adapter, adapter.capabilities, "sim", tmp_path)()
    state.start(host_limit=None, n_stores=1)
    state.check_all()
    return state


def _replay(state, *steps) -> None:
    """Run ``(rule, kwargs)`` steps, checking after each like hypothesis, then tear down."""
    try:
        for rule, kw in steps:
            getattr(state, rule)(**kw)
            state.check_all()
    except BaseException:
        state.teardown()  # sees the failure, so it only cleans up
        raise
    state.teardown()


def test_setdefault_of_a_present_key_leaves_the_default_to_the_caller(tmp_path):
    """The unused default (48 KiB) sits on the device beside 32 KiB the store holds while 'a'
    comes back: 33 KiB for the store, under the 64 KiB limit. The machine used to bound the
    peak by max(entry, limit), with the default in entry but not beside the limit."""
    state = _machine(tmp_path)
    _replay(
        state,
        ("put", dict(side=0, key="a", spec=_array(1024))),
        ("evict", dict(side=0, frac=1.0)),
        ("put", dict(side=0, key="b", spec=_array(32768, 2))),
        ("setdefault", dict(side=0, key="a", spec=_array(49152, 3))),
    )


def test_a_view_spilled_apart_from_its_base_is_not_used_with_it(tmp_path):
    """A spill copies 'view' apart from 'base' and 'view' comes back alone, so popping 'base'
    does not use 'view'. The machine used to touch 'view' with its old alias group and then
    find it spilled behind the less recent 'other'."""
    state = _machine(tmp_path)
    _replay(
        state,
        ("put", dict(side=0, key="base", spec=_array(4096))),
        ("put_view_of_stored", dict(side=0, src="base", dst="view")),
        ("evict", dict(side=0, frac=2.0)),
        ("get", dict(side=0, key="view")),
        ("put", dict(side=0, key="other", spec=_array(64, 2))),
        ("evict", dict(side=0, frac=0.01)),
        ("pop", dict(side=0, key="base", with_default=False)),
    )


def test_reading_an_external_uses_the_key_holding_it(tmp_path):
    """The external is the proxy stored under 'a'; reading it brings 'a' back as the most
    recently used (clause 5.2). The machine used to leave 'a' behind 'b' in its model."""
    state = _machine(tmp_path)
    _replay(
        state,
        ("put", dict(side=0, key="a", spec=_array(1024))),
        ("put", dict(side=0, key="b", spec=_array(1024, 2))),
        ("register_stored_value", dict(side=0, key="a")),
        ("get", dict(side=0, key="b")),
        ("evict", dict(side=0, frac=2.0)),
        ("drop_external", dict(side=0, which=0, read_first=True)),
    )
