"""The numbers README.md and the docs/ pages its reference moved to state that the code can compute, read
from the page that states each (`Claim.doc`) and compared with what the code computes now: `plan paper`'s
totals, the shipped matrices' run counts, the tiny T1, the matrix bounds, the FLOPs table, the offline gain's
batches, the report's sample size, LSW's warm-up and the findings' margins. When the code changes one of them
(a matrix, plan's cost basis, a margin), this fails until the page says the new number. And README leads: its
order, its length, the paper inside its first 1 500 words, the glossary the report writes."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def plain(n: float) -> str:
    """1,045 / 0.5 / 0.25: a number as README writes it in prose."""
    return f"{n:,}" if float(n).is_integer() and abs(n) >= 1000 else f"{n:g}"


def spaced(n: int) -> str:
    """50 000 / 4 096: a count as README writes it in prose."""
    return f"{n:,}".replace(",", " ")


@dataclass
class Claim:
    """A number README states: where (a regex whose groups are the numbers) and what the code says they are."""

    name: str
    pattern: str
    computed: Callable[[], tuple[str, ...]]
    doc: str = "README.md"  # the page that states it (README's reference moved to docs/: its checks with it)


def _plan_lines() -> list[str]:
    import contextlib
    import io

    from bench.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["plan", "paper"]) == 0
    return [line.strip() for line in out.getvalue().splitlines()]


def _plan_total() -> tuple[str, ...]:
    total = next(line for line in _plan_lines() if line.startswith("total: runs"))
    m = re.search(r"runs ([\d,]+), .*FLOPs (\S+), GPU-hours (\S+), basis (.+)$", total)
    return m.groups()


def _plan_task(task: str) -> Callable[[], tuple[str, ...]]:
    return lambda: (next(line for line in _plan_lines() if line.split()[:1] == [task]),)


def _runs(name: str) -> Callable[[], tuple[str, ...]]:
    def count() -> tuple[str, ...]:
        from bench.experiments.matrix import load

        return (f"{len(load(name).runs):,}",)

    return count


def _tiny() -> tuple[str, ...]:
    from tasks.presets import TINY_T1, TINY_WINDOWS

    return str(TINY_T1), {1: "one", 2: "two", 3: "three", 4: "four"}.get(TINY_WINDOWS, str(TINY_WINDOWS))


def _bounds() -> tuple[str, ...]:
    from bench.experiments.matrix import MAX_BYTES, MAX_RUNS

    return plain(MAX_BYTES / 2**20), spaced(MAX_RUNS)


def _tflop(task: str) -> Callable[[], tuple[str, ...]]:
    def read() -> tuple[str, ...]:
        import csv

        from bench.experiments.plan import FLOPS

        with open(FLOPS) as f:
            row = next(r for r in csv.DictReader(f) if (r["task"], r["preset"]) == (task, "paper"))
        return row["batch_size"], f"{float(row['flops_per_microbatch']) / 1e12:.3g}"

    return read


def _gain_batches() -> tuple[str, ...]:
    from bench.run.offline_gain import BATCHES

    return str(BATCHES["paper"]), str(BATCHES["tiny"])


def _points() -> tuple[str, ...]:
    from reports.rundata.runcache import POINTS

    return (spaced(POINTS),)


def _warmup() -> tuple[str, ...]:
    from bench.core.algo.rules import WARMUP_FRACTION

    return (plain(round(100 * WARMUP_FRACTION, 6)),)


def _margins() -> tuple[str, ...]:
    from reports.stats import noninferiority as F
    from tasks.presets import ACCURACY_MARGINS
    from tasks.presets.logreg import LOSS_MARGIN

    share = {0.25: "a quarter", 0.5: "half", 0.2: "a fifth", 0.1: "a tenth"}.get(LOSS_MARGIN, "?")
    return str(F.MIN_SEEDS), f"{ACCURACY_MARGINS['paper']:.1f}", f"{ACCURACY_MARGINS['tiny']:.1f}", share


def _warmup_check() -> tuple[str, ...]:
    from reports.verdicts import warmup as F

    return plain(F.WARMUP_WINDOW), plain(F.WARMUP_START), plain(F.WARMUP_RISE)


def _power() -> tuple[str, ...]:
    from reports.verdicts import reference as R

    return plain(R.POWER_LO), plain(R.POWER_HI)


def _peak() -> tuple[str, ...]:
    from bench.cli import build_parser

    mfu = next(a.default for a in build_parser()._subparsers._group_actions[0].choices["plan"]._actions
               if a.dest == "mfu")  # fmt: skip
    peak = next(re.search(r"\(([\d.]+) TFLOP/s\)", line).group(1) for line in _plan_lines() if "TFLOP/s)" in line)
    return peak, plain(mfu)


COST, USAGE, STATS = "docs/cost-model.md", "docs/usage.md", "docs/statistics.md"
CLAIMS = [
    Claim(
        "plan paper total",
        r"total: runs ([\d,]+), \.\.\., FLOPs (\S+), GPU-hours (\S+), basis ([^\n]+)",
        _plan_total,
        COST,
    ),
    *[
        Claim(f"plan paper {t}", rf"\n\s+({t} +[^\n]*\))\n", _plan_task(t), COST)
        for t in ("cifar10", "imagenet", "logreg", "speech", "transformer", "yolo")
    ],  # fmt: skip
    Claim("smoke runs", r"expand to ([\d,]+) runs \(`smoke`\)", _runs("smoke")),
    Claim("smoke runs (timing)", r"`make smoke` took ~?[\d.]+ min for ([\d,]+) runs", _runs("smoke")),
    Claim("paper runs", r", ([\d,]+) runs \(`paper`\)", _runs("paper")),
    Claim("control runs", r"and ([\d,]+) runs \(`control`\)", _runs("control")),
    Claim("tiny T1", r"experiment: T1 = (\d+), so that even the shortest AdaScale run lasts (\w+) memories", _tiny),
    Claim("matrix bounds", r"are bounded \((\d+) MB, aliases, list lengths, ([\d ]+) runs\)", _bounds, USAGE),
    Claim("flops cifar10", r"cifar10 ResNet-18 v2, b = (\d+): ([\d.]+) TFLOP", _tflop("cifar10"), COST),
    Claim("flops imagenet", r"imagenet ResNet-50, b = (\d+) at 224²:\s+([\d.]+)\s+TFLOP", _tflop("imagenet"), COST),
    Claim("flops yolo", r"yolo YOLOv3 at 416², b = (\d+): ([\d.]+) TFLOP", _tflop("yolo"), COST),
    Claim("flops speech", r"speech DS2, (\d+) utterances of [\d.]+ s: ([\d.]+) TFLOP", _tflop("speech"), COST),
    Claim(
        "flops transformer",
        r"transformer base, ([\d ]+) tokens: ([\d.]+) TFLOP",
        lambda: tuple(
            v.replace(",", " ") if i == 0 else v
            for i, v in enumerate((f"{int(_tflop('transformer')()[0]):,}", _tflop("transformer")()[1]))
        ),
        COST,
    ),  # fmt: skip
    Claim(
        "offline gain batches",
        r"micro-batches(?: drawn with replacement)?, (\d+) by default, (\d+) on the tiny preset",
        _gain_batches,
        USAGE,
    ),
    Claim("report sample", r"training curves at ([\d ]+) points", _points, USAGE),
    Claim("LSW warm-up", r"1/S → 1 over ([\d.]+) % of the iterations", _warmup, USAGE),
    Claim(
        "finding margins",
        r"≥ (\d+) seeds a side\. Δ: ([\d.]+) points on paper presets, ([\d.]+) on tiny ones \(accuracy-like "
        r"metrics\); (a \w+) of S = 1's excess loss",
        _margins,
        STATS,
    ),  # fmt: skip
    Claim(
        "finding (iv)",
        r"over τ ≤ ([\d.]+)·T1, normalised gain \(r − 1\)/\(r̂ − 1\) starts ≤ ([\d.]+), rises ≥ ([\d.]+)",
        _warmup_check,
        STATS,
    ),  # fmt: skip
    Claim("finding (iii)", r"not testable outside \[([\d.]+), ([\d.]+)\] or where S·b ≪ B", _power, STATS),
    Claim(
        "plan's peak and MFU",
        r"the GPU's dense peak, ([\d.]+) TFLOP/s bf16 on\s+the A100 SXM `plan` prices by default, "
        r"× `--mfu`, default ([\d.]+);",
        _peak,
        COST,
    ),
]


def mismatches(text: str, claims: list[Claim] = CLAIMS) -> list[str]:
    """What README (`text`) states that the code does not compute, one line each."""
    bad = []
    for claim in claims:
        m = re.search(claim.pattern, text, re.S)
        if m is None:
            bad.append(f"{claim.name}: not found in README ({claim.pattern})")
            continue
        stated, computed = m.groups(), claim.computed()
        if tuple(" ".join(s.split()) for s in stated) != tuple(" ".join(c.split()) for c in computed):
            bad.append(f"{claim.name}: README says {stated}, the code computes {computed}")
    return bad


def test_readme_and_its_docs_state_what_the_code_computes() -> None:
    for doc in sorted({c.doc for c in CLAIMS}):
        assert mismatches((ROOT / doc).read_text(), [c for c in CLAIMS if c.doc == doc]) == [], doc


def _bump(s: str) -> str:
    """`s` with its last digit changed (or a word number changed): another number in the same form."""
    for i in range(len(s) - 1, -1, -1):
        if s[i].isdigit():
            return s[:i] + str((int(s[i]) + 1) % 10) + s[i + 1 :]
    return {"two": "three", "a quarter": "a third"}.get(s, s + "x")


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.name for c in CLAIMS])
def test_a_changed_number_is_caught(claim: Claim) -> None:
    """Each check can fail: README with that claim's number changed (or the sentence gone) is a mismatch."""
    text = (ROOT / claim.doc).read_text()
    m = re.search(claim.pattern, text, re.S)
    assert m is not None
    changed = text[: m.start(1)] + _bump(m.group(1)) + text[m.end(1) :]
    assert [line for line in mismatches(changed, [claim])] != []
    assert mismatches(text.replace(m.group(0), ""), [claim]) != []


