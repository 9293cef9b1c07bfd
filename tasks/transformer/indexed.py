"""fairseq's memory-mapped indexed dataset (`--dataset-impl mmap`, the default): reader and writer.

Layout, verified against fairseq 0.12.2 `fairseq/data/indexed_dataset.py` (`MMapIndexedDataset.Index`):

    {prefix}.idx   9 bytes magic b"MMIDIDX\\x00\\x00"
                   uint64 LE version = 1
                   uint8  dtype code (table below)
                   uint64 LE number of sequences N
                   int32[N] sizes (elements per sequence)
                   int64[N] pointers (byte offset of each sequence in .bin)
    {prefix}.bin   the sequences back to back, in that dtype

fairseq's index has no document index (the `doc_idx` array and its count belong to Megatron-LM's fork of
this format; a uint64 doc count after N would shift fairseq's own reader), so neither is written or read.
fairseq-preprocess picks the dtype with `best_fitting_int_dtype(len(dictionary))`: uint16 below 65 500
symbols, so WMT data is normally code 8. Sentences end with </s> (index 2).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from bench.core import safefs
from bench.core.errors import UserError

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
# fairseq's `_code_to_dtype` (0.12.2); 6 and 7 are both float64 there (np.float64 / np.double).
CODE_TO_DTYPE: dict[int, type] = {
    1: np.uint8,
    2: np.int8,
    3: np.int16,
    4: np.int32,
    5: np.int64,
    6: np.float64,
    7: np.double,
    8: np.uint16,
    9: np.uint32,
    10: np.uint64,
}
HEADER_BYTES = len(MAGIC) + 8 + 1 + 8


def dtype_code(dtype: type | np.dtype) -> int:
    """First code of `dtype` in fairseq's table (as fairseq's `_dtype_header_code`)."""
    dt = np.dtype(dtype)
    for code, d in CODE_TO_DTYPE.items():
        if np.dtype(d) == dt:
            return code
    raise ValueError(f"dtype {dt} has no fairseq code")


def best_fitting_int_dtype(vocab_size: int | None) -> type:
    """fairseq-preprocess's choice of element type for a vocabulary of `vocab_size` symbols."""
    if vocab_size is None:
        return np.uint32
    if vocab_size < 65500:
        return np.uint16
    if vocab_size < 4294967295:
        return np.uint32
    return np.int64


def write_indexed(prefix: Path | str, sequences: Iterable[Iterable[int]], dtype: type = np.uint16) -> None:
    """Write `{prefix}.bin` and `{prefix}.idx` exactly as fairseq's MMapIndexedDatasetBuilder does."""
    prefix = str(prefix)
    itemsize = np.dtype(dtype).itemsize
    sizes: list[int] = []
    with safefs.writer(prefix + ".bin") as f:
        for seq in sequences:
            arr = np.asarray(list(seq), dtype=dtype)
            f.write(arr.tobytes(order="C"))
            sizes.append(arr.size)
    size_arr = np.asarray(sizes, dtype=np.int32)
    pointers = np.zeros(len(sizes), dtype=np.int64)
    if sizes:
        pointers[1:] = np.cumsum(size_arr[:-1].astype(np.int64) * itemsize)
    with safefs.writer(prefix + ".idx") as f:
        f.write(MAGIC)
        f.write(struct.pack("<Q", VERSION))
        f.write(struct.pack("<B", dtype_code(dtype)))
        f.write(struct.pack("<Q", len(sizes)))
        f.write(size_arr.astype("<i4").tobytes(order="C"))
        f.write(pointers.astype("<i8").tobytes(order="C"))


def check_index(
    sizes: np.ndarray, pointers: np.ndarray, itemsize: int, nbytes: int, idx_path: Path, bin_path: Path
) -> None:
    """The index's sequences are fairseq's: sizes not negative, each pointer the end of the sequence
    before it (the first at 0: fairseq's builder writes them back to back), the last ending exactly at the
    end of the .bin. Else a one-line UserError naming the first wrong sequence: a pointer 1 TB past the end
    or a negative size would read memory outside the file, or other sentences' tokens. Vectorised (numpy):
    WMT's index holds 4.5 M sequences."""
    if not len(sizes):
        if nbytes:
            raise UserError(f"{bin_path}: {nbytes} bytes, but its index {idx_path} lists no sequence")
        return
    if int(sizes.min()) < 0:
        i = int(np.argmax(sizes < 0))
        raise UserError(f"{idx_path}: sequence {i} has size {int(sizes[i])}; expected a count of tokens (damaged)")
    ends = np.cumsum(sizes.astype(np.int64) * itemsize)  # steps under 2**34: a sum past int64 shows negative
    wrong = np.flatnonzero(pointers[1:] != ends[:-1])
    if pointers[0] != 0 or wrong.size:
        i = 0 if pointers[0] != 0 else int(wrong[0]) + 1
        want = 0 if i == 0 else int(ends[i - 1])
        raise UserError(
            f"{idx_path}: sequence {i} starts at byte {int(pointers[i])} of {bin_path.name}, expected {want} "
            "(fairseq writes the sequences back to back); damaged"
        )
    end = int(ends[-1]) if int(ends.min()) >= 0 else 1 << 63
    if end != nbytes:
        how = "shorter" if nbytes < end else "longer"
        raise UserError(f"{bin_path}: {nbytes} bytes, {how} than the {end} its index {idx_path} describes")


