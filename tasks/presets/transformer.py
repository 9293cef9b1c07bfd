"""transformer: its presets and metric as plain data, read without importing torch (the adapter is
`tasks.transformer`; every value says whether it is the paper's or chosen, and why)."""

from __future__ import annotations

from typing import Any

from tasks.presets import ELASTIC_PAPER, ELASTIC_TINY, PAPER_REDUCTION, TINY_T1, TINY_WINDOWS, TaskCard

PRESETS: dict[str, dict[str, Any]] = {
    "paper": {
        "T1": 1_550_000,  # paper (Table 1)
        "batch_size": 2048,  # paper: b = 2048 tokens per batch at S = 1 (max-tokens batches)
        "lr_schedule": {
            "kind": "step",  # paper: step decay family
            "lr0": 0.01,  # chosen: with momentum 0.99 an effective step lr0/(1-rho) = 1.0, the
            # usual SGD scale for post-norm Transformers; the supplement's value is not available
            "gamma": 0.1,  # chosen: the customary x0.1 step
            "milestones": [0.5, 0.75],  # chosen: half and three quarters of T1
        },
        "momentum": 0.99,  # paper
        "reduction": PAPER_REDUCTION,  # chosen: scales with W (tasks.presets.PAPER_REDUCTION)
        "weight_decay": 0.0,  # chosen: Vaswani et al. and fairseq's WMT en-de recipe use none
        "scales": [1, 16, 32, 64, 128],  # paper (Table 2)
        "elastic": ELASTIC_PAPER,
        "eval_every": 77_500.0,  # chosen: 20 evaluations per run (T1 / 20)
        "checkpoint_every": 5000,  # chosen
        "num_workers": 2,  # chosen: batches are precomputed; workers only gather memory-mapped tokens
        "model": {  # paper: Transformer base
            "encoder_layers": 6,
            "decoder_layers": 6,
            "d_model": 512,
            "ffn_dim": 2048,
            "heads": 8,
            "dropout": 0.1,
            "max_positions": 1024,  # fairseq's default max source/target positions
            "norm_first": False,  # paper: post-norm residual blocks
            "beam": 4,  # paper: beam 4, length penalty 0.6, max output length = input + 50
            "lenpen": 0.6,
            "max_len_a": 1.0,
            "max_len_b": 50,
        },
        "data": {
            # fairseq examples/translation/prepare-wmt14en2de.sh + fairseq-preprocess --joined-dictionary
            "format": "fairseq",
            "src": "en",
            "tgt": "de",
            "train_split": "train",
            "eval_split": "test",  # newstest2014, the set the paper reports
            "eval_max_sentences": 3003,  # all of newstest2014
            "eval_max_tokens": 8192,  # chosen: decoding batch budget
            "bpe": "subword_nmt",  # undo "@@ " before BLEU
        },
    },
    "tiny": {
        # tiny values are chosen, not the paper's: at S = 1 greedy BLEU reached ~50 on the toy corpus in
        # 150 SGD steps with 2 + 2 layers (about 0 after T1/4, 15-25 after T1/2). T1 = 2000 by the tiny-T1
        # rule: 1 + 1 layers (~2/3 of the CPU time per micro-batch) still reach BLEU 100 in 240 steps.
        "T1": TINY_T1,  # the tiny-T1 rule at k = TINY_WINDOWS (tasks.presets): 2 gain memories even at S = 8
        "batch_size": 320,  # tokens per micro-batch (~45 toy sentences)
        "lr_schedule": {"kind": "step", "lr0": 0.15, "gamma": 0.1, "milestones": [0.75]},
        # chosen: 0.99's ~100-iteration memory was as long as the whole 150-step run; kept with T1 = 2000
        "momentum": 0.9,
        "weight_decay": 0.0,
        "scales": [1, 2, 4, 8],
        "elastic": ELASTIC_TINY,
        "eval_every": TINY_T1 / 4,
        "checkpoint_every": TINY_T1 // 4,
        # time to target: the smoke's S = 1 run at 0c9803a (seed 0) ended at 99.257, less 0.5, rounded down.
        # The paper preset has none: the paper's BLEU is tokenised (paper_metric), not this metric.
        "ttt_target": 98.75,
        "num_workers": 0,
        "model": {
            "encoder_layers": 1,
            "decoder_layers": 1,
            "d_model": 64,
            "ffn_dim": 128,
            "heads": 4,
            "dropout": 0.1,
            "max_positions": 64,
            # chosen: post-norm (the paper's) stays on the unigram plateau for 150 plain-SGD steps
            # without warm-up at every lr tried (0.1-0.5; 1.0 diverges); pre-norm learns
            "norm_first": True,
            "beam": 1,  # greedy
            "lenpen": 0.6,
            "max_len_a": 1.0,
            "max_len_b": 5,
        },
        "data": {
            "format": "fairseq",
            "src": "en",
            "tgt": "de",
            "train_split": "train",
            "eval_split": "valid",
            "eval_max_sentences": 100,
            "eval_max_tokens": 1024,
            "bpe": "subword_nmt",
        },
    },
}

# What differs from the paper by necessity (the report lists it beside the comparison).
DIFFERS = (
    (
        "lr0 = 0.01 chosen (with momentum 0.99 an effective step of 1.0); step ×0.1 at T1/2 and 3T1/4 chosen;"
        " the supplement's values are not available"
    ),
    "weight decay 0 chosen (Vaswani et al. and fairseq's WMT en-de recipe use none)",
    (
        "Table 2's BLEU column is detokenised sacreBLEU (`bleu`, "
        "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp); the paper's ~27-point numbers compare with "
        "`bleu_tok`, tokenised BLEU with compound splitting (summary.json eval.bleu_tok)"
    ),
    "elastic runs 32 → 64 → 128 and back (docs/design.md §1): the paper ran elastic scaling on imagenet only",
)

# The tiny preset's AdamW setting (spec `optimizer: adamw`; issue 60): lr0 tuned at S = 1 on pilot seed 0, the
# tiny preset otherwise as it is (T1 = 2000, its schedule's shape), weight decay 0 (so sqrt-sde's open question of
# how the decoupled decay scales does not arise). The sweep, lr0 ∈ {3e-4, 1e-3, 3e-3}, one run each:
#   adascale-bench run --task transformer --method identity --scale 1 --seed 0 --set optimizer=adamw \
#       --set lr_schedule.lr0=LR --set weight_decay=0.0
# ended at BLEU 100 at every lr0 (saturated from τ = 500), evaluation loss 0.7380 (3e-4), 0.7157 (1e-3), 0.7063
# (3e-3): the tie broken by the loss. 3e-3 is the best and the grid's edge: a larger lr0 was not tried (the
# sweep took the shared 2-core machine ~20 minutes a run). The paper preset keeps the paper's SGD.
ADAMW = {"tiny": {"lr_schedule.lr0": 0.003, "weight_decay": 0.0}}

CARD = TaskCard(
    name="transformer",
    adamw=ADAMW,
    metric="bleu",
    metric_label="BLEU",
    higher_is_better=True,
    needs_data=True,
    presets=PRESETS,
    tiny_windows=TINY_WINDOWS,
    differs=DIFFERS,
    unit="tokens",
    paper_metric="bleu_tok",  # the paper's ~27 BLEU is tokenised, compound-split BLEU (DIFFERS above)
    metric_range=(0.0, 100.0),  # BLEU
    max_ranks={"tiny": 1, "paper": None},  # a paper run spreads over every rank the resources allow
)
