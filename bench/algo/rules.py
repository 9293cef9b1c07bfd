"""The old path of bench.core.algo.rules, kept so that a rule of yours written against it still loads: the same
classes (a subclass of this `ScalingRule` is one of bench.core.algo.rules.ScalingRule), with a FutureWarning
naming the new path. The suite itself never imports it (an import-linter contract)."""

import warnings

from bench.core.algo.rules import *  # noqa: F403 (the same names, as they were)

warnings.warn(
    "bench.algo.rules moved to bench.core.algo.rules: import ScalingRule from there", FutureWarning, stacklevel=2
)
