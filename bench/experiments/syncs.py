"""Host synchronisations per training iteration, counted on a CPU: what would stall a GPU's queue.

A GPU runs ahead of the Python that feeds it until the host needs a value from it. On a CPU nothing
stalls, but the same calls happen, so they can be counted here, before any GPU is paid for:

- with torch.profiler, the aten ops that copy a device scalar to the host: `aten::_local_scalar_dense`
  (what `.item()`, `float(t)`, `bool(t)` and data-dependent Python control flow call), and the ops whose
  output size depends on the data, which on a GPU wait for a count to reach the host before they can
  allocate: `aten::nonzero` (boolean-mask indexing `t[mask]` and `t[mask] = v` call it), `unique` in its
  forms, `masked_select` and `repeat_interleave` (the last without `output_size`; counted either way);
- with a TorchFunctionMode, the tensor methods that hand a whole tensor to the host without an aten op:
  `tolist`, `numpy` and `cpu` (on a GPU each is a device-to-host copy the host waits for; on this CPU a
  `.cpu()` is free, but the count is of the call, which on a GPU run is made on a device tensor).

A count here is an upper bound for a GPU run only in the sense that a tensor the task keeps on the host
on purpose (a CPU lengths tensor) would also be counted; the engine's design is one transfer per
iteration (bench.core.engine.accumulate), so the bar is ≤ 1 outside evaluation.

One such read is torch's own and is set apart: torch's recurrent modules (nn.RNN, nn.LSTM, nn.GRU) run
on a PackedSequence read its `batch_sizes` (`int(batch_sizes[0])` and the like, 2-4 per layer), a
tensor torch keeps on the host by contract whatever the device of the data. The `aten::_local_scalar_dense`
calls made inside such a module's forward are reported under HOST_RESIDENT and not added to the count;
every other op there, and everything outside, is counted as above.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from torch.overrides import TorchFunctionMode

from bench.core.engine.allocator import large_blocks_returned
from bench.core.runspec import RunSpec

PROFILED = (
    "aten::_local_scalar_dense",  # item(), float(t), bool(t) (via aten::is_nonzero) all end here
    "aten::nonzero",  # data-dependent output sizes: the host waits for the count
    "aten::_unique",
    "aten::_unique2",
    "aten::unique_dim",
    "aten::unique_consecutive",
    "aten::unique_dim_consecutive",
    "aten::masked_select",
    "aten::repeat_interleave",
)
METHODS = ("tolist", "numpy", "cpu")
# Reads of a PackedSequence's batch_sizes (a host tensor) inside torch's recurrent modules: reported, not counted.
HOST_RESIDENT = "host-resident: PackedSequence.batch_sizes read by nn.RNNBase"
_PACKED_RNN = "adascale-bench::packed-rnn-forward"


class _HostCalls(TorchFunctionMode):
    """Counts the tensor-to-host methods of METHODS called while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = getattr(func, "__name__", "")
        if name in METHODS:
            self.calls[name] += 1
        return func(*args, **(kwargs or {}))


@contextmanager
def _mark_packed_rnn_forwards() -> Iterator[None]:
    """While active, every forward of a torch recurrent module on a PackedSequence runs inside a profiler
    range named _PACKED_RNN (global module hooks, removed on exit)."""
    from torch import nn
    from torch.autograd.profiler import record_function
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
    from torch.nn.utils.rnn import PackedSequence

    open_ranges: list[Any] = []

    def before(module: nn.Module, args: tuple) -> None:
        if isinstance(module, nn.RNNBase) and args and isinstance(args[0], PackedSequence):
            rf = record_function(_PACKED_RNN)
            rf.__enter__()
            open_ranges.append((module, rf))

    def after(module: nn.Module, args: tuple, output: Any) -> None:
        if open_ranges and open_ranges[-1][0] is module:
            open_ranges.pop()[1].__exit__(None, None, None)

    handles = [register_module_forward_pre_hook(before), register_module_forward_hook(after)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()
        while open_ranges:  # a forward that raised
            open_ranges.pop()[1].__exit__(None, None, None)


def _inside_packed_rnn(event: Any) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name == _PACKED_RNN:
            return True
        parent = parent.cpu_parent
    return False


def count_host_syncs(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, dict[str, int]]:
    """(host syncs per call of fn, counts by op or method over all calls), over `repeat` calls. Reads
    of host-resident tensors torch makes inside packed recurrent modules appear as HOST_RESIDENT and are
    not part of the syncs per call (module docstring)."""
    from torch.profiler import ProfilerActivity, profile

    calls = _HostCalls()
    with large_blocks_returned(), profile(activities=[ProfilerActivity.CPU]) as prof, calls:
        with _mark_packed_rnn_forwards():
            for _ in range(repeat):
                fn()
    counts: Counter[str] = Counter()
    for e in prof.events():
        if e.name in PROFILED:
            host = e.name == "aten::_local_scalar_dense" and _inside_packed_rnn(e)
            counts[HOST_RESIDENT if host else e.name] += 1
    counts.update({f"Tensor.{k}": v for k, v in calls.calls.items()})
    syncs = sum(v for k, v in counts.items() if k != HOST_RESIDENT)
    return syncs / repeat, dict(counts)


def engine_syncs(task: Any, spec: RunSpec, work: Any, iterations: int = 2) -> tuple[float, dict[str, int]]:
    """Host syncs per training iteration of the real engine (Engine.step at the spec's S, W = 1) on a task,
    after one warm-up iteration; the micro-batches are loaded before counting (the data pipeline runs in
    loader workers on a real run, not in the training process)."""
    from pathlib import Path

    from bench.core.engine.distributed import Dist
    from bench.experiments.perfloops import EngineLoop

    scale = int(spec.scale)
    loop = EngineLoop(spec, task, Path(work) / "run", Path(spec.data_root or work), Dist())
    try:
        stream = loop.engine.batches(loop.state, scale)
        micro = [next(stream) for _ in range(scale)]
        loop.step(micro)
        return count_host_syncs(lambda: loop.step(micro), iterations)
    finally:
        loop.close()
