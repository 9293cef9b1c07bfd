"""Transformer (Vaswani et al. 2017) for translation, on torch.nn's encoder/decoder layers, and its decoders.

Post-norm layers as in the paper (pre-norm selectable), sinusoidal positions, embeddings scaled by
sqrt(d) and dropout on embedding + position. The decoder's input embedding is tied to its output
projection; with a joint dictionary the encoder shares the same matrix (paper §3.4, fairseq
--share-all-embeddings).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def sinusoids(length: int, dim: int) -> torch.Tensor:
    """tensor2tensor/fairseq layout: sin in the first half of the channels, cos in the second."""
    half = dim // 2
    freq = torch.exp(torch.arange(half, dtype=torch.float32) * -(math.log(10000.0) / max(half - 1, 1)))
    ang = torch.arange(length, dtype=torch.float32)[:, None] * freq[None, :]
    table = torch.cat([torch.sin(ang), torch.cos(ang)], dim=1)
    return F.pad(table, (0, dim - 2 * half))


class TransformerNMT(nn.Module):
    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        pad: int,
        joint: bool,
        encoder_layers: int = 6,
        decoder_layers: int = 6,
        d_model: int = 512,
        ffn_dim: int = 2048,
        heads: int = 8,
        dropout: float = 0.1,
        max_positions: int = 1024,
        norm_first: bool = False,
    ) -> None:
        super().__init__()
        if joint and src_vocab != tgt_vocab:
            raise ValueError("a joint dictionary needs equal source and target vocabulary sizes")
        self.pad, self.d_model = pad, d_model
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model, padding_idx=pad)
        self.src_embed = self.tgt_embed if joint else nn.Embedding(src_vocab, d_model, padding_idx=pad)
        for emb in {id(self.src_embed): self.src_embed, id(self.tgt_embed): self.tgt_embed}.values():
            nn.init.normal_(emb.weight, 0.0, d_model**-0.5)
            with torch.no_grad():
                emb.weight[pad].zero_()
        self.register_buffer("positions", sinusoids(max_positions + 1, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        enc = nn.TransformerEncoderLayer(d_model, heads, ffn_dim, dropout, batch_first=True, norm_first=norm_first)
        dec = nn.TransformerDecoderLayer(d_model, heads, ffn_dim, dropout, batch_first=True, norm_first=norm_first)
        # pre-norm stacks end in a LayerNorm (fairseq's --encoder/decoder-normalize-before); post-norm don't
        final = (lambda: nn.LayerNorm(d_model)) if norm_first else (lambda: None)
        self.encoder = nn.TransformerEncoder(enc, encoder_layers, norm=final(), enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(dec, decoder_layers, norm=final())
        for p in list(self.encoder.parameters()) + list(self.decoder.parameters()):
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def _embed(self, emb: nn.Embedding, tokens: torch.Tensor) -> torch.Tensor:
        t = tokens.size(1)
        pos = self.positions if t <= self.positions.size(0) else sinusoids(t, self.d_model).to(tokens.device)
        return self.dropout(emb(tokens) * math.sqrt(self.d_model) + pos[:t])

    def encode(self, src_tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Encoder states and the source padding mask (True at <pad>)."""
        mask = src_tokens.eq(self.pad)
        return self.encoder(self._embed(self.src_embed, src_tokens), src_key_padding_mask=mask), mask

    def decode(self, prev_output_tokens: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor) -> torch.Tensor:
        """Logits over the target vocabulary for every decoder position (causal self-attention)."""
        t = prev_output_tokens.size(1)
        causal = torch.ones(t, t, dtype=torch.bool, device=prev_output_tokens.device).triu(1)
        h = self.decoder(
            self._embed(self.tgt_embed, prev_output_tokens),
            memory,
            tgt_mask=causal,
            tgt_is_causal=True,
            tgt_key_padding_mask=prev_output_tokens.eq(self.pad),
            memory_key_padding_mask=memory_mask,
        )
        return F.linear(h, self.tgt_embed.weight)

    def forward(self, src_tokens: torch.Tensor, prev_output_tokens: torch.Tensor) -> torch.Tensor:
        memory, mask = self.encode(src_tokens)
        return self.decode(prev_output_tokens, memory, mask)


def _max_lengths(src_tokens: torch.Tensor, pad: int, a: float, b: int) -> torch.Tensor:
    """Output budget per sentence, a * source length + b tokens (the paper: input length + 50)."""
    return (src_tokens.ne(pad).sum(1).float() * a + b).long().clamp(min=1)


