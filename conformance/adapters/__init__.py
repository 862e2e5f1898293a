"""Built-in adapters: ``reference``, ``zict``, ``distributed-spill``, ``dask-cuda``, ``distributed-p2p``, ``dask-tasks``."""
