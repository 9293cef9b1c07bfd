"""Checkpoints: written atomically (a crash mid-write leaves the previous one), read with one-line errors.
The resume checkpoint (checkpoint.pt) carries everything; a kept one (checkpoints/iter<N>.pt, spec
keep_checkpoints_every) only the model's weights, for offline measurements such as `adascale-bench gain`.

Nothing from disk is unpickled: every read is torch.load(weights_only=True), which builds tensors and
plain containers (dict, list, tuple, str, int, float, bool, None) and refuses any other object, so a
checkpoint crafted to run code on load (a pickle with __reduce__) is refused in one line naming the file.
What is saved is kept to those types (`plain`): the engine holds no Python or numpy RNG state (its
randomness is a function of position, bench.core.engine.seeding), and the spec and state are JSON-like."""

from __future__ import annotations

import io
import os
import pickle
import re
import zipfile
from pathlib import Path
from typing import Any

import torch

from bench.core import safefs
from bench.core.errors import UserError
from bench.core.files import atomic_write_bytes, open_regular

_PLAIN = (str, int, float, bool, type(None), torch.Tensor)


def plain(obj: Any, where: str = "checkpoint") -> Any:
    """`obj` with tuples kept and nothing else but what weights_only=True loads (a TypeError otherwise,
    so a new field of another type is caught when it is written, not when a resume refuses it)."""
    if isinstance(obj, dict):
        return {k: plain(v, f"{where}.{k}") for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(plain(v, where) for v in obj)
    if isinstance(obj, _PLAIN):
        return obj
    raise TypeError(f"{where} holds a {type(obj).__name__}, which torch.load(weights_only=True) refuses")


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    buffer = io.BytesIO()
    torch.save(plain(state), buffer)
    atomic_write_bytes(path, buffer.getvalue())


class CheckpointRefused(UserError):
    """A checkpoint holding objects weights_only=True will not build (possibly crafted to run code)."""


def safe_load(path: Path, device: torch.device | str, what: str, mmap: bool = False) -> Any:
    """torch.load(weights_only=True) with one-line errors, of a file opened as bench.core.safefs opens one (no
    link below the root, a regular file: a FIFO is refused at once, never waited on) and checked before
    torch sees it (`check_members`: nothing in it inflates). A file holding anything but tensors and plain
    containers is refused (and nothing in it runs), a damaged one is unreadable."""
    try:
        f = open_regular(path, "rb")
    except OSError as e:
        raise UserError(f"{what} {path} cannot be read: {e.strerror}") from None
    with f:
        check_members(f, path, what)
        f.seek(0)
        source: Any = f"/proc/self/fd/{f.fileno()}" if mmap else f  # mmap needs a path: the file opened here
        try:
            loaded = torch.load(source, map_location=device, weights_only=True, mmap=mmap)
        except pickle.UnpicklingError as e:  # weights_only's refusal of a global, a __reduce__, a class
            text = str(e)
            if "Unsupported operand" in text:  # not a pickle at all (bytes that are no opcode): damaged, not hostile
                raise UserError(f"{what} {path} is unreadable (not a torch checkpoint); delete it") from None
            named = re.search(r"GLOBAL ([\w.]{1,80})", text)
            raise CheckpointRefused(
                f"{what} {path} refused: it holds objects other than tensors and plain containers"
                f"{f' (it names {named.group(1)})' if named else ''} (loaded with weights_only=True, nothing in it "
                "was run); delete it"
            ) from None
        except Exception as e:  # torch raises many types for a damaged file
            raise UserError(f"{what} {path} is unreadable ({type(e).__name__}); delete it") from None
    # depth and shared references bounded before the spec in it is compared, copied or dumped (a 3 kB file
    # nesting a shared list nine deep is 10⁹ values; 100 000 levels a RecursionError)
    return safefs.check_shape(loaded, f"{what} {path}")


def check_members(f: Any, path: Path, what: str) -> None:
    """Refuse, before torch.load reads it, a checkpoint that could take more memory than its size: torch.save
    writes a zip whose members are stored, not compressed, so every member's uncompressed size equals its
    stored size and they add up to less than the file. A deflated member (a 1.5 MB file can inflate to
    1.5 GB of zeros), a size that lies, or a file in the legacy (non-zip) format, whose pickle states the
    sizes torch allocates, is refused in one line."""
    size = os.fstat(f.fileno()).st_size
    try:
        members = zipfile.ZipFile(f).infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        raise UserError(f"{what} {path} is unreadable (not a zip-format torch checkpoint); delete it") from None
    for m in members:
        if m.compress_type != zipfile.ZIP_STORED or m.file_size != m.compress_size:
            raise CheckpointRefused(
                f"{what} {path} refused: member {m.filename[:80]!r} is compressed ({m.compress_size} bytes that "
                f"inflate to {m.file_size}); torch.save stores its members; delete it"
            )
    if sum(m.file_size for m in members) > size:
        raise CheckpointRefused(f"{what} {path} refused: its members add up to more than its {size} bytes; delete it")


def load_checkpoint(path: Path, device: torch.device) -> dict[str, Any]:
    ckpt = safe_load(path, device, "checkpoint")
    if not isinstance(ckpt, dict) or not {"model", "optimizer", "estimator", "state"} <= ckpt.keys():
        raise UserError(f"checkpoint {path} is not an adascale-bench checkpoint; delete it to start over")
    if not isinstance(ckpt["state"], dict) or not isinstance(ckpt["model"], dict):
        raise UserError(f"checkpoint {path} is not an adascale-bench checkpoint; delete it to start over")
    return ckpt


def load_weights(path: Path, device: torch.device) -> dict[str, Any]:
    """A kept checkpoint (checkpoints/iter<N>.pt: the model's weights, iteration, τ, scale and the spec
    of the run that wrote it, whose identity `adascale-bench gain` compares with the run folder's)."""
    kept = safe_load(path, device, "kept checkpoint")
    if not isinstance(kept, dict) or not {"model", "iteration", "tau", "scale"} <= kept.keys():
        raise UserError(f"{path} is not a kept adascale-bench checkpoint (model, iteration, tau, scale)")
    if not isinstance(kept["model"], dict):
        raise UserError(f"{path} is not a kept adascale-bench checkpoint (its model is not a state dict)")
    return kept
