"""`plan`: iterations, examples and GPU-hours against a hand computation, without torch; the throughput
table and perf's --write-throughput; S = 1 as one shared run; submit's GPU and data checks."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench.cli import main
from bench.core.algo.rules import iterations_for
from bench.core.algo.schedules import ScaleSchedule
from bench.core.errors import UserError
from bench.experiments import matrix, plan


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_plan_paper_prints_a_total_without_importing_torch() -> None:
    code = (
        "import sys; from bench.cli import main; rc = main(['plan', 'paper', '--gpus', '64']); "
        "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert f"total: runs {len(matrix.load('paper').runs):,}" in out
    assert "unknown" not in out  # every paper task's FLOPs are counted (flops.csv)
    total = next(ln for ln in out.splitlines() if ln.startswith("total:"))
    assert "GPU-hours " in total and "basis FLOPs + proxy + published" in total and "FLOPs " in total
    lines = out.replace("\n" + " " * 15, " ").splitlines()  # a source's line with its continuations (≤ 120 wide)
    assert all(len(ln) <= 120 for ln in out.splitlines())
    for task, basis in (("cifar10", "proxy"), ("imagenet", "published"), ("speech", "proxy"), ("yolo", "proxy")):
        assert any(ln.split()[:1] == [task] and "FLOPs," in ln and f"({basis})" in ln for ln in lines)
        source = next(ln for ln in lines if ln.split()[:2] == [task, f"{basis}:"])  # with its source, cited
        assert "ResNet-50 v1.5" in source and "A100 80GB SXM, tf32" in source and "DeepLearningExamples" in source
    assert any(ln.split()[:2] == ["transformer", "proxy:"] and "Transformer big" in ln for ln in lines)
    assert "40% of A100 SXM dense bf16 (312 TFLOP/s)" in out  # logreg, which no source covers: the assumption
    assert "tokens" in out  # the transformer's b is tokens


def test_flops_basis_against_a_hand_computation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = matrix.load(write(tmp_path / "m.yaml", TINY))
    empty = write(tmp_path / "tp.csv", "task,preset,examples_per_s,device,measured\n")
    fl = write(tmp_path / "fl.csv", "task,preset,batch_size,flops_per_microbatch\ncifar10,tiny,16,1e15\n")
    peak = plan.Peak("h100", "bf16", 0.5)
    cells = {(c.method, c.scale): c for c in plan.make_plan(m, {}, None, plan.read_flops(fl), peak)}
    s1 = cells[("adascale", 1)]  # 2 runs × 100 iterations × 1 micro-batch of 1 PFLOP
    assert s1.flops == pytest.approx([200e15, 200e15]) and s1.basis == "FLOPs"
    assert s1.hours == pytest.approx([200e15 / (989.4e12 * 0.5) / 3600] * 2)
    assert cells[("adascale", 4)].flops == pytest.approx([2 * 25 * 4e15, 2 * 100 * 4e15])
    args = ["plan", str(m.path), "--throughput", str(empty), "--flops", str(fl), "--mfu", "0.5", "--device", "h100"]
    assert main(args) == 0
    out = capsys.readouterr().out
    # FLOPs: 200P + 200P..800P + 200P + 200P..800P = 800P..2E; / 494.7 TFLOP/s / 3600 = 0.449..1.12 h
    assert "FLOPs 800P–2E" in out and "GPU-hours 0.449–1.12" in out and "basis FLOPs" in out
    assert "unknown" not in out
    # measured throughput wins where present, and says so
    tp = write(tmp_path / "tp2.csv", "task,preset,examples_per_s,device,measured\ncifar10,tiny,100,test,2026\n")
    assert main(["plan", str(m.path), "--throughput", str(tp), "--flops", str(fl)]) == 0
    assert "basis measured" in capsys.readouterr().out
    # neither: unknown, with how to fill it
    none = write(tmp_path / "fl2.csv", "task,preset,batch_size,flops_per_microbatch\nimagenet,tiny,8,1e9\n")
    assert main(["plan", str(m.path), "--throughput", str(empty), "--flops", str(none)]) == 0
    out = capsys.readouterr().out
    assert "GPU-hours unknown" in out and "adascale-bench flops" in out
    with pytest.raises(UserError, match="--mfu 0"):
        plan.plan(plan.PlanOptions(matrix=str(m.path), mfu=0))


def test_bad_flops_table_is_one_line(tmp_path: Path) -> None:
    fl = write(tmp_path / "fl.csv", "task,preset,batch_size,flops_per_microbatch\ncifar10,tiny,16,-3\n")
    with pytest.raises(UserError, match="line 2: flops_per_microbatch '-3'"):
        plan.read_flops(fl)
    fl = write(tmp_path / "fl.csv", "task,preset,batch_size,flops_per_microbatch\ncifar10,tiny,,1e9\n")
    with pytest.raises(UserError, match="line 2: batch_size ''"):
        plan.read_flops(fl)
    fl = write(tmp_path / "fl.csv", "task,preset,flops_per_microbatch\ncifar10,tiny,1e9\n")
    with pytest.raises(UserError, match="expected columns"):
        plan.read_flops(fl)


def test_a_run_at_another_batch_size_is_priced_per_example(capsys: pytest.CaptureFixture[str]) -> None:
    """The paper matrix's logreg sweep runs b = 32 … 4096 while flops.csv counted b = 32: an example costs
    the same at every b (3 840 FLOPs ÷ 32 = 120), so its examples/s is one figure, and the b = 4096
    identity runs' FLOPs are their examples × 120, not ÷ 128 of that."""
    assert plan.read_flops(plan.FLOPS)[("logreg", "paper")] == pytest.approx(3840 / 32)
    m = matrix.load("paper")
    cells = plan.make_plan(m, {}, None, plan.read_flops(plan.FLOPS), plan.Peak("a100", "bf16", 0.4))
    sweep = [c for c in cells if c.task == "logreg" and c.kind == "sweep"]
    assert len(sweep) > 1 and all(c.flops == pytest.approx([e * 120 for e in c.examples]) for c in sweep)
    assert len({c.note for c in cells if c.task == "logreg"}) == 1


