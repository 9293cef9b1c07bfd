"""Verdicts: the paper's claims judged on the runs (`findings`, with the emergent warm-up `warmup`, finding
(iii)'s independent `reference` and the `graded` degradation), and per rule and S what the runs and the probe say
(`ruleadvice`).

May import: reports.tables, reports.stats, reports.rundata and below; not reports.speed (its sibling).
"""
