"""How often a run evaluates changes its cost, not its training: the control's cifar10 evaluates at the end only
(bench/experiments/matrices/control.yaml) on the strength of this."""

from __future__ import annotations

from pathlib import Path

from bench.cli import main
from bench.core.files import METRICS, SPEC, read_jsonl


def _run(out: Path, eval_every: int, seed: int = 0) -> tuple[list[dict], dict]:
    args = ["run", "--task", "logreg", "--method", "adascale", "--scale", "4", "--seed", str(seed), "--out", str(out)]
    assert main([*args, "--set", "T1=40", "--set", f"eval_every={eval_every}"]) == 0
    (run_dir,) = [p.parent for p in out.rglob(SPEC)]
    rows = list(read_jsonl(run_dir / METRICS))
    final = {k: v for k, v in [r for r in rows if r.get("eval")][-1].items() if k != "wall_time_s"}
    return [r for r in rows if not r.get("eval")], final


def test_evaluating_often_or_at_the_end_trains_the_same(tmp_path: Path) -> None:
    """Every training record and the final evaluation equal at eval_every 5 and T1; another seed differs, so the
    comparison can fail (an evaluation that drew from the run's generator or left the model changed would)."""
    often, at_end, other = (_run(tmp_path / n, e, s) for n, e, s in (("a", 5, 0), ("b", 40, 0), ("c", 40, 1)))
    assert len(often[0]) == len(at_end[0]) > 0
    assert often == at_end
    assert other[0] != at_end[0]