def test_shipped_flops_table_is_what_the_counter_counts() -> None:
    """The shipped cifar10 row recounted (fake tensors: about a second); a ResNet-18 v2 forward at 32×32 is
    0.56 GMAC per image, so forward + backward of 128 images ≈ 3 × 2 × 0.56 G × 128 = 0.43 TFLOP."""
    from bench.experiments import flops

    table = plan.read_flops(plan.FLOPS)
    assert set(flops.PAPER_TASKS) <= {t for t, p in table if p == "paper"}
    row = flops.count("cifar10")
    assert float(row["flops_per_microbatch"]) == pytest.approx(table[("cifar10", "paper")] * 128, rel=1e-5)
    assert 0.40e12 < table[("cifar10", "paper")] * 128 < 0.46e12
    assert 6.0e12 < table[("imagenet", "paper")] * 256 < 6.5e12  # ResNet-50: 4.1 GMAC × 2 × 3 × 256


def test_shipped_throughput_table_has_the_paper_tasks_unmeasured() -> None:
    table = plan.read_throughput(plan.THROUGHPUT)
    assert set(table) == {(t, "paper") for t in ("cifar10", "imagenet", "speech", "transformer", "yolo")}
    assert all(v["examples_per_s"] is None for v in table.values())  # nothing invented


TINY = """preset: tiny
seeds: [0, 1]
set: {T1: 100, batch_size: 16}
experiments:
  - table2: {tasks: [cifar10], methods: [adascale, lsw, lsw+], scales: [1, 4]}
"""


def test_figures_match_a_hand_computation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = matrix.load(write(tmp_path / "m.yaml", TINY))
    tp = write(tmp_path / "tp.csv", "task,preset,examples_per_s,device,measured\ncifar10,tiny,100,test,2026\n")
    cells = {(c.method, c.scale): c for c in plan.make_plan(m, plan.read_throughput(tp), gpus=2)}
    assert set(cells) == {("adascale", 1), ("adascale", 4), ("lsw", 4), ("lsw+", 4)}
    # the matrix's set: T1 = 100, b = 16; 2 seeds; 100 examples/s
    s1 = cells[("adascale", 1)]
    assert (s1.runs, s1.iterations, s1.examples) == (2, [100, 100], [2 * 100 * 16, 2 * 100 * 16])
    assert s1.hours == pytest.approx([3200 / 100 / 3600] * 2)
    ada = cells[("adascale", 4)]
    assert ada.iterations == [25, 100]  # ⌈T1/S⌉ .. T1
    assert ada.examples == [2 * 25 * 4 * 16, 2 * 100 * 4 * 16]  # 3200 .. 12800
    assert ada.hours == pytest.approx([3200 / 360000, 12800 / 360000])
    lsw = cells[("lsw", 4)]
    assert lsw.iterations == [25, 25] and lsw.examples == [3200, 3200]
    assert cells[("lsw+", 4)].iterations == ada.iterations
    # 2 GPUs: a run at S = 4 may use both; LSW+ waits for its AdaScale run (a chain of two runs)
    assert ada.longest == pytest.approx([1600 / 360000 / 2, 6400 / 360000 / 2])
    assert cells[("lsw+", 4)].longest == pytest.approx([2 * 1600 / 360000 / 2, 2 * 6400 / 360000 / 2])
    assert main(["plan", str(m.path), "--throughput", str(tp), "--gpus", "2"]) == 0
    out = capsys.readouterr().out
    # total examples: S = 1 3200 + AdaScale 3200..12800 + LSW 3200 + LSW+ 3200..12800 = 12800..32000;
    # / 100 examples/s / 3600 = 0.0356..0.0889 GPU-hours, / 2 GPUs = 0.0178..0.0444 h
    assert "examples 12.8k–32k images" in out and "unknown" not in out
    assert "GPU-hours 0.0356–0.0889" in out and "wall h @2 GPUs 0.0178–0.0444" in out
    assert "adascale*" in out and "* shared: AS = LSW = LSW+ at S = 1" in out  # shared_note, as matrix, status


