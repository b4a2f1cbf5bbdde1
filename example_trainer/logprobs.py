"""Log-probabilities of chosen tokens without materialising the full-vocabulary logits.

A causal LM's last step is ``logits = hidden @ W.T`` (``W``: the output embedding, ``[V, H]``). The loss
only needs ``log softmax(logits / temperature)`` at a few ids per position (the sampled token, and the
teacher's top-k for distillation), yet the plain path keeps ``[T, V]`` logits plus fp32 copies of them
for backward: for V = 151,936 that is ~0.6 MB per token per copy.

``ChunkedLogprobs`` (an autograd function) computes, chunk by chunk of ``chunk_tokens`` positions
(default 512), ``z = hidden_c @ W.T`` in the compute dtype, ``lse = logsumexp(z / T)`` in fp32 and the
gathered ``z[id] / T - lse``; it saves only ``hidden``, ``W`` (the parameter itself), the ids and
``lse``. Its backward recomputes one chunk's logits at a time:
``dL/dz = (scatter(g, ids) - sum(g) * softmax(z / T)) / T``, then ``dhidden = dz @ W`` and
``dW += dz.T @ hidden`` (in place). Peak extra memory: one fp32 ``[chunk_tokens, V]`` buffer plus
``W``'s gradient, independent of the number of tokens.

``sampled_token_head(model, ids, ...)`` swaps the forward of the model's output embedding for this
computation *inside* the model's own forward: the model returns ``[B, T, K]`` log-probabilities in
``.logits``. Calling through the model's forward keeps DDP's and FSDP2's hooks (parameter all-gather,
gradient reduce-scatter) exactly as for a plain forward.

A model that changes its logits after the output embedding (a scale, a soft-cap) gets the same change
inside the chunked computation (a ``LogitTransform``); which models do, and how that is found out once
per model by a probe forward, is ``output_head.py``'s part: a model whose change cannot be reproduced
keeps the full-vocabulary path (``sampled_token_head`` then yields None).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Optional

import torch

from example_trainer.output_head import (  # the probing names, re-exported from their old path too
    LogitTransform,
    adopt_head_verdict,
    head_verdict,
    inspect_output_head,
    output_head,
    output_vocab_size,
)

# the attribute of a frozen output embedding holding its copy in the compute dtype:
# (version, storage pointer, dtype, copy)
_CAST_ATTR = "_atroposlib_compute_copy"


def _weight_in(weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``weight`` in ``dtype``. In one CPU process a frozen weight's copy (LoRA training: the tied
    embedding) is kept until the weight changes (an in-place write bumps its version, a new storage
    changes its pointer): casting SmolLM2's 49,152 x 576 head there took ~37 ms, twice a step
    (forward and backward), for a copy of half the fp32 head's memory. Elsewhere it is cast every
    time: a GPU casts in well under a millisecond, and under torch.distributed FSDP gathers the
    weight into storage it frees and refills (keeping its version), whose copy must not be kept."""
    if weight.dtype == dtype:
        return weight
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    if weight.requires_grad or weight.device.type != "cpu" or distributed:
        return weight.to(dtype)
    key = (weight._version, weight.data_ptr(), dtype)
    hit = getattr(weight, _CAST_ATTR, None)
    if hit is not None and hit[:3] == key:
        return hit[3]
    cast = weight.detach().to(dtype)
    setattr(weight, _CAST_ATTR, (*key, cast))  # lives and dies with the weight
    return cast


_ENTROPY_ROWS = 32  # rows per block of the entropy's e^z' (32 x 49,152 fp32: 6 MB)


def _compute_dtype(weight: torch.Tensor, hidden: torch.Tensor) -> torch.dtype:
    """The matmul dtype: autocast's when autocast is on for this device, else the weight's."""
    dev = hidden.device.type
    if torch.is_autocast_enabled(dev):
        return torch.get_autocast_dtype(dev)
    return weight.dtype


