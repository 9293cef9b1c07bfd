"""The grey rule of Table 2: is a cell significantly worse than S = 1 of the same method?

One-sided Welch t-test (unequal variances) over the seeds, at 0.95 confidence:
`scipy.stats.ttest_ind(x, base, equal_var=False, alternative=...)` with alternative "less" when higher
is better (the metric of accuracy-like tasks) and "greater" when lower is better (losses: logreg's
metric, and the training loss everywhere). Grey when p < 0.05.

Edge cases, decided here once:
- fewer than 2 finite values on either side: no test (not grey, p = NaN); a t-test needs a variance;
- both sides with zero variance (every seed identical, e.g. a deterministic task): the difference of
  the means is certain, so grey iff the mean is worse at all (p = 0), else not grey (p = 1);
- one side with zero variance: Welch's test is well defined (the other side's variance is used).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import stats

ALPHA = 0.05


def worse_than(x: np.ndarray, base: np.ndarray, higher_is_better: bool, alpha: float = ALPHA) -> tuple[bool, float]:
    """(significantly worse, one-sided p-value) of the values `x` against the baseline values `base`."""
    x = np.asarray(x, dtype=float)
    base = np.asarray(base, dtype=float)
    x, base = x[np.isfinite(x)], base[np.isfinite(base)]
    if len(x) < 2 or len(base) < 2:
        return False, math.nan
    if np.ptp(x) == 0 and np.ptp(base) == 0:
        diff = float(x.mean() - base.mean())
        worse = diff < 0 if higher_is_better else diff > 0
        return worse, 0.0 if worse else 1.0
    alternative = "less" if higher_is_better else "greater"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scipy's precision notice on near-constant samples
        p = float(stats.ttest_ind(x, base, equal_var=False, alternative=alternative).pvalue)
    if not math.isfinite(p):
        return False, math.nan
    return p < alpha, p
