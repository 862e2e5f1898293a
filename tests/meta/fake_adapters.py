"""Adapters that are wrong in how they present themselves (start-up usage errors)."""

from conformance.adapters.reference import ReferenceAdapter


class _Base:
    name = "fake"
    version = "0"


class typo(_Base):  # noqa: N801
    capabilities = frozenset({"store", "store.spil.disk"})


class removed_cap(_Base):  # noqa: N801
    """Declares a name the vocabulary removed (a feature now implies its faults)."""

    capabilities = frozenset({"store", "store.spill.disk", "store.faults.disk"})


class lacks_methods(_Base):  # noqa: N801
    capabilities = frozenset({"store"})

    def create_store(self, env):
        return {}


class renamed_reference(ReferenceAdapter):  # noqa: N801
    name = "renamed"


def not_available():
    from conformance.api import Unavailable

    raise Unavailable("the fake thing is not installed")
