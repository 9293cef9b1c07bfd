"""adascale-bench: the AdaScale SGD benchmark suite's core (algorithms, engine, runs, CLI)."""

__version__ = "0.1.0"
