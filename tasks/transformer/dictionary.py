"""fairseq's Dictionary conventions, reimplemented because fairseq does not import on Python 3.11.

Source: fairseq 0.12.2 `fairseq/data/dictionary.py` and `data_utils.post_process`. The file format is one
"<symbol> <count>[ #fairseq:overwrite]" per line; the four special symbols are never in the file and take
indices <s>=0, <pad>=1, </s>=2, <unk>=3, so file line i (0-based) gets index i + 4.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from bench.core import safefs
from bench.core.errors import UserError

BOS, PAD, EOS, UNK = "<s>", "<pad>", "</s>", "<unk>"
MAX_BYTES = 256 << 20  # a fairseq dictionary: a few MB (WMT's 32 k symbols: 0.5 MB)
_SPACE = re.compile(r"\s+")


def tokenize_line(line: str) -> list[str]:
    """fairseq's `tokenize_line`: collapse whitespace, split on spaces."""
    return _SPACE.sub(" ", line).strip().split()


def post_process(sentence: str, symbol: str | None) -> str:
    """Undo the subword segmentation the way fairseq's `post_process` does ("@@ " joins for subword-nmt)."""
    if symbol in (None, "none"):
        return sentence
    if symbol == "sentencepiece":
        return sentence.replace(" ", "").replace("\u2581", " ").strip()
    if symbol in ("subword_nmt", "@@ ", "@@"):
        sep = "@@ " if symbol == "subword_nmt" else symbol
        return (sentence + " ").replace(sep, "").rstrip()
    raise UserError(f"unknown bpe post-processing {symbol!r}; expected subword_nmt, sentencepiece or none")


class Dictionary:
    """Symbols <-> consecutive integers, with fairseq's special-symbol indices."""

    def __init__(self) -> None:
        self.symbols: list[str] = []
        self.count: list[int] = []
        self.indices: dict[str, int] = {}
        self.bos_index = self.add_symbol(BOS)
        self.pad_index = self.add_symbol(PAD)
        self.eos_index = self.add_symbol(EOS)
        self.unk_index = self.add_symbol(UNK)
        self.nspecial = len(self.symbols)

    def __len__(self) -> int:
        return len(self.symbols)

    def __contains__(self, sym: str) -> bool:
        return sym in self.indices

    def __getitem__(self, idx: int) -> str:
        return self.symbols[idx] if 0 <= idx < len(self.symbols) else UNK

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Dictionary) and self.indices == other.indices

    def add_symbol(self, word: str, n: int = 1, overwrite: bool = False) -> int:
        if word in self.indices and not overwrite:
            idx = self.indices[word]
            self.count[idx] += n
            return idx
        idx = len(self.symbols)
        self.indices[word] = idx
        self.symbols.append(word)
        self.count.append(n)
        return idx

    def index(self, sym: str) -> int:
        """Index of `sym`, or <unk>'s index for a symbol not in the dictionary."""
        return self.indices.get(sym, self.unk_index)

    def encode_line(self, line: str, append_eos: bool = True) -> list[int]:
        """Whitespace tokens -> indices, ending with </s> as fairseq-preprocess writes them."""
        ids = [self.index(w) for w in tokenize_line(line)]
        return ids + [self.eos_index] if append_eos else ids

    def string(self, ids: Iterable[int], bpe_symbol: str | None = None, escape_unk: bool = False) -> str:
        """fairseq's `Dictionary.string`: drop <s>, </s>, <pad>; <unk> written as <unk> (or <<unk>> for
        references, so an unknown word never matches); then undo the subword segmentation."""
        skip = {self.bos_index, self.eos_index, self.pad_index}
        unk = f"<{UNK}>" if escape_unk else UNK
        words = [unk if i == self.unk_index else self[i] for i in (int(t) for t in ids) if i not in skip]
        return post_process(" ".join(words), bpe_symbol)

    @classmethod
    def load(cls, path: Path) -> Dictionary:
        """Read a fairseq `dict.*.txt`; a missing or malformed file is a UserError naming it."""
        path = Path(path)
        if not path.is_file():
            raise UserError(f"missing dictionary {path}; expected fairseq's dict.<lang>.txt ('<symbol> <count>' lines)")
        d = cls()
        with open(path, encoding="utf-8") as f:  # a prepared folder's may be link_or_copy's link: followed
            size = os.fstat(f.fileno()).st_size
            if size > MAX_BYTES:
                raise safefs.TooLarge(path, size, MAX_BYTES)
            for n, raw in enumerate(safefs.bounded_lines(f, path), 1):
                line = raw.rstrip()
                if not line:
                    continue
                try:
                    word, field = line.rsplit(" ", 1)
                    overwrite = field == "#fairseq:overwrite"
                    if overwrite:
                        word, field = word.rsplit(" ", 1)
                    count = int(field)
                except ValueError as err:
                    raise UserError(
                        f"{path}:{n}: expected '<symbol> <count> [#fairseq:overwrite]', got {line!r}"
                    ) from err
                if word in d and not overwrite:
                    raise UserError(f"{path}:{n}: duplicate symbol {word!r} (fairseq needs #fairseq:overwrite)")
                d.add_symbol(word, n=count, overwrite=overwrite)
        return d

    @classmethod
    def build(cls, counts: Counter[str], padding_factor: int = 8) -> Dictionary:
        """fairseq's `finalize`: most frequent first (ties by symbol), padded with `madeupwordNNNN` to a
        multiple of `padding_factor` as fairseq-preprocess does."""
        d = cls()
        for word, c in Counter(dict(sorted(counts.items()))).most_common():
            d.add_symbol(word, n=c)
        i = 0
        while padding_factor > 1 and len(d) % padding_factor:
            d.add_symbol(f"madeupword{i:04d}", n=0)
            i += 1
        return d

    def save(self, path: Path) -> None:
        """Write the non-special symbols, one '<symbol> <count>' per line (fairseq's `save`)."""
        lines = [f"{s} {c}\n" for s, c in zip(self.symbols[self.nspecial :], self.count[self.nspecial :], strict=True)]
        safefs.write_text(path, "".join(lines))

    @classmethod
    def from_symbols(cls, symbols: Sequence[str]) -> Dictionary:
        """A dictionary over a fixed symbol list (e.g. a sentencepiece vocabulary), in that order."""
        d = cls()
        for s in symbols:
            if s not in d:
                d.add_symbol(s, n=0)
        return d
