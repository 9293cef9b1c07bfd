"""A tiny learnable toy translation, written as fairseq-preprocess output (joint dictionary, mmap .bin/.idx).

The "language pair": source sentences are subject-verb-object with optional adjectives ("a3 n5 v1 n2");
the target translates word by word through a fixed random lexicon and puts every adjective after its
noun ("N5 A3 V1 N2"), so the model must learn both a lexicon and a local reordering. Some target words
are split into two subword units ("A1@@ x"), so evaluation exercises fairseq's BPE undo.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from bench.core import safefs

from .dictionary import Dictionary, tokenize_line
from .indexed import best_fitting_int_dtype, write_indexed

SRC, TGT = "en", "de"
SPLITS = {"train": 1600, "valid": 100, "test": 100}
N_NOUNS, N_ADJS, N_VERBS = 10, 6, 5


def _lexicon(rng: np.random.Generator) -> dict[str, str]:
    """Source word -> target word (possibly two subword units joined by '@@ ')."""
    lex = {}
    for kind, n in (("n", N_NOUNS), ("a", N_ADJS), ("v", N_VERBS)):
        perm = rng.permutation(n)
        for i in range(n):
            word = f"{kind.upper()}{perm[i]}"
            lex[f"{kind}{i}"] = f"{word}@@ x" if kind == "a" and perm[i] % 2 == 0 else word
    return lex


def _phrase(rng: np.random.Generator, lex: dict[str, str]) -> tuple[list[str], list[str]]:
    noun = f"n{rng.integers(N_NOUNS)}"
    if rng.random() < 0.5:
        adj = f"a{rng.integers(N_ADJS)}"
        return [adj, noun], [lex[noun], lex[adj]]  # the reordering rule: noun before adjective
    return [noun], [lex[noun]]


def tiny_pairs(seed: int = 0) -> dict[str, list[tuple[str, str]]]:
    """Tokenised (source, target) sentence pairs per split, deterministic in `seed`."""
    rng = np.random.default_rng(seed)
    lex = _lexicon(rng)
    out: dict[str, list[tuple[str, str]]] = {}
    for split, n in SPLITS.items():
        pairs = []
        for _ in range(n):
            s1, t1 = _phrase(rng, lex)
            s2, t2 = _phrase(rng, lex)
            verb = f"v{rng.integers(N_VERBS)}"
            pairs.append((" ".join([*s1, verb, *s2]), " ".join([*t1, lex[verb], *t2])))
        out[split] = pairs
    return out


def write_binarized(root: Path, pairs: dict[str, list[tuple[str, str]]], src: str = SRC, tgt: str = TGT) -> None:
    """What `fairseq-preprocess --joined-dictionary --dataset-impl mmap` writes for these pairs."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    counts: Counter[str] = Counter()
    for s, t in pairs["train"]:
        counts.update(tokenize_line(s))
        counts.update(tokenize_line(t))
    d = Dictionary.build(counts)
    d.save(root / f"dict.{src}.txt")
    d.save(root / f"dict.{tgt}.txt")
    dtype = best_fitting_int_dtype(len(d))
    for split, ps in pairs.items():
        for side, lang in ((0, src), (1, tgt)):
            write_indexed(root / f"{split}.{src}-{tgt}.{lang}", (d.encode_line(p[side]) for p in ps), dtype)


def write_raw(root: Path, pairs: dict[str, list[tuple[str, str]]], src: str = SRC, tgt: str = TGT) -> None:
    """Untokenised text `{split}.{lang}` (subwords joined) for the raw + sentencepiece layout."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for split, ps in pairs.items():
        for side, lang in ((0, src), (1, tgt)):
            text = "".join((p[side] + " ").replace("@@ ", "").rstrip() + "\n" for p in ps)
            safefs.write_text(root / f"{split}.{lang}", text)


def write_tiny(root: Path) -> None:
    write_binarized(root, tiny_pairs(0))
