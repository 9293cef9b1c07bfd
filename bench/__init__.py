"""adascale-bench: the AdaScale SGD benchmark suite. bench.core is its foundation (the math, the engine, what a run
is); tasks/ stands on it; bench.run, bench.experiments and bench.cli run tasks, one run, many, and the commands."""

__version__ = "0.1.0"
