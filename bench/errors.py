"""The old path of bench.core.errors, kept so that a task or rule of yours written against it still loads: the
same classes (`UserError` is bench.core.errors.UserError, caught as one), with a FutureWarning naming the new path.
The suite itself never imports it (an import-linter contract)."""

import warnings

from bench.core.errors import *  # noqa: F403 (the same names, as they were)

warnings.warn("bench.errors moved to bench.core.errors: import UserError from there", FutureWarning, stacklevel=2)
