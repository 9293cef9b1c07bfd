"""Before `submit` sends a single job: is every data root the matrix uses there, and right for its preset?

Each task's own `check_data(root, spec)` once per distinct (task, root); for the paper preset also the task's
`check_paper_data(root, spec)` (its split sizes and one readable sample per split: CIFAR-10's 50 000 / 10 000
images, ImageNet's 1 000 classes and 50 000 validation images); and, where the data is there (or the task needs
none), the task's card against the task on one evaluation batch (bench.run.taskcheck: a card metric its
metrics_from does not return). Every problem is one line; all are reported.
"""

from __future__ import annotations

from pathlib import Path

from bench.core.errors import UserError
from bench.experiments import matrix as matrices
from bench.run.dataroot import check_data
from bench.run.taskcheck import check_task


def data_problems(m: matrices.Matrix, sizes: bool = True) -> list[str]:
    """One line per problem with the data roots of the matrix's runs (empty: all good). The roots are per
    task, so one run of each task stands for all of them. `sizes` False: not the paper's data set sizes
    (a rehearsal may run on a sample of the data in its published form)."""
    from tasks import get_task

    problems: list[str] = []
    first = {}
    for req in m.runs:
        first.setdefault(req.task, req)
    for name, req in first.items():
        task = get_task(name)
        try:
            spec = m.spec(req)
        except UserError as e:  # a task without data: no data problem; submit's plan says so, in one line
            if task.needs_data:  # a data task's spec fails on its missing root (a dry run previews it: a warning)
                problems.append(str(e))
            continue
        root = Path(spec.data_root) if task.needs_data else Path()
        if task.needs_data and m.preset == "tiny" and not root.exists():
            continue  # the tiny data set is written on first use (the run checks the card against it then)
        try:
            if task.needs_data:
                check_data(task, root, spec)  # a tiny set a colleague wrote is refused here too (bench.run.dataroot)
        except UserError as e:
            problems.append(f"{name} data root {root}: {e}")
            continue
        except OSError as e:
            problems.append(f"{name} data root {root}: {e.strerror or e}")
            continue
        try:
            check_task(task, root, spec)  # the card against the task, on one batch (bench.run.taskcheck)
        except UserError as e:
            problems.append(str(e))
            continue
        if sizes and m.preset == "paper":
            problems += task.check_paper_data(root, spec)
    return problems