def test_elastic_iterations_walk_the_schedule() -> None:
    sc = ScaleSchedule.from_fractions([[0, 2], [0.25, 4], [0.5, 8]], 100)
    assert plan.walk(sc, 100.0, True)[0] == iterations_for(sc, 100)
    # gain 1: τ_t = t; S = 2 for t < 25, 4 for t < 50, 8 after
    assert plan.walk(sc, 100.0, False) == (100, 25 * 2 + 25 * 4 + 50 * 8)


def test_a_T1_of_1e9_is_counted_not_walked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """#33: `plan` walked τ to T1 (165 s at the bound, 1e9). Now the work is per step of the scale schedule:
    the schedule is asked once per step whatever T1 is (counted, not timed), and the counts are exact."""
    calls = []
    real = ScaleSchedule.__call__
    monkeypatch.setattr(ScaleSchedule, "__call__", lambda self, tau: calls.append(tau) or real(self, tau))
    body = "seeds: [0]\nexperiments: [{table2: {tasks: [logreg], methods: [lsw, adascale], scales: [3]}}]\n"
    m = matrix.load(write(tmp_path / "m.yaml", "set: {T1: 1.0e9}\n" + body))
    cost = {c.method: c for c in plan.make_plan(m, {}, None)}
    assert cost["lsw"].iterations == [333_333_333, 333_333_333]  # ⌈(1e9 − 1)/3⌉: τ ≥ T1·(1 − 1e-9) ends it
    assert cost["adascale"].iterations == [333_333_333, 999_999_999]
    assert len(calls) <= 4  # two walks (p = S, p = 1) of a one-step schedule, whatever T1
    sc = ScaleSchedule.from_fractions([[0, 32], [0.25, 64], [0.5, 128]], 1e9)
    calls.clear()
    assert plan.walk(sc, 1e9, True) == (2.5e8 / 32 + 2.5e8 / 64 + 5e8 / 128, 1e9)
    assert len(calls) <= 3


def test_bad_throughput_table_is_one_line(tmp_path: Path) -> None:
    tp = write(tmp_path / "tp.csv", "task,preset,examples_per_s\ncifar10,tiny,fast\n")
    with pytest.raises(UserError, match="line 2: examples_per_s 'fast'"):
        plan.read_throughput(tp)


def test_write_throughput_updates_and_appends(tmp_path: Path) -> None:
    tp = tmp_path / "tp.csv"
    tp.write_text(plan.THROUGHPUT.read_text())
    measured = {("imagenet", "paper"): (2500.0, "NVIDIA H100", "bf16"), ("logreg", "tiny"): (1e6, "cpu", "none")}
    plan.write_throughput(tp, measured)
    rows = list(csv.DictReader(tp.open()))
    assert [r["task"] for r in rows] == ["cifar10", "imagenet", "speech", "transformer", "yolo", "logreg"]
    assert rows[1]["examples_per_s"] == "2500" and rows[1]["device"] == "NVIDIA H100" and rows[1]["measured"]
    assert rows[1]["amp"] == "bf16" and rows[1]["torch"] == torch.__version__
    assert rows[1]["command"].startswith("adascale-bench")  # how to measure it again
    assert rows[0]["examples_per_s"] == ""


