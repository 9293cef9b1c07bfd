"""Transformer (Vaswani et al. 2017) for translation, on torch.nn's encoder/decoder layers, and its decoders.

Post-norm layers as in the paper (pre-norm selectable), sinusoidal positions, embeddings scaled by
sqrt(d) and dropout on embedding + position. The decoder's input embedding is tied to its output
projection; with a joint dictionary the encoder shares the same matrix (paper §3.4, fairseq
--share-all-embeddings).

Decoding (greedy and beam search) is incremental: each step runs the decoder on the newest position only,
with every decoder layer's self-attention keys/values cached (one position appended a step, reordered with
the beams) and its cross-attention keys/values of the encoder memory projected once per sentence. The
cached step uses the nn.TransformerDecoderLayer's own modules (attention projections, norms, dropouts,
feed-forward) in the order of its forward; `cache=False` keeps the full re-decoding as the tests' reference.
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

    def _embed(self, emb: nn.Embedding, tokens: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Scaled embeddings plus the positions start, start + 1, ... (start > 0: an incremental decoding step)."""
        end = start + tokens.size(1)
        pos = self.positions if end <= self.positions.size(0) else sinusoids(end, self.d_model).to(tokens.device)
        return self.dropout(emb(tokens) * math.sqrt(self.d_model) + pos[start:end])

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

    def start_decoding(self, memory: torch.Tensor, memory_mask: torch.Tensor, group: int = 1) -> DecoderCache:
        """An empty incremental-decoding cache for `memory` (one row per source sentence, as `encode` returns
        it), for a decoder batch of `group` consecutive rows per sentence (the beam size; 1 for greedy).
        The encoder memory's cross-attention keys and values are projected here, once per sentence."""
        cross_k, cross_v = [], []
        for layer in self.decoder.layers:
            mha = layer.multihead_attn
            _check_mha(mha)
            d = mha.embed_dim
            w, b = mha.in_proj_weight, mha.in_proj_bias
            cross_k.append(_heads(F.linear(memory, w[d : 2 * d], None if b is None else b[d : 2 * d]), mha.num_heads))
            cross_v.append(_heads(F.linear(memory, w[2 * d :], None if b is None else b[2 * d :]), mha.num_heads))
        _check_mha(self.decoder.layers[0].self_attn)
        return DecoderCache(cross_k, cross_v, ~memory_mask[:, None, None, :], group)

    def decode_step(self, tokens: torch.Tensor, cache: DecoderCache) -> torch.Tensor:
        """Logits (rows, 1, vocab) for the position after `tokens` (rows, 1), the newest token of every row's
        prefix, which sits at position `cache.length`; appends its self-attention keys and values to `cache`.
        Same computation as `decode` on the whole prefix, one position at a time, with each decoder layer's
        own parameters, norms and dropouts in its forward's order (post- or pre-norm as configured)."""
        if tokens.size(1) != 1:
            raise ValueError(f"decode_step takes one token per row, got {tokens.size(1)}")
        x = self._embed(self.tgt_embed, tokens, start=cache.length)
        pad = tokens.eq(self.pad)
        cache.self_pad = pad if cache.self_pad is None else torch.cat([cache.self_pad, pad], dim=1)
        attend = ~cache.self_pad[:, None, None, :]  # True where a key is attended, as SDPA takes a bool mask
        for i, layer in enumerate(self.decoder.layers):
            x = _layer_step(layer, x, cache, i, attend)
        if self.decoder.norm is not None:
            x = self.decoder.norm(x)
        cache.length += 1
        return F.linear(x, self.tgt_embed.weight)


class DecoderCache:
    """What incremental decoding keeps between steps, per decoder layer.

    Self-attention: the projected keys and values of every target position decoded so far,
    (rows, heads, length, head_dim), one position longer after every step; `reorder` follows beam search
    when it picks which rows survive. Cross-attention: the encoder memory's keys and values,
    (sentences, heads, source length, head_dim), projected once. Decoder row r reads sentence r // group;
    rows never move to another sentence's block (beam search reorders beams within a sentence), so the
    cross-attention state is never reordered.
    """

    def __init__(
        self, cross_k: list[torch.Tensor], cross_v: list[torch.Tensor], cross_attend: torch.Tensor, group: int
    ):
        self.cross_k, self.cross_v, self.cross_attend, self.group = cross_k, cross_v, cross_attend, group
        self.self_k: list[torch.Tensor | None] = [None] * len(cross_k)
        self.self_v: list[torch.Tensor | None] = [None] * len(cross_k)
        self.self_pad: torch.Tensor | None = None  # (rows, length), True at <pad> (finished greedy rows)
        self.length = 0

    def reorder(self, rows: torch.Tensor) -> None:
        """Row i continues the prefix of old row rows[i] (which must belong to the same sentence)."""
        self.self_k = [k.index_select(0, rows) for k in self.self_k]
        self.self_v = [v.index_select(0, rows) for v in self.self_v]
        self.self_pad = self.self_pad.index_select(0, rows)


def _check_mha(mha: nn.MultiheadAttention) -> None:
    if not (mha.batch_first and mha._qkv_same_embed_dim and mha.bias_k is None and not mha.add_zero_attn):
        raise ValueError("incremental decoding supports batch_first attention with packed q/k/v projections only")


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(batch, length, d) -> (batch, heads, length, d / heads)."""
    return x.unflatten(-1, (heads, -1)).transpose(1, 2)


def _attention(
    mha: nn.MultiheadAttention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attend: torch.Tensor
) -> torch.Tensor:
    """Scaled dot-product attention of head-split q, k, v under `mha`'s attention dropout, then its output
    projection: the part of nn.MultiheadAttention's forward after the input projections. (Calling the module or
    F.multi_head_attention_forward with static_k/static_v instead would still project its key argument on
    every call, so the projections are done here, once, from the module's own in_proj weight and bias.)"""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attend, dropout_p=mha.dropout if mha.training else 0.0)
    return mha.out_proj(out.transpose(1, 2).flatten(2))


