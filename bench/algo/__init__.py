"""The old home of bench.core.algo, kept for modules of yours that import `bench.algo.rules` (see
bench/algo/rules.py); the suite itself never imports it (an import-linter contract)."""
