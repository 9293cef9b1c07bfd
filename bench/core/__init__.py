"""The foundation every task stands on: what one run is (runspec, identity), the AdaScale math (algo), the method
table (methods), the training engine (engine), and the careful reading and writing they share (errors, safefs,
files, locks, safepickle, yamlsafe, usercode).

It imports nothing of the suite above it — not the runs and matrices (bench.run, bench.experiments), the CLI, the
tasks, the reports or slurm — and tasks/ imports nothing of bench but this package (import-linter contracts in
pyproject.toml), so the picture reads one way: bench.cli over bench.experiments over bench.run over tasks over
bench.core."""