class ChunkedLogprobs(torch.autograd.Function):
    """``log softmax((hidden @ W.T + b) / T)`` gathered at ``ids``; see the module docstring."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        hidden: torch.Tensor,  # [N, H]
        weight: torch.Tensor,  # [V, H]
        bias: Optional[torch.Tensor],  # [V] or None
        ids: torch.Tensor,  # [N, K] long, >= 0
        inv_temp: torch.Tensor,  # [N] float32
        chunk_tokens: int,
        cap: Optional[float] = None,  # soft-cap: logits are cap * tanh(scale * z / cap)
        scale: float = 1.0,  # with a cap (without one the scale is folded into inv_temp)
        entropy_out: Optional[torch.Tensor] = None,  # [N] float32, filled (no gradient) when given
    ) -> torch.Tensor:
        cdt = _compute_dtype(weight, hidden)
        w = _weight_in(weight, cdt)
        b = None if bias is None else bias.to(cdt)
        n = hidden.shape[0]
        out = torch.empty(ids.shape, dtype=torch.float32, device=hidden.device)
        lse = torch.empty(n, dtype=torch.float32, device=hidden.device)
        with torch.autocast(hidden.device.type, enabled=False):
            for s in range(0, n, chunk_tokens):
                e = min(s + chunk_tokens, n)
                z = torch.nn.functional.linear(hidden[s:e].to(cdt), w, b).float()
                if cap is not None:
                    z.mul_(scale / cap).tanh_().mul_(cap)
                z.mul_(inv_temp[s:e, None])
                picked = z.gather(-1, ids[s:e])
                top = z.amax(dim=-1, keepdim=True)
                if entropy_out is None:
                    # logsumexp in z's own buffer (one [chunk, V] fp32 tensor alive at a time)
                    lse[s:e] = z.sub_(top).exp_().sum(-1).log_().add_(top[:, 0])
                else:
                    # H = lse - E_p[z] = log(sum e^z') - sum(e^z' z') / sum(e^z'), z' = z - max; in
                    # blocks of rows, whose e^z' buffer the allocator reuses (one [chunk, V] buffer
                    # more, allocated per chunk, took 3x the time of the logsumexp itself)
                    shifted = z.sub_(top)
                    total = torch.empty(e - s, dtype=torch.float32, device=z.device)
                    weighted = torch.empty_like(total)
                    for r in range(0, e - s, _ENTROPY_ROWS):
                        block = shifted[r : r + _ENTROPY_ROWS]
                        ez = block.exp()
                        total[r : r + _ENTROPY_ROWS] = ez.sum(-1)
                        weighted[r : r + _ENTROPY_ROWS] = ez.mul_(block).sum(-1)
                        del ez
                    mean_z = weighted.div_(total)
                    log_total = total.log_()
                    entropy_out[s:e] = log_total - mean_z
                    lse[s:e] = log_total + top[:, 0]
                out[s:e] = picked - lse[s:e, None]
                del z
        ctx.save_for_backward(hidden, weight, bias, ids, inv_temp, lse)
        ctx.chunk_tokens = chunk_tokens
        ctx.cdt = cdt
        ctx.cap, ctx.scale = cap, scale
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Optional[torch.Tensor], ...]:  # type: ignore[override]
        hidden, weight, bias, ids, inv_temp, lse = ctx.saved_tensors
        cdt, chunk = ctx.cdt, ctx.chunk_tokens
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        w = _weight_in(weight, cdt)
        b = None if bias is None else bias.to(cdt)
        grad_h = torch.empty_like(hidden) if need_h else None
        grad_w = (
            torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if need_w else None
        )
        grad_b = (
            torch.zeros(bias.shape, dtype=torch.float32, device=bias.device)
            if (need_b and bias is not None)
            else None
        )
        g_all = grad_out.float()
        with torch.autocast(hidden.device.type, enabled=False):
            for s in range(0, hidden.shape[0], chunk):
                e = min(s + chunk, hidden.shape[0])
                h = hidden[s:e].to(cdt)
                g = g_all[s:e]
                z = torch.nn.functional.linear(h, w, b).float()
                dcap = None
                if (
                    ctx.cap is not None
                ):  # y = cap * t, t = tanh(scale * z / cap): dy/dz = scale (1 - t^2)
                    t = z.mul_(ctx.scale / ctx.cap).tanh_()
                    dcap = torch.square(t).neg_().add_(1.0).mul_(ctx.scale)
                    z = t.mul_(ctx.cap)
                z.mul_(inv_temp[s:e, None])
                # dz = (scatter(g) - sum(g) * softmax) / T, built in place in z's buffer
                p = z.sub_(lse[s:e, None]).exp_()
                dz = p.mul_(-g.sum(-1, keepdim=True))
                dz.scatter_add_(-1, ids[s:e], g)
                dz.mul_(inv_temp[s:e, None])
                if dcap is not None:
                    dz.mul_(dcap)
                    del dcap
                dzc = dz.to(cdt)
                if grad_h is not None:
                    grad_h[s:e] = (dzc @ w).to(hidden.dtype)
                if grad_w is not None:
                    if dzc.dtype == torch.float32:
                        grad_w.addmm_(dzc.t(), h)  # accumulated in place, no [V, H] temporary
                    else:
                        grad_w += dzc.t() @ h
                if grad_b is not None:
                    grad_b += dz.sum(0)
                del z, p, dz, dzc
        gw = None if grad_w is None else grad_w.to(weight.dtype)
        gb = None if grad_b is None else grad_b.to(bias.dtype)
        return grad_h, gw, gb, None, None, None, None, None, None


def chunked_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    ids: torch.Tensor,
    *,
    bias: Optional[torch.Tensor] = None,
    inv_temperature: Optional[torch.Tensor] = None,
    chunk_tokens: int = 512,
    transform: Optional[LogitTransform] = None,
    entropy_out: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """``hidden [..., H]``, ``ids [..., K]`` (negative ids read as 0), optional ``inv_temperature [...]``
    (1 / temperature per position) and the model's ``transform`` of its logits (applied before the
    temperature); returns fp32 ``[..., K]`` log-probabilities. ``entropy_out`` (fp32, ``[...]``), when
    given, receives the entropy of each position's distribution (the same transformed, tempered logits),
    without a gradient."""
    lead = hidden.shape[:-1]
    h = hidden.reshape(-1, hidden.shape[-1])
    i = ids.clamp_min(0).reshape(h.shape[0], -1)
    if inv_temperature is None:
        t = torch.ones(h.shape[0], dtype=torch.float32, device=h.device)
    else:
        t = inv_temperature.to(device=h.device, dtype=torch.float32).reshape(-1)
    cap, scale = None, 1.0
    if transform is not None and transform.cap is not None:
        cap, scale = float(transform.cap), float(transform.scale)
    elif transform is not None and transform.scale != 1.0:
        t = t * transform.scale  # (scale * z) / T
    flat_entropy = None
    if entropy_out is not None:
        flat_entropy = torch.empty(h.shape[0], dtype=torch.float32, device=h.device)
    out = ChunkedLogprobs.apply(
        h, weight, bias, i, t, max(1, int(chunk_tokens)), cap, scale, flat_entropy
    )
    if entropy_out is not None and flat_entropy is not None:
        entropy_out.copy_(flat_entropy.reshape(entropy_out.shape))
    return out.reshape(*lead, i.shape[-1])


def full_vocab_logprobs(
    logits: torch.Tensor, ids: torch.Tensor, inv_temperature: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """The plain path: fp32 ``log_softmax(logits / T)`` over the whole vocabulary, gathered at ``ids``."""
    z = logits.float()
    if inv_temperature is not None:
        z = z * inv_temperature.to(z.device, torch.float32).unsqueeze(-1)
    return torch.log_softmax(z, dim=-1).gather(-1, ids.clamp_min(0))


def full_vocab_entropy(
    logits: torch.Tensor, inv_temperature: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """fp32 entropy of ``softmax(logits / T)`` at every position (no gradient): the plain path's
    counterpart of the chunked head's ``entropy_out``."""
    with torch.no_grad():
        z = logits.detach().float()
        if inv_temperature is not None:
            z = z * inv_temperature.to(z.device, torch.float32).unsqueeze(-1)
        logp = torch.log_softmax(z, dim=-1)
        return -(logp.exp() * logp).sum(-1)


