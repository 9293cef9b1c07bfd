"""Reading the pickles of data sets without running code: a restricted unpickler.

Two data formats the suite reads are pickles written by others: CIFAR-10's python batches (a dict of
str keys holding a uint8 numpy array, lists of ints and str) and ultralytics' label cache
(`labels/<split>.cache`, an `np.save` of a dict holding float32 arrays, tuples, str). A plain
`pickle.load` of either calls whatever a crafted file names (`os.system` through `__reduce__`). Here
the only callables a pickle may name are numpy's own array and dtype constructors, checked further:
- `numpy(._core|.core).multiarray._reconstruct(ndarray, (0,), b"b")`, what every protocol 0-4 pickle
  of an array starts with, with the array's contents set by ndarray.__setstate__;
- `numpy(._core|.core).numeric._frombuffer(bytes, dtype, shape, order)`, protocol 5's form;
- `numpy.dtype(<typestring>, False, True)` for a plain number type (bool, int, uint, float), and the
  object type only where the caller allows it (the label cache's 0-d holder array);
- `_codecs.encode(text, "latin1")`, how protocol 2 writes bytes.
Any other global (a class, a function, a module attribute) is refused with `PickleRefused`, a
UserError of one line that names the file and the global; nothing is called.
"""

from __future__ import annotations

import codecs
import io
import pickle
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from bench.core import safefs
from bench.core.errors import UserError

MAX_BYTES = 2 << 30  # a CIFAR-10 batch is 31 MB, a label cache a few MB: a file past this is not one

_NUMBER_KINDS = frozenset("biuf")  # bool, int, uint, float
_LATIN1 = frozenset({"latin1", "latin-1", "iso-8859-1", "iso8859-1", "l1"})


class PickleRefused(UserError):
    """A pickle naming a global outside the allowed numpy constructors (possibly crafted to run code)."""


class _NdarrayType:
    """What a pickle gets for `numpy.ndarray`: usable only as _reconstruct's first argument (the class
    itself would let a pickle call ndarray(shape) with any shape)."""


_NDARRAY = _NdarrayType()


def _reconstruct(subtype: Any, shape: Any, dtype: Any) -> np.ndarray:
    if subtype is not _NDARRAY or tuple(shape) != (0,) or dtype not in (b"b", "b"):
        raise pickle.UnpicklingError("numpy _reconstruct with arguments no ndarray pickle uses")
    return np.ndarray.__new__(np.ndarray, (0,), np.uint8)


def _encode(text: Any, encoding: Any = "utf-8") -> bytes:
    if not isinstance(text, str) or str(encoding).lower() not in _LATIN1:
        raise pickle.UnpicklingError("_codecs.encode other than a latin1 string")
    return codecs.encode(text, "latin1")


class _Restricted(pickle.Unpickler):
    def __init__(self, file: BinaryIO, objects: bool) -> None:
        super().__init__(file, encoding="latin1")  # the Python 2 batches: their str are latin1 bytes
        self.objects = objects

    def _dtype(self, spec: Any, align: Any = False, copy: Any = True) -> np.dtype:
        if not isinstance(spec, str) or len(spec) > 4:
            raise pickle.UnpicklingError(f"numpy dtype {spec!r:.40}")
        dt = np.dtype(spec)
        if dt.kind not in _NUMBER_KINDS and not (dt.kind == "O" and self.objects):
            raise pickle.UnpicklingError(f"numpy dtype {spec!r} (only numbers are allowed here)")
        return dt

    def _frombuffer(self, buf: Any, dtype: Any, shape: Any, order: Any) -> np.ndarray:
        if not isinstance(buf, bytes | bytearray) or not isinstance(dtype, np.dtype) or dtype.kind == "O":
            raise pickle.UnpicklingError("numpy _frombuffer with arguments no ndarray pickle uses")
        return np.frombuffer(buf, dtype).reshape(shape, order=order).copy()

    def find_class(self, module: str, name: str) -> Any:
        allowed = {
            ("numpy", "ndarray"): _NDARRAY,
            ("numpy", "dtype"): self._dtype,
            ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
            ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
            ("numpy._core.numeric", "_frombuffer"): self._frombuffer,
            ("numpy.core.numeric", "_frombuffer"): self._frombuffer,
            ("_codecs", "encode"): _encode,
        }
        found = allowed.get((module, name))
        if found is None:
            raise _Refused(f"{module}.{name}")
        return found


class _Refused(pickle.UnpicklingError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def load(source: Path | bytes, *, what: str, objects: bool = False, name: Path | str | None = None) -> Any:
    """The object a pickle file (or its bytes) holds, built with only numpy's array constructors.
    `what` says what the file is ("CIFAR-10 batch"); `name` the path to name for bytes. A pickle
    naming any other global raises PickleRefused; a damaged one UserError; both one line."""
    label = name if name is not None else source
    try:
        if isinstance(source, bytes):
            obj = _Restricted(io.BytesIO(source), objects).load()
        else:
            with safefs.open_file(source, "rb", MAX_BYTES) as f:  # no link below its root, no FIFO, bounded
                obj = _Restricted(f, objects).load()
    except _Refused as e:
        raise PickleRefused(
            f"{label}: refused: this {what} names {_short(e.name)}, which no {what} needs "
            "(read without running anything in it); replace the file"
        ) from None
    except (pickle.UnpicklingError, ValueError, TypeError) as e:
        raise UserError(f"{label}: not a {what} ({_short(str(e)) or type(e).__name__})") from None
    except OSError as e:
        raise UserError(f"{label}: unreadable ({type(e).__name__}: {_short(str(e))})") from None
    except (EOFError, MemoryError, OverflowError, IndexError, KeyError, AttributeError, RecursionError) as e:
        raise UserError(f"{label}: not a {what} (unreadable: {type(e).__name__})") from None
    return safefs.check_shape(obj, label)  # depth and shared references bounded before anything walks it
