"""Reading run folders: what the runs on disk say, read once and checked field by field.

`collect` (the folder → one table of runs, with warnings; `Results`), `specfacts` (spec.json → `SpecFacts`, field by
field), `jsonfields` (a run file's JSON object, its fields of usable types), `runrow` (a run's facts and summary.json
→ a row), `runcache` (every metrics.jsonl read once, cached as .npz), `memo` (nothing changed,
nothing done; `ReportWarning`), `guards` (the range every number read must lie in), `failedseeds` (a seed that
diverged or collapsed to chance), `variants` (a table's override string → its short name), `workers` (the report's
process pool) and `fakeruns` (synthetic folders at the paper matrix's volume, for the benchmarks and tests).

May import: bench's foundation (files, identity, locks, safefs, algo, engine.signals) and tasks.presets; nothing
else of reports/ (the contract in pyproject.toml).
"""
