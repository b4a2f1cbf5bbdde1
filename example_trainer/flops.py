"""How much arithmetic a training step is, and what this machine can do: the compute limit of a step.

``model_cost`` counts, once per model, the weights that take part in matmuls (every ``nn.Linear``; the
output embedding apart, a tied one once; an input embedding is a lookup, not a matmul) and how many of
them are trained (all of them, or only a LoRA adapter's). ``step_flops`` then estimates one step:

* forward: 2 x body weights x padded tokens, plus attention's scores and weighted sum,
  4 x layers x hidden x sum over sequences of (padded length)^2, plus 2 x head weights x the positions
  the head runs at (the trainer's chunked head: only the trained tokens);
* backward: the body's forward again for the gradients of the activations, which every layer below the
  output needs, plus 2 x *trained* weights x tokens for the weight gradients (so 6PT for full
  fine-tuning, about 4PT with LoRA); the head twice more (the chunked head recomputes its logits, then
  the activation gradient).

``matmul_peak`` measures the machine's dense matmul rate at a given dtype and thread count: ``flops /
peak`` is then the shortest a step's forward + backward could take, and the measured time over it says
how far from the limit the trainer runs (``bench/step_breakdown.py``, the SmolLM2 demo's summary).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class ModelCost:
    body_params: int  # matmul weights below the output head, per token
    head_params: int  # the output embedding's (a tied one counted here, once)
    trained_body_params: int  # of the body's, those that get a weight gradient
    trained_head_params: int
    layers: int
    hidden: int

    @property
    def matmul_params(self) -> int:
        return self.body_params + self.head_params

    @property
    def trained_matmul_params(self) -> int:
        return self.trained_body_params + self.trained_head_params


def model_cost(model: Any) -> ModelCost:
    """The matmul weights of ``model`` (a transformers model, possibly peft-wrapped)."""
    import torch

    get_head = getattr(model, "get_output_embeddings", None)
    head = get_head() if callable(get_head) else None
    head_w = head.weight if isinstance(head, torch.nn.Linear) else None
    seen: set[int] = set()
    body = trained_body = 0
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            w = module.weight
            if id(w) in seen or w is head_w:
                continue
            seen.add(id(w))
            body += w.numel()
            if w.requires_grad:
                trained_body += w.numel()
    head_n = head_w.numel() if head_w is not None else 0
    trained_head = head_n if head_w is not None and head_w.requires_grad else 0
    cfg = getattr(model, "config", None)
    text_cfg = getattr(cfg, "text_config", None) or cfg
    layers = int(getattr(text_cfg, "num_hidden_layers", 0) or 0)
    hidden = int(getattr(text_cfg, "hidden_size", 0) or 0)
    return ModelCost(body, head_n, trained_body, trained_head, layers, hidden)


def step_flops(
    cost: ModelCost,
    padded_tokens: float,
    padded_square_sum: float,
    head_tokens: Optional[float] = None,
) -> float:
    """Estimated FLOPs of one step's forward + backward: ``padded_tokens`` = rows x padded length summed
    over the micro-batches, ``padded_square_sum`` = rows x padded length squared, summed likewise;
    ``head_tokens``: the positions the output head runs at (the trained tokens with the chunked head;
    default every padded token). The chunked head recomputes its logits in backward: counted."""
    head_tokens = padded_tokens if head_tokens is None else head_tokens
    attention = 4.0 * cost.layers * cost.hidden * padded_square_sum
    body_fwd = 2.0 * cost.body_params * padded_tokens + attention
    head_fwd = 2.0 * cost.head_params * head_tokens
    backward = (
        body_fwd  # gradients of the activations, layer by layer
        + 2.0 * cost.trained_body_params * padded_tokens  # weight gradients of what is trained
        + 2.0 * head_fwd  # the head's recomputed logits and its activation gradient
        + 2.0 * cost.trained_head_params * head_tokens
    )
    return body_fwd + head_fwd + backward


def matmul_peak(
    dtype_name: str = "float32", threads: int = 0, seconds: float = 1.0, cpu_clock: bool = False
) -> float:
    """FLOP/s of the best of three square matmul sizes (512, 1024, 2048) at ``dtype_name`` on
    ``threads`` torch threads (0: torch's current setting), each timed for about ``seconds``.

    ``cpu_clock``: timed on the process's CPU clock and scaled by the thread count, i.e. the rate the
    threads reach while they have a core each; unlike wall time it hardly moves with other jobs."""
    import torch

    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    dtype = getattr(torch, dtype_name)
    clock = time.process_time if cpu_clock else time.perf_counter
    scale = torch.get_num_threads() if cpu_clock else 1
    best = 0.0
    try:
        for n in (512, 1024, 2048):
            a = torch.randn(n, n).to(dtype)
            b = torch.randn(n, n).to(dtype)
            a @ b  # warm-up: kernel selection, page faults
            runs, t0 = 0, clock()
            while True:
                a @ b
                runs += 1
                spent = clock() - t0
                if spent >= seconds / 3 * scale:
                    break
            best = max(best, 2.0 * n**3 * runs / spent * scale)
    finally:
        torch.set_num_threads(before)
    return best
