"""DeepSpeech2 (Amodei et al. 2016, "Deep Speech 2: End-to-End Speech Recognition in English and
Mandarin") for character-level CTC.

Layout, input (N, F, T) normalised log spectrogram:
- 2-D convolution front end over (frequency, time): the paper's "2-layer 2D" row of its Table 4,
  32 and 32 channels, filters 41x11 and 21x11 (freq x time), strides 2x2 and 2x1; each conv is
  followed by BatchNorm and the clipped ReLU min(max(x, 0), 20) (Hardtanh(0, 20)), as in the paper.
  Time is subsampled by 2 overall: one output every 20 ms with 10 ms spectrogram hops.
- a stack of bidirectional recurrent layers whose two directions are summed (the paper's eq. 3), with
  sequence-wise BatchNorm (the paper's §3.2) on the input of every layer but the first (the conv
  output is already normalised). BatchNorm runs on the packed frames only, so padding never enters
  its statistics. Paper preset: 5 bidirectional LSTM layers of 1024 units, the defaults of
  deepspeech.pytorch's LibriSpeech recipe (the public DS2 implementation usually used for LibriSpeech;
  the AdaScale paper does not give its sizes).
- sequence-wise BatchNorm then a bias-free linear layer to the 29 characters (blank, ', space, A-Z).

forward returns float32 log-probabilities (T', N, C) for torch's CTC loss and the output lengths T'_n
as a CPU tensor. Conv outputs beyond each utterance's length are zeroed after every layer, so in eval
mode an utterance's output does not depend on what it was batched with.

Host synchronisations (bench.experiments.syncs): the training step reads no device value. The lengths
exist twice: as a tensor that travels to the device with the batch (non-blocking, for the padding
masks) and as host ints from the collate (`host_lengths`). The output lengths are the closed form
`conv_out` of the host ints, so `pack_padded_sequence` and the CTC loss get lengths that never were on
the device, and the packed output is unpadded without `pad_packed_sequence`'s `unsorted_indices.cpu()`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from .text import NUM_CLASSES

RNNS = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}
# DS2's "2-layer 2D" front end (paper Table 4): channels, (freq, time) filters and strides.
CONV_CHANNELS = (32, 32)
CONV_KERNELS = ((41, 11), (21, 11))
CONV_STRIDES = ((2, 2), (2, 1))


def conv_out(length: torch.Tensor | int, kernel: int, stride: int) -> torch.Tensor | int:
    """Output size of a conv with 'same'-style padding kernel // 2 along one axis."""
    return (length + 2 * (kernel // 2) - kernel) // stride + 1


class ConvFrontEnd(nn.Module):
    """Conv2d-BN-Hardtanh(0, 20) layers over (freq, time), masking padded time steps after each."""

    def __init__(
        self,
        num_features: int,
        channels: Sequence[int],
        kernels: Sequence[Sequence[int]],
        strides: Sequence[Sequence[int]],
    ) -> None:
        super().__init__()
        if not (len(channels) == len(kernels) == len(strides)) or not channels:
            raise ValueError("conv_channels, conv_kernels and conv_strides must be non-empty and of equal length")
        self.kernels = [tuple(k) for k in kernels]
        self.strides = [tuple(s) for s in strides]
        self.convs = nn.ModuleList()
        self.norms = nn.ModuleList()
        in_ch, freq = 1, num_features
        for ch, (kf, kt), (sf, st) in zip(channels, self.kernels, self.strides, strict=True):
            # No conv bias: the BatchNorm that follows would cancel it.
            self.convs.append(nn.Conv2d(in_ch, ch, (kf, kt), stride=(sf, st), padding=(kf // 2, kt // 2), bias=False))
            self.norms.append(nn.BatchNorm2d(ch))
            in_ch, freq = ch, conv_out(freq, kf, sf)
        self.out_features = in_ch * freq
        self.act = nn.Hardtanh(0.0, 20.0)

    def output_lengths(self, lengths: torch.Tensor | int) -> torch.Tensor | int:
        for (_, kt), (_, st) in zip(self.kernels, self.strides, strict=True):
            lengths = conv_out(lengths, kt, st)
        return lengths

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = x.unsqueeze(1)  # (N, 1, F, T)
        for conv, norm, (_, kt), (_, st) in zip(self.convs, self.norms, self.kernels, self.strides, strict=True):
            x = conv(x)
            lengths = conv_out(lengths, kt, st)
            x = self.act(norm(x))
            valid = torch.arange(x.shape[-1], device=x.device) < lengths.to(x.device)[:, None]  # (N, T)
            x = x * valid[:, None, None, :].to(x.dtype)
        n, c, f, t = x.shape
        return x.reshape(n, c * f, t), lengths


def _map_packed(fn: nn.Module, seq: PackedSequence) -> PackedSequence:
    """Apply a frame-wise module to the real (unpadded) frames of a packed sequence."""
    return PackedSequence(fn(seq.data), seq.batch_sizes, seq.sorted_indices, seq.unsorted_indices)


class BiRNNLayer(nn.Module):
    """[sequence-wise BatchNorm] -> bidirectional RNN -> sum of the two directions."""

    def __init__(self, input_size: int, hidden: int, rnn: str, batch_norm: bool) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(input_size) if batch_norm else None
        self.rnn = RNNS[rnn](input_size, hidden, bidirectional=True)
        self.hidden = hidden

    def forward(self, seq: PackedSequence) -> PackedSequence:
        if self.norm is not None:
            seq = _map_packed(self.norm, seq)
        out, _ = self.rnn(seq)
        summed = out.data.view(-1, 2, self.hidden).sum(dim=1)
        return PackedSequence(summed, out.batch_sizes, out.sorted_indices, out.unsorted_indices)


class DeepSpeech2(nn.Module):
    """Conv front end, bidirectional RNN stack, BatchNorm + linear to characters."""

    def __init__(
        self,
        num_features: int,
        num_classes: int = NUM_CLASSES,
        conv_channels: Sequence[int] = CONV_CHANNELS,
        conv_kernels: Sequence[Sequence[int]] = CONV_KERNELS,
        conv_strides: Sequence[Sequence[int]] = CONV_STRIDES,
        rnn: str = "lstm",
        hidden: int = 1024,
        layers: int = 5,
    ) -> None:
        super().__init__()
        if rnn not in RNNS:
            raise ValueError(f"rnn must be one of {sorted(RNNS)}, got {rnn!r}")
        if layers < 1 or hidden < 1:
            raise ValueError("layers and hidden must be positive")
        self.conv = ConvFrontEnd(num_features, conv_channels, conv_kernels, conv_strides)
        sizes = [self.conv.out_features] + [hidden] * (layers - 1)
        self.rnns = nn.ModuleList(BiRNNLayer(size, hidden, rnn, batch_norm=i > 0) for i, size in enumerate(sizes))
        self.head = nn.Sequential(nn.BatchNorm1d(hidden), nn.Linear(hidden, num_classes, bias=False))

    def output_lengths(self, lengths: torch.Tensor | int) -> torch.Tensor | int:
        """Output frames for input frames (what CTC may align targets to)."""
        return self.conv.output_lengths(lengths)

    def forward(
        self, features: torch.Tensor, lengths: torch.Tensor, host_lengths: Sequence[int] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, F, T) features and their (N,) lengths on the features' device -> float32 log-probs
        (T', N, C) and the (N,) output lengths as a CPU tensor. `host_lengths`: the same lengths as host
        ints (the collate's `host_feature_lengths`); without them they are read from `lengths`, a host
        synchronisation on a GPU (fine in tests and evaluation, not in the training step)."""
        if host_lengths is None:
            host_lengths = lengths.tolist()
        x, _ = self.conv(features, lengths)
        out_lengths = torch.tensor([self.conv.output_lengths(int(n)) for n in host_lengths], dtype=torch.long)
        x = x.permute(2, 0, 1)  # (T', N, D)
        seq = pack_padded_sequence(x, out_lengths, enforce_sorted=False)
        for layer in self.rnns:
            seq = layer(seq)
        seq = _map_packed(self.head, seq)
        # pad_packed_sequence would also reorder its returned lengths with unsorted_indices.cpu(), a device
        # read: pad in sorted order, then restore the batch order on the device.
        logits, _ = pad_packed_sequence(PackedSequence(seq.data, seq.batch_sizes), total_length=x.shape[0])
        logits = logits.index_select(1, seq.unsorted_indices)
        # log_softmax in float32 even under autocast: CTC's forward-backward sums many small probabilities.
        return torch.log_softmax(logits.float(), dim=-1), out_lengths


def output_frames(num_frames: int, cfg_model: dict) -> int:
    """Output frames of the conv front end a preset's "model" mapping describes, without building it."""
    kernels = cfg_model.get("conv_kernels", CONV_KERNELS)
    strides = cfg_model.get("conv_strides", CONV_STRIDES)
    for (_, kt), (_, st) in zip(kernels, strides, strict=True):
        num_frames = int(conv_out(num_frames, kt, st))
    return num_frames


def build(num_features: int, cfg_model: dict) -> DeepSpeech2:
    """DeepSpeech2 from a preset's "model" mapping."""
    return DeepSpeech2(
        num_features,
        conv_channels=cfg_model.get("conv_channels", CONV_CHANNELS),
        conv_kernels=cfg_model.get("conv_kernels", CONV_KERNELS),
        conv_strides=cfg_model.get("conv_strides", CONV_STRIDES),
        rnn=cfg_model.get("rnn", "lstm"),
        hidden=int(cfg_model.get("hidden", 1024)),
        layers=int(cfg_model.get("layers", 5)),
    )
