"""Built-in adapters: ``reference``, ``zict``, ``distributed-spill`` (+ reserved names)."""
