"""cifar10: its presets and metric as plain data, read without importing torch (the adapter is
`tasks.cifar10`; every value says whether it is the paper's or chosen, and why)."""

from __future__ import annotations

from typing import Any

from tasks.presets import ELASTIC_PAPER, ELASTIC_TINY, PAPER_REDUCTION, TINY_T1, TINY_WINDOWS, TaskCard

_PAPER: dict[str, Any] = {
    "T1": 39100,  # paper (Table 2, S = 1): 100 epochs of 391 iterations
    "batch_size": 128,  # paper
    # Family from the paper (exponential decay). lr0 and decay chosen: lr0 = 0.1 is He et al.'s rate
    # for ResNets on CIFAR at b = 128 with momentum 0.9; decay 0.01 ends at 1e-3, the final rate of
    # He et al.'s step schedule, so the run finishes annealed. (The supplement with the tuned values
    # is not available here.)
    "lr_schedule": {"kind": "exponential", "lr0": 0.1, "decay": 0.01},
    "momentum": 0.9,  # paper
    "reduction": PAPER_REDUCTION,  # chosen: scales with W (tasks.presets.PAPER_REDUCTION)
    # Chosen: 5e-4 is the usual weight decay for ResNet-18 on CIFAR-10 in ~100-epoch runs, which reach
    # the ~94 % top-1 the paper reports at S = 1 (He et al.'s 1e-4 goes with 164-epoch runs).
    "weight_decay": 5e-4,
    "scales": [1, 8, 16, 32, 64],  # paper
    # Elastic 32 -> 64 -> 128 and back, at T1/4 and T1/2: docs/design.md §1 (paper §4 used it on imagenet).
    "elastic": ELASTIC_PAPER,
    "eval_every": 391,  # chosen: one epoch at S = 1 (50 000 / 128)
    "ttt_target": 93.6,  # time to target (reports.speed.timetotarget): the paper's S = 1 top-1, 94.1, less 0.5 point
    "checkpoint_every": 1000,  # chosen: a preempted run loses at most ~2.5 epochs at S = 1
    "num_workers": 4,  # chosen: per-item crop+flip (crop_flip) ~0.1 ms; 4 workers feed a GPU at b = 128
    "model": {"width": 64, "num_classes": 10},  # paper's ResNet-18 v2 (blocks: 2, the default)
    # verify_md5: the official files' checksums (torchvision's); eval_batch_size: memory, not results.
    "data": {"verify_md5": True, "eval_batch_size": 500},
}

# Tiny: everything chosen for a CPU run whose loss clearly falls. T1 = 2000 by the tiny-T1 rule, so the
# network is one pre-activation block per stage (ResNet-10 v2, `blocks` 1) at width 8 and the batch is 8
# (was ResNet-18, b = 16): at b = 16 a smoke S = 1 run of 2000 iterations of the ResNet-10 still took ~60 s
# on a shared 2-core machine, most of it per-image loading and compute that scale with b; test top-1 ~97 %
# after 440 iterations at S = 1 (b = 8). lr0 = 0.05 and decay 0.1 were chosen for the 100-iteration
# preset at b = 16 and are kept, not re-tuned.
_TINY: dict[str, Any] = {
    "T1": TINY_T1,  # the tiny-T1 rule at k = TINY_WINDOWS (tasks.presets): 2 gain memories even at S = 8
    "batch_size": 8,
    "lr_schedule": {"kind": "exponential", "lr0": 0.05, "decay": 0.1},  # paper family; lr0 chosen for b = 16
    "momentum": 0.9,
    "weight_decay": 5e-4,
    "scales": [1, 2, 4, 8],
    "elastic": ELASTIC_TINY,
    # Every 100 τ (T1/20): time to target counted to 5 % of T1, not to the quarter of the run T1/4 gave.
    "eval_every": TINY_T1 / 20,
    "checkpoint_every": TINY_T1 // 4,
    # Time to target (reports.speed.timetotarget), fixed before the runs: the smoke's S = 1 runs at 0c9803a ended at
    # 99.00 and 99.33 (seeds 0, 1); their mean less 0.5 point, 98.667, rounded down to 98.66 (300 images:
    # 296 right reach it). A harder tiny set (data.tiny_noise) is another data set and sets its own.
    "ttt_target": 98.66,
    "num_workers": 0,
    "model": {"width": 8, "num_classes": 10, "blocks": 1},
    # tiny_noise: the tiny set's colour jitter and pixel noise, × (tasks.cifar10.tiny); 1 reaches ~99 % top-1,
    # the positive control (bench/experiments/matrices/control.yaml) sets a harder set that S = 1 does not saturate
    # tiny_test_size, tiny_train_size: test and training images (300: one seed's top-1 carries ~1.7 points of
    # sampling error at 90 %; 1000: learnt by heart by the run's end); the control writes a 5 000-image test set
    # so that its margin is resolved (docs/design.md §1, §5); it keeps the 1000 training images (a pilot at × 3
    # with 5 000, 89.70 / 91.44 over 2 seeds, showed no narrower spread than 1000's sd 1.87)
    "data": {
        "verify_md5": False,
        "eval_batch_size": 500,
        "tiny_noise": 1.0,
        "tiny_test_size": 300,
        "tiny_train_size": 1000,
    },
}

PRESETS: dict[str, dict[str, Any]] = {"paper": _PAPER, "tiny": _TINY}

# What differs from the paper by necessity (the report lists it beside the comparison).
DIFFERS = (
    (
        "lr0 = 0.1 and total decay 0.01 chosen (He et al.'s ResNet rate at b = 128, ending at 1e-3): the "
        "supplement with the tuned values is not available"
    ),
    ("weight decay 5e-4 chosen (the usual ResNet-18 / CIFAR-10 value for ~100-epoch runs); the paper's is not known"),
    "elastic runs 32 → 64 → 128 and back (docs/design.md §1): the paper ran elastic scaling on imagenet only",
)

# The tiny preset's AdamW setting (spec `optimizer: adamw`; issue 60): lr0 tuned at S = 1 on pilot seed 0, the
# tiny preset otherwise as it is (T1 = 2000, its schedule's shape), weight decay 0 (so sqrt-sde's open question of
# how the decoupled decay scales does not arise). The sweep, lr0 ∈ {3e-4, 1e-3, 3e-3}, one run each:
#   adascale-bench run --task cifar10 --method identity --scale 1 --seed 0 --set optimizer=adamw \
#       --set lr_schedule.lr0=LR --set weight_decay=0.0
# ended at top-1 95.67 (3e-4), 98.33 (1e-3), 99.00 (3e-3); evaluation loss 0.2183, 0.0472, 0.0257. 3e-3 is the best
# and the grid's edge: a larger lr0 was not tried (the sweep took the
# shared 2-core machine ~20 minutes a run). The paper preset keeps the paper's SGD.
ADAMW = {"tiny": {"lr_schedule.lr0": 0.003, "weight_decay": 0.0}}

CARD = TaskCard(
    name="cifar10",
    adamw=ADAMW,
    metric="top1",
    metric_label="top-1 %",
    higher_is_better=True,
    needs_data=True,
    presets=PRESETS,
    tiny_windows=TINY_WINDOWS,
    differs=DIFFERS,
    unit="images",
    tiny_data=("tiny_noise", "tiny_test_size", "tiny_train_size"),
    metric_range=(0.0, 100.0),  # top-1 %
    chance={"tiny": 10.0, "paper": 10.0},  # top-1 of a guess over 10 balanced classes (both presets' num_classes)
    max_ranks={"tiny": 1, "paper": None},  # a paper run spreads over every rank the resources allow
)
