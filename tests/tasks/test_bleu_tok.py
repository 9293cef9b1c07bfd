"""The transformer's two BLEU numbers on a hand example: detokenised sacreBLEU (`bleu`) and tokenised BLEU
with compound splitting (`bleu_tok`, the one that compares with the paper's ~27)."""

from __future__ import annotations

import pytest
from sacrebleu.metrics import BLEU

from tasks.transformer import BLEU_SIGNATURE, bleu_scores, compound_split

HYP = "das ist der neue Test-Fall heute"
REF = "das ist der neue Test-Lauf heute"


def test_compound_split_as_the_perl_one_liner():
    assert compound_split("der Test-Fall .") == "der Test ##AT##-##AT## Fall ."
    assert compound_split("a-b-c") == "a ##AT##-##AT## b-c"  # non-overlapping, like perl's s{}{}g
    assert compound_split("- x") == "- x"  # a lone dash is not a compound


def test_bleu_and_bleu_tok_by_hand():
    s = bleu_scores([HYP], [REF])
    # detokenised, 13a keeps "Test-Fall" whole: 6 tokens, n-gram precisions 5/6, 3/5, 2/4, 1/3, BP = 1
    assert s["bleu"] == pytest.approx(100 * (5 * 3 * 2 * 1 / (6 * 5 * 4 * 3)) ** 0.25)  # 53.73
    # compound-split: "Test ##AT##-##AT## Fall", 8 tokens, precisions 7/8, 5/7, 4/6, 3/5
    assert s["bleu_tok"] == pytest.approx(100 * (7 * 5 * 4 * 3 / (8 * 7 * 6 * 5)) ** 0.25)  # 70.71
    # Moses-tokenised output ("@-@", as fairseq's prepare-wmt14en2de.sh leaves it) gives the same bleu_tok
    moses = bleu_scores(["das ist der neue Test @-@ Fall heute"], [REF])
    assert moses["bleu_tok"] == pytest.approx(s["bleu_tok"])


def test_signature_is_sacrebleus_own():
    bleu = BLEU(tokenize="13a")
    bleu.corpus_score([HYP], [[REF]])
    assert str(bleu.get_signature()).rsplit("|version:", 1)[0] == BLEU_SIGNATURE