@torch.no_grad()
def greedy_decode(
    model: TransformerNMT,
    src_tokens: torch.Tensor,
    eos: int,
    bos: int,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
) -> list[list[int]]:
    """Argmax decoding; each hypothesis ends at its first </s> (not included)."""
    pad = model.pad
    memory, mask = model.encode(src_tokens)
    limits = _max_lengths(src_tokens, pad, max_len_a, max_len_b)
    n = src_tokens.size(0)
    tokens = torch.full((n, 1), eos, dtype=torch.long, device=src_tokens.device)
    done = torch.zeros(n, dtype=torch.bool, device=src_tokens.device)
    for step in range(int(limits.max())):
        lprobs = model.decode(tokens, memory, mask)[:, -1].float()
        lprobs[:, [pad, bos]] = -math.inf
        nxt = lprobs.argmax(-1)
        nxt = torch.where(step + 1 >= limits, torch.full_like(nxt, eos), nxt)
        nxt = torch.where(done, torch.full_like(nxt, pad), nxt)
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
        done |= nxt.eq(eos)
        if bool(done.all()):
            break
    out = []
    for row in tokens[:, 1:].tolist():
        out.append(row[: row.index(eos)] if eos in row else row)
    return out


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """((5 + |Y|) / 6) ** alpha, the length penalty of Wu et al. (2016) that Vaswani et al. use with 0.6."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(
    model: TransformerNMT,
    src_tokens: torch.Tensor,
    eos: int,
    bos: int,
    beam: int = 4,
    lenpen: float = 0.6,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
) -> list[list[int]]:
    """Beam search as in fairseq's sequence generator: 2*beam candidates a step; a candidate ending in </s>
    among the top `beam` finishes a hypothesis, scored log p / lp(|Y|); a sentence is done with `beam`
    finished hypotheses. The decoder is re-run on the whole prefix each step (no incremental cache)."""
    pad = model.pad
    n, dev = src_tokens.size(0), src_tokens.device
    memory, mask = model.encode(src_tokens)
    memory = memory.repeat_interleave(beam, dim=0)
    mask = mask.repeat_interleave(beam, dim=0)
    limits = _max_lengths(src_tokens, pad, max_len_a, max_len_b).tolist()
    tokens = torch.full((n * beam, 1), eos, dtype=torch.long, device=dev)
    scores = torch.full((n, beam), -math.inf, device=dev)
    scores[:, 0] = 0.0  # all beams start identical: expand only the first
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(n)]
    done = [False] * n
    for step in range(max(limits)):
        lprobs = F.log_softmax(model.decode(tokens, memory, mask)[:, -1].float(), dim=-1)
        lprobs[:, [pad, bos]] = -math.inf
        vocab = lprobs.size(-1)
        force = torch.tensor([step + 1 >= lim for lim in limits], device=dev).repeat_interleave(beam)
        if bool(force.any()):
            only_eos = torch.full_like(lprobs, -math.inf)
            only_eos[:, eos] = 0.0
            lprobs = torch.where(force[:, None], only_eos + lprobs[:, eos : eos + 1], lprobs)
        cand = (scores.view(-1, 1) + lprobs).view(n, beam * vocab)
        top_scores, top_idx = cand.topk(2 * beam, dim=1)
        top_beam, top_tok = top_idx // vocab, top_idx % vocab
        is_eos = top_tok.eq(eos) & torch.isfinite(top_scores)
        eos_rows = (is_eos[:, :beam]).nonzero().tolist()
        for i, j in eos_rows:
            if done[i]:
                continue
            b = int(top_beam[i, j])
            hyp = tokens[i * beam + b, 1:].tolist()
            finished[i].append((float(top_scores[i, j]) / gnmt_length_penalty(len(hyp) + 1, lenpen), hyp))
            if len(finished[i]) >= beam:
                done[i] = True
        if all(done):
            break
        # continue with the best `beam` candidates that do not end in </s>
        live = top_scores.masked_fill(is_eos, -math.inf)
        keep_scores, keep = live.topk(beam, dim=1)
        src_rows = (torch.arange(n, device=dev)[:, None] * beam + top_beam.gather(1, keep)).view(-1)
        tokens = torch.cat([tokens[src_rows], top_tok.gather(1, keep).view(-1, 1)], dim=1)
        scores = keep_scores
    out = []
    for i in range(n):
        if finished[i]:
            out.append(max(finished[i], key=lambda x: x[0])[1])
        else:  # budget exhausted without </s> (cannot happen: </s> is forced at the limit)
            out.append(tokens[i * beam, 1:].tolist())
    return out
