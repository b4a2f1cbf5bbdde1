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
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Optional

import torch


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
    ) -> torch.Tensor:
        cdt = _compute_dtype(weight, hidden)
        w = weight.to(cdt)
        b = None if bias is None else bias.to(cdt)
        n = hidden.shape[0]
        out = torch.empty(ids.shape, dtype=torch.float32, device=hidden.device)
        lse = torch.empty(n, dtype=torch.float32, device=hidden.device)
        with torch.autocast(hidden.device.type, enabled=False):
            for s in range(0, n, chunk_tokens):
                e = min(s + chunk_tokens, n)
                z = torch.nn.functional.linear(hidden[s:e].to(cdt), w, b).float()
                z.mul_(inv_temp[s:e, None])
                picked = z.gather(-1, ids[s:e])
                # logsumexp in z's own buffer (one [chunk, V] fp32 tensor alive at a time)
                top = z.amax(dim=-1, keepdim=True)
                lse[s:e] = z.sub_(top).exp_().sum(-1).log_().add_(top[:, 0])
                out[s:e] = picked - lse[s:e, None]
                del z
        ctx.save_for_backward(hidden, weight, bias, ids, inv_temp, lse)
        ctx.chunk_tokens = chunk_tokens
        ctx.cdt = cdt
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Optional[torch.Tensor], ...]:  # type: ignore[override]
        hidden, weight, bias, ids, inv_temp, lse = ctx.saved_tensors
        cdt, chunk = ctx.cdt, ctx.chunk_tokens
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        w = weight.to(cdt)
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
                z.mul_(inv_temp[s:e, None])
                # dz = (scatter(g) - sum(g) * softmax) / T, built in place in z's buffer
                p = z.sub_(lse[s:e, None]).exp_()
                dz = p.mul_(-g.sum(-1, keepdim=True))
                dz.scatter_add_(-1, ids[s:e], g)
                dz.mul_(inv_temp[s:e, None])
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
        return grad_h, gw, gb, None, None, None


def chunked_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    ids: torch.Tensor,
    *,
    bias: Optional[torch.Tensor] = None,
    inv_temperature: Optional[torch.Tensor] = None,
    chunk_tokens: int = 512,
) -> torch.Tensor:
    """``hidden [..., H]``, ``ids [..., K]`` (negative ids read as 0), optional ``inv_temperature [...]``
    (1 / temperature per position); returns fp32 ``[..., K]`` log-probabilities."""
    lead = hidden.shape[:-1]
    h = hidden.reshape(-1, hidden.shape[-1])
    i = ids.clamp_min(0).reshape(h.shape[0], -1)
    if inv_temperature is None:
        t = torch.ones(h.shape[0], dtype=torch.float32, device=h.device)
    else:
        t = inv_temperature.to(device=h.device, dtype=torch.float32).reshape(-1)
    out = ChunkedLogprobs.apply(h, weight, bias, i, t, max(1, int(chunk_tokens)))
    return out.reshape(*lead, i.shape[-1])


def full_vocab_logprobs(
    logits: torch.Tensor, ids: torch.Tensor, inv_temperature: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """The plain path: fp32 ``log_softmax(logits / T)`` over the whole vocabulary, gathered at ``ids``."""
    z = logits.float()
    if inv_temperature is not None:
        z = z * inv_temperature.to(z.device, torch.float32).unsqueeze(-1)
    return torch.log_softmax(z, dim=-1).gather(-1, ids.clamp_min(0))


def output_head(model: torch.nn.Module) -> Optional[torch.nn.Linear]:
    """The model's output embedding (``lm_head``) when the chunked path is exact for it, else None
    (models that post-process logits, e.g. Gemma's final soft-capping, keep the full-vocab path)."""
    base = model.module if hasattr(model, "module") and not hasattr(model, "config") else model
    config = getattr(base, "config", None)
    if config is not None and getattr(config, "final_logit_softcapping", None):
        return None
    get = getattr(base, "get_output_embeddings", None)
    head = get() if callable(get) else None
    if not isinstance(head, torch.nn.Linear):
        return None
    return head


@contextlib.contextmanager
def sampled_token_head(
    model: torch.nn.Module,
    ids: torch.Tensor,
    inv_temperature: Optional[torch.Tensor],
    chunk_tokens: int,
) -> Iterator[bool]:
    """While active, ``model(...).logits`` is ``[B, T, K]`` log-probabilities of ``ids [B, T, K]``
    (yields True); yields False (nothing changed) when the model's head does not allow it."""
    head = output_head(model)
    if head is None:
        yield False
        return

    def forward(hidden: torch.Tensor) -> torch.Tensor:
        return chunked_logprobs(
            hidden,
            head.weight,
            ids,
            bias=head.bias,
            inv_temperature=inv_temperature,
            chunk_tokens=chunk_tokens,
        )

    head.forward = (
        forward  # an instance attribute: the module, its hooks and state dict are untouched
    )
    try:
        yield True
    finally:
        del head.forward
