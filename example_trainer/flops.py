"""How much arithmetic a training step is, and what this machine can do: the compute limit of a step.

``model_cost`` counts, once per model, the weights that take part in matmuls (every ``nn.Linear``, the
output embedding included, a tied one once; an input embedding is a lookup, not a matmul) and how many
of them are trained (all of them, or only a LoRA adapter's). ``step_flops`` then estimates one step:

* forward: 2 x matmul weights x padded tokens, plus attention's scores and weighted sum,
  4 x layers x hidden x sum over sequences of (padded length)^2;
* backward: the same again for the gradients of the activations, which every layer below the output
  needs, plus 2 x *trained* weights x tokens for the weight gradients (so 6PT for full fine-tuning, about
  4PT with LoRA).

``matmul_peak`` measures the machine's dense matmul rate at a given dtype and thread count: ``flops /
peak`` is then the shortest a step's forward + backward could take, and the measured time over it says
how far from the limit the trainer runs (``bench/step_breakdown.py``, the SmolLM2 demo's summary).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelCost:
    matmul_params: int  # weights that take part in a matmul per token (the output head included)
    trained_matmul_params: int  # those of them that get a weight gradient
    layers: int
    hidden: int


def model_cost(model: Any) -> ModelCost:
    """The matmul weights of ``model`` (a transformers model, possibly peft-wrapped)."""
    import torch

    seen: set[int] = set()
    total = trained = 0
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            w = module.weight
            if id(w) in seen:
                continue
            seen.add(id(w))
            total += w.numel()
            if w.requires_grad:
                trained += w.numel()
    cfg = getattr(model, "config", None)
    text_cfg = getattr(cfg, "text_config", None) or cfg
    layers = int(getattr(text_cfg, "num_hidden_layers", 0) or 0)
    hidden = int(getattr(text_cfg, "hidden_size", 0) or 0)
    return ModelCost(total, trained, layers, hidden)


def step_flops(cost: ModelCost, padded_tokens: float, padded_square_sum: float) -> float:
    """Estimated FLOPs of one step's forward + backward: ``padded_tokens`` = rows x padded length summed
    over the micro-batches, ``padded_square_sum`` = rows x padded length squared, summed likewise."""
    attention = 4.0 * cost.layers * cost.hidden * padded_square_sum
    forward = 2.0 * cost.matmul_params * padded_tokens + attention
    backward = forward + 2.0 * cost.trained_matmul_params * padded_tokens
    return forward + backward


def matmul_peak(dtype_name: str = "float32", threads: int = 0, seconds: float = 1.0) -> float:
    """FLOP/s of the best of three square matmul sizes (512, 1024, 2048) at ``dtype_name`` on
    ``threads`` torch threads (0: torch's current setting), each timed for about ``seconds``."""
    import torch

    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    dtype = getattr(torch, dtype_name)
    best = 0.0
    try:
        for n in (512, 1024, 2048):
            a = torch.randn(n, n).to(dtype)
            b = torch.randn(n, n).to(dtype)
            a @ b  # warm-up: kernel selection, page faults
            runs, t0 = 0, time.perf_counter()
            while True:
                a @ b
                runs += 1
                spent = time.perf_counter() - t0
                if spent >= seconds / 3:
                    break
            best = max(best, 2.0 * n**3 * runs / spent)
    finally:
        torch.set_num_threads(before)
    return best
