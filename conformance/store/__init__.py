"""The store tests: the harness, the pure model, the state machines and the world that moves
around a store, the strategies, and one test module per section of SPEC.md 1-13 and 15."""
