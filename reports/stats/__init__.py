"""Statistics over the runs: the tests and estimates every table, verdict and figure shares.

`significance` (Table 2's one-sided t-test), `noninferiority` (within Δ, its power and seed plans, Holm),
`noise` (the noise scale over training, and finding (iii)'s prediction through bench.core.algo.predict), `lagmatch`
(an online series against a lagged reference) and `numbers` (one function per kind of number as printed).

May import: reports.rundata and the foundation below it.
"""