class _TiedTo(torch.autograd.Function):
    """Returns ``value``; its backward also hands ``anchor`` a zero gradient, so hooks waiting for a
    gradient at the model's output (FSDP2's root pre-backward) run as for a plain forward."""

    @staticmethod
    def forward(ctx: Any, value: torch.Tensor, anchor: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.anchor = (anchor.shape, anchor.dtype, anchor.device)
        return value.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        shape, dtype, device = ctx.anchor
        return grad, torch.zeros(shape, dtype=dtype, device=device)


class ChunkedHead:
    """What ``sampled_token_head`` yields: after the model's forward, ``result(output.logits)`` is the
    ``[B, T, K]`` log-probabilities the head computed (the model's own post-processing of them, if any,
    is not applied: the head already computed the post-processed distribution)."""

    def __init__(self, transform: LogitTransform) -> None:
        self.transform = transform
        self.logprobs: Optional[torch.Tensor] = None
        self.entropy: Optional[torch.Tensor] = (
            None  # [B, T] with ``entropy=True`` (0 off ``positions``)
        )

    def result(self, model_logits: torch.Tensor) -> torch.Tensor:
        lp = self.logprobs
        if lp is None:
            raise RuntimeError("the model's forward never called its output embedding")
        if model_logits is lp or not model_logits.requires_grad:
            return lp
        return _TiedTo.apply(lp, model_logits)


@contextlib.contextmanager
def sampled_token_head(
    model: torch.nn.Module,
    ids: torch.Tensor,
    inv_temperature: Optional[torch.Tensor],
    chunk_tokens: int,
    positions: Optional[torch.Tensor] = None,
    entropy: bool = False,
) -> Iterator[Optional[ChunkedHead]]:
    """While active, the model's output embedding computes ``[B, T, K]`` log-probabilities of
    ``ids [B, T, K]`` (with the model's logit transform); yields a ``ChunkedHead`` to read them from
    after the forward, or None (nothing changed) when the model's head does not allow it.

    ``positions`` (``[B, T]`` bool): compute the head only there (the trained tokens) and leave 0 at
    every other position, whose log-probability no loss term reads; the head's matmuls (forward, the
    recomputation and the backward) then scale with the trained tokens, not with prompts and padding.
    ``entropy``: the head also fills ``ChunkedHead.entropy`` (``[B, T]``, no gradient) with the entropy of
    the distribution at each of those positions."""
    found = output_head(model)
    if found is None:
        yield None
        return
    head, transform = found
    captured = ChunkedHead(transform)

    def forward(hidden: torch.Tensor) -> torch.Tensor:
        where = ids.shape[:-1]
        if entropy:
            captured.entropy = torch.zeros(where, dtype=torch.float32, device=hidden.device)
        if positions is None:
            captured.logprobs = chunked_logprobs(
                hidden,
                head.weight,
                ids,
                bias=head.bias,
                inv_temperature=inv_temperature,
                chunk_tokens=chunk_tokens,
                transform=transform,
                entropy_out=captured.entropy,
            )
            return captured.logprobs
        picked_entropy = None
        if captured.entropy is not None:
            picked_entropy = torch.empty(
                int(positions.sum()), dtype=torch.float32, device=hidden.device
            )
        picked = chunked_logprobs(
            hidden[positions],
            head.weight,
            ids[positions],
            bias=head.bias,
            inv_temperature=None if inv_temperature is None else inv_temperature[positions],
            chunk_tokens=chunk_tokens,
            transform=transform,
            entropy_out=picked_entropy,
        )
        if captured.entropy is not None and picked_entropy is not None:
            captured.entropy[positions] = picked_entropy
        full = torch.zeros(ids.shape, dtype=picked.dtype, device=picked.device)
        captured.logprobs = full.index_put((positions,), picked)
        return captured.logprobs

    head.forward = (
        forward  # an instance attribute: the module, its hooks and state dict are untouched
    )
    try:
        yield captured
    finally:
        del head.forward


__all__ = [
    "ChunkedHead",
    "ChunkedLogprobs",
    "LogitTransform",
    "adopt_head_verdict",
    "chunked_logprobs",
    "full_vocab_entropy",
    "full_vocab_logprobs",
    "head_verdict",
    "inspect_output_head",
    "output_head",
    "output_vocab_size",
    "sampled_token_head",
]
