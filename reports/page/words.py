"""One vocabulary and one colour per meaning, from the report's first screen to its CSVs: every word a verdict
is written in, and the colour it is shown in, is defined here and nowhere else.

- Claims (the paper's findings (i)–(v)) say **holds** (the claim reproduced) / **does not hold** (the data
  contradicts it).
- Rules (each Table 2 rule against its own S = 1) say **keeps** (S = 1's quality, within the margin −Δ) /
  **worse** (below it, or a seed failed).
- Both share **inconclusive** (too few seeds, or an interval across the margin), **not testable** (with its
  reason: saturated — S = 1 already at the metric's best —, the regime not reached, no noise scale measured)
  and **not run**.

A colour is a meaning about quality, the same in every grid and table: green = kept (a rule keeps; a claim
holds), red = lost (a rule is worse; a claim does not hold), amber = undecided, grey = nothing to judge. Claim
(ii) is the one where the paper predicts a loss: its "holds" is LSW worse, so its cell reads "LSW worse — as the
paper says" in the colour of worse, as the rules grid shows the same fact (one fact, one colour).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from reports.verdicts import findings as FD


@dataclass(frozen=True)
class Word:
    """A status as the page, the text files and the CSVs write it, its colour class and what it means."""

    word: str
    colour: str  # a CSS class of COLOURS
    means: str


COLOURS = {  # colour class → background; the one palette of verdicts (reports.page.layout's CSS is made from it)
    "ok": "#cdebc9",
    "bad": "#f4c2c2",
    "open": "#fbe7b5",
    "none": "#e6e6e6",
}
NOT_TESTABLE_WORD, NOT_RUN_WORD, INCONCLUSIVE_WORD = "not testable", "not run", "inconclusive"
_SHARED = {
    FD.INCONCLUSIVE: Word(INCONCLUSIVE_WORD, "open", "too few seeds (≥ 3 a side), or an interval across the margin"),
    FD.NOT_TESTABLE: Word(
        NOT_TESTABLE_WORD,
        "none",
        "the data cannot decide it, for the reason given: saturated (S = 1 already at the metric's best, so kept "
        "quality cannot show), the regime not reached, no noise scale measured",
    ),
    FD.NOT_RUN: Word(NOT_RUN_WORD, "none", "no runs for it in this folder"),
}
CLAIM = {  # a claim of the paper, (i)–(v)
    FD.HOLDS: Word("holds", "ok", "the paper's claim reproduced here (a test that could have failed did not)"),
    FD.FAILS: Word("does not hold", "bad", "the data contradicts the paper's claim"),
    **_SHARED,
}
RULE = {  # a rule against its own S = 1
    FD.HOLDS: Word("keeps", "ok", "keeps S = 1's quality: the interval of the difference lies above −Δ"),
    FD.FAILS: Word("worse", "bad", "worse than S = 1: below the margin −Δ, or a seed diverged or collapsed"),
    **_SHARED,
}
# claim (ii) predicts a loss (LSW worse than S = 1 at the largest S): the fact it reads is LSW's quality
LOSS_CLAIM = "ii"
LOSS_WORDS = {
    FD.HOLDS: Word("LSW worse — as the paper says", "bad", "LSW loses S = 1's quality, as the paper predicts"),
    FD.FAILS: Word("LSW keeps — unlike the paper", "ok", "LSW keeps S = 1's quality where the paper says it loses"),
}
REASONS = (  # a `not testable` detail's opening words → its reason in a word or three
    ("saturated", "saturated"),
    ("no noise scale", "no noise scale"),
    ("no independent measurement", "no noise scale"),
    ("not judged", "window too short"),
    ("no reference independent", "no reference"),
)


def reason(detail: str) -> str:
    """The reason a `not testable` verdict gives, in a word or three ('' where none is known)."""
    text = str(detail)
    if "LSW takes AdaScale's steps" in text:
        return "regime not reached"
    return next((short for start, short in REASONS if text.startswith(start)), "")


def rule_word(status: str) -> Word:
    """A rule's verdict (reports.page.rulecompare): keeps / worse / inconclusive / not testable / not run."""
    return RULE.get(str(status), Word(str(status), "none", ""))


def claim_word(check: str, status: str) -> Word:
    """A claim's verdict: holds / does not hold / ...; claim (ii)'s decided cells say what LSW did, in the colour
    of that fact (LSW worse — as the paper says: red, as the rules grid shows it)."""
    if check == LOSS_CLAIM and status in LOSS_WORDS:
        return LOSS_WORDS[status]
    return CLAIM.get(str(status), Word(str(status), "none", ""))


def with_reason(word: str, status: str, detail: str) -> str:
    """'not testable (saturated)' where a reason is known; any other word as it is."""
    why = reason(detail) if status == FD.NOT_TESTABLE else ""
    return f"{word} ({why})" if why else word


def claim_text(status: str, detail: str = "") -> str:
    """A claim's status as findings.csv writes it (claim (ii) included: the CSV keeps the claim's words)."""
    return with_reason(CLAIM.get(str(status), Word(str(status), "none", "")).word, str(status), detail)


def rule_text(status: str, detail: str = "") -> str:
    """A rule's verdict as rule_verdicts.csv, rules_at_a_glance.csv and rules.txt write it."""
    return with_reason(rule_word(status).word, str(status), detail)


def claims_in_words(found: pd.DataFrame) -> pd.DataFrame:
    """The findings with their status in the page's words (findings.csv)."""
    if found.empty:
        return found
    return found.assign(status=[claim_text(s, d) for s, d in zip(found["status"], found["detail"], strict=True)])


def glossary() -> list[tuple[str, str, str]]:
    """(word, colour class, meaning), claims first, then rules, then the words both share."""
    rows = [(w.word, w.colour, f"claim: {w.means}") for s, w in CLAIM.items() if s in (FD.HOLDS, FD.FAILS)]
    rows += [(w.word, w.colour, f"rule: {w.means}") for s, w in RULE.items() if s in (FD.HOLDS, FD.FAILS)]
    rows += [(w.word, w.colour, f"both: {w.means}") for w in _SHARED.values()]
    loss = LOSS_WORDS[FD.HOLDS]
    return [*rows, (loss.word, loss.colour, "claim (ii), which predicts a loss: " + loss.means)]


COLOUR_NAMES = {"ok": "green", "bad": "red", "open": "amber", "none": "grey"}


def glossary_markdown() -> str:
    """The glossary as README's "How to read the report" opens with it (tests/test_readme.py checks it)."""
    lines = ["| word | colour | means |", "|---|---|---|"]
    lines += [f"| {word} | {COLOUR_NAMES[c]} | {means} |" for word, c, means in glossary()]
    return "\n".join(lines)


def glossary_text() -> str:
    """The glossary in one sentence, for the page's key and the text files."""
    return "; ".join(f"{word} ({COLOUR_NAMES[c]})" for word, c, _ in glossary())
