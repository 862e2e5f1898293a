"""The shuffle tests (SPEC.md section 14): the cluster harness, the oracle and the judge, the
state machine, the faults, the table strategies, and the test modules."""