class MMapIndexedDataset:
    """Read-only view of a fairseq mmap dataset; items are int64 numpy arrays. Pickles by path (like
    fairseq's), so DataLoader workers reopen the memory maps instead of copying them."""

    def __init__(self, prefix: Path | str) -> None:
        self.prefix = str(prefix)
        self._open()

    def _open(self) -> None:
        idx_path, bin_path = Path(self.prefix + ".idx"), Path(self.prefix + ".bin")
        for p in (idx_path, bin_path):
            if not p.is_file():
                raise UserError(f"missing {p}; expected fairseq-preprocess mmap output {self.prefix}.{{bin,idx}}")
        with open(idx_path, "rb") as f:
            head = f.read(HEADER_BYTES)
        if head[: len(MAGIC)] != MAGIC:
            what = "a fairseq lazy/cached index (TNTIDX)" if head.startswith(b"TNTIDX") else "not a fairseq index"
            raise UserError(f"{idx_path}: {what}; expected --dataset-impl mmap (magic {MAGIC!r})")
        if len(head) < HEADER_BYTES:
            raise UserError(f"{idx_path}: truncated header; expected fairseq mmap index")
        (version,) = struct.unpack("<Q", head[9:17])
        (code,) = struct.unpack("<B", head[17:18])
        (n,) = struct.unpack("<Q", head[18:26])
        if version != VERSION or code not in CODE_TO_DTYPE:
            raise UserError(f"{idx_path}: version {version} / dtype code {code}; expected version 1, code 1-10")
        if idx_path.stat().st_size < HEADER_BYTES + 12 * n:
            raise UserError(f"{idx_path}: too short for {n} sequences; expected fairseq mmap index")
        self.version, self.code, self.dtype = version, code, np.dtype(CODE_TO_DTYPE[code])
        index = np.memmap(idx_path, mode="r", dtype=np.uint8)
        self.sizes = np.frombuffer(index, dtype="<i4", count=n, offset=HEADER_BYTES)
        self.pointers = np.frombuffer(index, dtype="<i8", count=n, offset=HEADER_BYTES + 4 * n)
        self._index = index
        if bin_path.stat().st_size == 0:
            self._data = np.zeros(0, dtype=np.uint8)
        else:
            self._data = np.memmap(bin_path, mode="r", dtype=np.uint8)
        check_index(self.sizes, self.pointers, self.dtype.itemsize, self._data.size, idx_path, bin_path)

    def __len__(self) -> int:
        return len(self.sizes)

    def check_ids(self, symbols: int, dictionary: str) -> None:
        """Every token id in [0, `symbols`), the size of `dictionary` (a name for the message), checked with
        numpy over the whole .bin (check_index has made it exactly the sequences): an id past the dictionary
        would index past the embedding, a negative one wrap around to the last rows."""
        bin_path = f"{self.prefix}.bin"
        if self.dtype.kind not in "iu":
            raise UserError(f"{bin_path}: tokens of type {self.dtype} (code {self.code}); expected integer ids")
        tokens = np.frombuffer(self._data, dtype=self.dtype)
        if not tokens.size or (int(tokens.min()) >= 0 and int(tokens.max()) < symbols):
            return
        at = int(np.flatnonzero((tokens < 0) | (tokens >= symbols))[0])  # only on the way to the error
        seq = int(np.searchsorted(self.pointers, at * self.dtype.itemsize, side="right")) - 1
        raise UserError(
            f"{bin_path}: token id {int(tokens[at])} (sequence {seq}) but {dictionary} has {symbols} symbols; "
            "expected ids from that dictionary"
        )

    def __getitem__(self, i: int) -> np.ndarray:
        ptr, size = int(self.pointers[i]), int(self.sizes[i])
        arr = np.frombuffer(self._data, dtype=self.dtype, count=size, offset=ptr)
        return arr.astype(np.int64)

    def __getstate__(self) -> str:
        return self.prefix

    def __setstate__(self, prefix: str) -> None:
        self.prefix = prefix
        self._open()
