"""How much faster: the speed-up against S (`speedup`), the scale-free comparison (`scalefree`), time to target
(`timetotarget`), the critical batch (`critical`, the sweep's `sweep`) and their CSVs together (`scaling`).

May import: reports.tables, reports.stats, reports.rundata and below; not reports.verdicts (its sibling).
"""
