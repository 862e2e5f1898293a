"""The benchmark scripts (run each as ``python benchmarks/NAME.py``); a package so that
``ci/gpu_check``'s steps import their measuring code as ``benchmarks.NAME``."""