def _layer_step(
    layer: nn.TransformerDecoderLayer, x: torch.Tensor, cache: DecoderCache, i: int, attend: torch.Tensor
) -> torch.Tensor:
    """nn.TransformerDecoderLayer.forward for the newest position only, with cached keys and values."""

    def self_block(h: torch.Tensor) -> torch.Tensor:
        mha = layer.self_attn
        q, k, v = (_heads(t, mha.num_heads) for t in F.linear(h, mha.in_proj_weight, mha.in_proj_bias).chunk(3, -1))
        if cache.self_k[i] is not None:
            k, v = torch.cat([cache.self_k[i], k], dim=2), torch.cat([cache.self_v[i], v], dim=2)
        cache.self_k[i], cache.self_v[i] = k, v
        return layer.dropout1(_attention(mha, q, k, v, attend))

    def cross_block(h: torch.Tensor) -> torch.Tensor:
        mha, d, g = layer.multihead_attn, layer.multihead_attn.embed_dim, cache.group
        b = mha.in_proj_bias
        q = F.linear(h, mha.in_proj_weight[:d], None if b is None else b[:d])  # (rows, 1, d)
        # the group's rows share one sentence: stack them as g queries of that sentence's memory
        q = _heads(q.reshape(-1, g, d), mha.num_heads)  # (sentences, heads, g, head_dim)
        out = _attention(mha, q, cache.cross_k[i], cache.cross_v[i], cache.cross_attend)  # (sentences, g, d)
        return layer.dropout2(out.reshape(-1, 1, d))

    # the layer's forward, block for block (_ff_block: its feed-forward, linear2(dropout(act(linear1))) + dropout3)
    if layer.norm_first:
        x = x + self_block(layer.norm1(x))
        x = x + cross_block(layer.norm2(x))
        return x + layer._ff_block(layer.norm3(x))
    x = layer.norm1(x + self_block(x))
    x = layer.norm2(x + cross_block(x))
    return layer.norm3(x + layer._ff_block(x))


class _NextLogits:
    """Next-token logits for every decoder row from its prefix so far: the one place where incremental and full
    decoding differ. cache=False re-runs the decoder over the whole prefix each step (the reference)."""

    def __init__(self, model: TransformerNMT, memory: torch.Tensor, memory_mask: torch.Tensor, group: int, cache: bool):
        self.model = model
        self.cache = model.start_decoding(memory, memory_mask, group) if cache else None
        if not cache:
            self.memory = memory.repeat_interleave(group, dim=0)
            self.memory_mask = memory_mask.repeat_interleave(group, dim=0)

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        if self.cache is None:
            return self.model.decode(tokens, self.memory, self.memory_mask)[:, -1]
        if tokens.size(1) != self.cache.length + 1:
            raise ValueError(f"cache holds {self.cache.length} positions; prefix has {tokens.size(1)}")
        return self.model.decode_step(tokens[:, -1:], self.cache)[:, -1]

    def reorder(self, rows: torch.Tensor) -> None:
        if self.cache is not None:
            self.cache.reorder(rows)


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
    cache: bool = True,
) -> list[list[int]]:
    """Argmax decoding; each hypothesis ends at its first </s> (not included). cache=False: re-run the decoder
    over the whole prefix every step instead of incrementally (the reference the tests compare with)."""
    pad = model.pad
    memory, mask = model.encode(src_tokens)
    next_logits = _NextLogits(model, memory, mask, 1, cache)
    limits = _max_lengths(src_tokens, pad, max_len_a, max_len_b)
    n = src_tokens.size(0)
    tokens = torch.full((n, 1), eos, dtype=torch.long, device=src_tokens.device)
    done = torch.zeros(n, dtype=torch.bool, device=src_tokens.device)
    for step in range(int(limits.max())):
        lprobs = next_logits(tokens).float()
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
    cache: bool = True,
) -> list[list[int]]:
    """Beam search as in fairseq's sequence generator: 2*beam candidates a step; a candidate ending in </s>
    among the top `beam` finishes a hypothesis, scored log p / lp(|Y|); a sentence is done with `beam`
    finished hypotheses. Decoding is incremental (cached keys and values, reordered with the beams);
    cache=False re-runs the decoder over the whole prefix every step (the reference the tests compare with)."""
    pad = model.pad
    n, dev = src_tokens.size(0), src_tokens.device
    memory, mask = model.encode(src_tokens)
    next_logits = _NextLogits(model, memory, mask, beam, cache)
    limits = _max_lengths(src_tokens, pad, max_len_a, max_len_b).tolist()
    tokens = torch.full((n * beam, 1), eos, dtype=torch.long, device=dev)
    scores = torch.full((n, beam), -math.inf, device=dev)
    scores[:, 0] = 0.0  # all beams start identical: expand only the first
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(n)]
    done = [False] * n
    for step in range(max(limits)):
        lprobs = F.log_softmax(next_logits(tokens).float(), dim=-1)
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
        next_logits.reorder(src_rows)
        scores = keep_scores
    out = []
    for i in range(n):
        if finished[i]:
            out.append(max(finished[i], key=lambda x: x[0])[1])
        else:  # budget exhausted without </s> (cannot happen: </s> is forced at the limit)
            out.append(tokens[i * beam, 1:].tolist())
    return out
