"""The runner: the pytest plugin that turns the suite's tests into a conformance table.

One module a job: :mod:`.state` (what a run knows), :mod:`.options` (options, start-up
checks, header), :mod:`.collection` (IDs, capabilities, manifests, ``--conformance-ids``),
:mod:`.deviations` (documented deviations and flaky reruns), :mod:`.fixtures` and
:mod:`.summary` (the end-of-run report). :mod:`conformance.runner.plugin` loads them all.
"""
