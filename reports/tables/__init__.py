"""The paper's Table 2, ours beside it: which runs form a table and their cells (`table2`), the paper's numbers
(`paper`, with its copy paper_table2.csv) and the LaTeX form (`latex`).

May import: reports.stats, reports.rundata and below.
"""