def test_a_measured_basis_is_named_and_the_published_one_printed_beside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tp = tmp_path / "tp.csv"
    tp.write_text(plan.THROUGHPUT.read_text())
    plan.write_throughput(tp, {("imagenet", "paper"): (2500.0, "NVIDIA H100 80GB HBM3", "none")})
    assert main(["plan", "paper", "--throughput", str(tp)]) == 0
    lines = capsys.readouterr().out.splitlines()
    (imagenet,) = [x for x in lines if x.startswith("  imagenet ") and "GPU-hours" in x]
    assert "(measured); without the measurement: " in imagenet and imagenet.endswith("GPU-hours (published)")
    assert not [x for x in lines if "without the measurement" in x and not x.startswith("  imagenet ")]
    (source,) = [x for x in lines if x.startswith("  imagenet     measured: ")]
    assert "2,500 images/s measured on NVIDIA H100 80GB HBM3 (amp none, torch " in source
    assert any(x.startswith("  imagenet     published: ") for x in lines)  # the basis it replaced, beside it
    assert main(["plan", "paper"]) == 0  # nothing measured: no comparison line
    assert "without the measurement" not in capsys.readouterr().out


def test_perf_writes_the_throughput_row_at_scale_one(tmp_path: Path) -> None:
    from bench.experiments import perf

    tp = tmp_path / "tp.csv"
    args = perf.PerfOptions(
        task=["logreg"], device="cpu", preset="tiny", scales="1", repeats=2, data_root=None, out=str(tmp_path / "p")
    )
    args.write_throughput = str(tp)
    assert perf.perf(args) == 0
    measured = list(csv.DictReader((tmp_path / "p" / "perf.csv").open()))[0]["examples_per_s_bare"]
    table = plan.read_throughput(tp)
    assert table[("logreg", "tiny")]["examples_per_s"] == pytest.approx(float(measured), rel=1e-5)
    args.scales = "2"
    with pytest.raises(UserError, match="include 1"):
        perf.perf(args)


# -- S = 1 shared --------------------------------------------------------------------------------------------------
def test_paper_matrix_runs_scale_one_once_and_lsw_plus_waits_for_its_own_scale() -> None:
    m = matrix.load("paper")
    table2 = [r for r in m.runs if r.experiment["kind"] == "table2"]
    assert not [r for r in table2 if r.scale == 1 and r.method in ("lsw", "lsw+")]
    assert len([r for r in table2 if r.scale == 1]) == 5 * 5  # tasks × seeds
    for r in (r for r in table2 if r.method == "lsw+"):
        deps = matrix.depends_on(r, m.runs)
        assert [(d.method, d.scale) for d in deps] == [("adascale", r.scale)]


def test_matrix_command_lists_no_lsw_at_scale_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "smoke"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not [
        ln for ln in lines if ln.split()[:1] == ["table2"] and ln.split()[2] in ("lsw", "lsw+") and ln.split()[3] == "1"
    ]


# -- submit ----------------------------------------------------------------------------------------------------------
def test_paper_matrix_on_slurm_needs_gpus_or_cpu_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = write(
        tmp_path / "p.yaml", "preset: paper\nexperiments: [{table2: {tasks: [logreg], methods: [lsw], scales: [2]}}]\n"
    )
    assert main(["submit", str(m), "--executor", "slurm", "--dry-run", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--gpus-per-node G, or --cpu-only" in err
    assert main(["submit", str(m), "--executor", "slurm", "--dry-run", "--cpu-only", "--out", str(tmp_path / "o")]) == 0


def test_submit_checks_the_data_roots_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    m = write(
        tmp_path / "m.yaml",
        f"preset: tiny\ndata_roots: {{cifar10: {empty}}}\n"
        "experiments: [{table2: {tasks: [cifar10, logreg], methods: [adascale], scales: [2]}}]\n",
    )
    assert main(["submit", str(m), "--executor", "debug", "--out", str(tmp_path / "o")]) == 1
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and str(empty) in captured.err and "cifar10" in captured.err
    assert captured.err.startswith("adascale-bench: error: ")
    assert "array" not in captured.out and not (tmp_path / "o").exists()  # nothing planned, nothing submitted
    # a dry run previews the matrix before its data is prepared: the same line as a warning, and the plan
    assert main(["submit", str(m), "--dry-run", "--out", str(tmp_path / "o")]) == 0
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and captured.err.startswith("adascale-bench: warning: ")
    assert str(empty) in captured.err and "array 1" in captured.out