HEADS = (  # README leads: what it is, the two commands, how to read the report, the paper, yours, the rest
    "## The two commands",
    "## How to read the report",
    "## Reproduce the paper",
    "## Matrix files",
    "## Your own model, and advise",
    "## Where the rest is",
)
STEPS = ("Prepare", "Plan", "Rehearse", "Submit", "Status", "Report")  # reproducing the paper, in order


def test_readme_leads_in_its_order_within_3500_words_the_paper_in_its_first_1500() -> None:
    text = (ROOT / "README.md").read_text()
    at = [text.index(f"\n{head}\n") for head in HEADS]
    assert at == sorted(at), "README's sections out of order"
    assert len(text.split()) <= 3500, len(text.split())
    assert len(text[: text.index("## Reproduce the paper")].split()) <= 1500
    paper = text[text.index("## Reproduce the paper") : text.index("## Matrix files")]
    steps = [paper.index(f"**{k}. {step}**") for k, step in enumerate(STEPS, 1)]
    assert steps == sorted(steps)
    for page in re.findall(r"\]\((docs/[\w.-]+\.md)\)", text):
        assert (ROOT / page).is_file(), page
    assert len(set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", text))) >= 7  # every reference page linked


def test_readme_has_the_sections_a_new_user_needs_and_its_matrix_example_expands(tmp_path: Path) -> None:
    """How to read the report (with its screenshot), the matrix format (whose example is a matrix that loads),
    the relation to fairscale's AdaScale and a citation."""
    from bench.experiments import matrix

    text = (ROOT / "README.md").read_text()
    for head in HEADS:
        assert f"\n{head}\n" in text, head
    assert "fairscale" in text and "@inproceedings{johnson2020adascale" in text
    shot = re.search(r"!\[[^\]]*\]\(([^)]+\.png)\)", text)
    assert shot and (ROOT / shot.group(1)).is_file() and (ROOT / shot.group(1)).stat().st_size < 300_000
    example = re.search(r"## Matrix files.*?```yaml\n(.*?)```", text, re.S).group(1)
    (tmp_path / "m.yaml").write_text(example)
    kinds = {r.experiment["kind"] for r in matrix.load(tmp_path / "m.yaml").runs}
    assert kinds == set(matrix.KINDS)


def test_readme_opens_how_to_read_the_report_on_the_glossary_of_the_report() -> None:
    """The words and colours README teaches are the ones the report writes (reports.page.words, their one home)."""
    from reports.page.words import glossary_markdown

    text = (ROOT / "README.md").read_text()
    section = text[text.index("## How to read the report") :]
    assert section.index(glossary_markdown()) < section.index("\n## ", 5), "the glossary leads the section"
