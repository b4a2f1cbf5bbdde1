"""Does a model change its logits after the output embedding, and can the chunked head do the same?

The chunked head (``logprobs.py``) replaces the output embedding's ``hidden @ W.T``; whatever the model's
forward does to that result afterwards would then be applied to log-probabilities. Some models do:
Granite divides by ``logits_scaling``, Cohere multiplies by ``logit_scale``, HyperCLOVAX by
``logits_scaling``, Falcon-H1 by ``lm_head_multiplier``, Gemma-2/3/4 and others soft-cap
(``cap * tanh(z / cap)``, ``final_logit_softcapping``, also in a composite model's ``text_config``),
MuseSpark scales and then soft-caps; Chameleon masks image tokens, Inkling slices off padded vocabulary.

``inspect_output_head`` finds out once per model, by running it on one token with the head replaced
by a random ``[1, 1, V]`` tensor: returned untouched, the chunked path is exact; changed, the change is
matched against ``cap * tanh(scale * z / cap)`` (or ``scale * z``) for the scales and caps its config
declares (a ``LogitTransform``), and the chunked path applies the match inside its logsumexp and
backward; anything else (an unrecognised change, a probe that fails) keeps the full-vocabulary path,
with a log line. The trainer inspects its models at set-up, before DDP/FSDP wrap them
(``head_verdict`` / ``adopt_head_verdict`` carry rank 0's verdict to FSDP ranks built on the meta
device); an uninspected model is inspected on first use in one process (``output_head``), and left on
the full path under ``torch.distributed`` (a probe forward there would be a collective the other ranks
do not join).
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass
from typing import Any, Optional

import torch

# the log lines keep the name they have always carried: they are about the chunked log-probs
log = logging.getLogger("example_trainer.logprobs")


@dataclass(frozen=True)
class LogitTransform:
    """What a model's forward does to its output embedding's result ``z``:
    ``cap * tanh(scale * z / cap)`` when ``cap`` is set, else ``scale * z``."""

    scale: float = 1.0
    cap: Optional[float] = None

    def apply(self, z: torch.Tensor) -> torch.Tensor:
        if self.cap is not None:
            return torch.tanh(z * (self.scale / self.cap)) * self.cap
        return z * self.scale

    @property
    def identity(self) -> bool:
        return self.scale == 1.0 and self.cap is None


def _base(model: torch.nn.Module) -> torch.nn.Module:
    return model.module if hasattr(model, "module") and not hasattr(model, "config") else model


def _linear_head(model: torch.nn.Module) -> Optional[torch.nn.Linear]:
    get = getattr(_base(model), "get_output_embeddings", None)
    head = get() if callable(get) else None
    return head if isinstance(head, torch.nn.Linear) else None


def output_vocab_size(model: torch.nn.Module) -> Optional[int]:
    """The number of logits the model produces per position (its output embedding's rows), or the
    config's ``vocab_size``; None when neither is known."""
    head = _linear_head(model)
    if head is not None:
        return int(head.weight.shape[0])
    config = getattr(_base(model), "config", None)
    if config is not None and hasattr(config, "get_text_config"):
        config = config.get_text_config()
    size = getattr(config, "vocab_size", None)
    return int(size) if isinstance(size, int) else None


# attributes (of the config, its text/decoder config, or the model) that scale or soft-cap the logits
_SCALE_ATTRS = ("logits_scaling", "logit_scale", "lm_head_multiplier", "output_multiplier")
_CAP_ATTRS = ("final_logit_softcapping", "logits_soft_cap", "output_logit_soft_cap")
_UNSUPPORTED = "unsupported"
# the inspection's verdict per output embedding: a LogitTransform, or _UNSUPPORTED
_VERDICTS: weakref.WeakKeyDictionary[torch.nn.Module, Any] = weakref.WeakKeyDictionary()


def _declared(base: torch.nn.Module, names: tuple[str, ...]) -> list[float]:
    config = getattr(base, "config", None)
    holders: list[Any] = [config, base, getattr(base, "model", None)]
    for sub in ("text_config", "decoder", "decoder_config"):
        holders.append(getattr(config, sub, None))
    if config is not None and hasattr(config, "get_text_config"):
        holders.append(config.get_text_config())
    values: list[float] = []
    for holder in holders:
        for name in names:
            v = getattr(holder, name, None) if holder is not None else None
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v != 0:
                values.append(float(v))
    return values


def _candidates(base: torch.nn.Module) -> list[LogitTransform]:
    scales = [1.0]
    for v in _declared(base, _SCALE_ATTRS):
        scales += [v, 1.0 / v]
    caps: list[Optional[float]] = [None, *(abs(c) for c in _declared(base, _CAP_ATTRS))]
    return [LogitTransform(scale, cap) for cap in caps for scale in dict.fromkeys(scales)]


def _probe(model: torch.nn.Module, head: torch.nn.Linear) -> Any:
    """Run the model on one token with ``head`` returning a known random tensor; see the module doc."""
    name = type(_base(model)).__name__
    vocab = head.weight.shape[0]
    gen = torch.Generator().manual_seed(0)
    # spread like real logits, wide enough that a soft-cap of 30-50 is far from the identity
    probe = (torch.randn(1, 1, vocab, generator=gen) * 20.0).to(head.weight.device)
    pristine = probe.clone()
    ids = torch.zeros(1, 1, dtype=torch.long, device=head.weight.device)
    head.forward = lambda hidden: probe  # an instance attribute, removed below
    try:
        with torch.no_grad():
            got = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits
    except Exception as e:  # any model we cannot run this way keeps the exact full path
        log.warning(
            "chunked log-probs: %s could not be inspected (%s: %s); using the full-vocabulary path",
            name,
            type(e).__name__,
            str(e).splitlines()[0][:200] if str(e) else "",
        )
        return _UNSUPPORTED
    finally:
        del head.forward
    if got is probe and torch.equal(got, pristine):
        return LogitTransform()
    if isinstance(got, torch.Tensor) and got.shape == pristine.shape and got is not probe:
        got = got.float()
        for cand in _candidates(_base(model)):
            want = cand.apply(pristine)
            if torch.allclose(got, want, rtol=1e-3, atol=1e-3 * float(want.abs().max()) + 1e-6):
                log.info(
                    "chunked log-probs: %s post-processes its logits (scale %g, soft-cap %s); the "
                    "chunked head applies the same",
                    name,
                    cand.scale,
                    cand.cap,
                )
                return cand
    log.warning(
        "chunked log-probs: %s changes its logits after the output embedding in a way not "
        "recognised (not a scale or soft-cap its config declares); using the full-vocabulary path",
        name,
    )
    return _UNSUPPORTED


def inspect_output_head(model: torch.nn.Module) -> Optional[LogitTransform]:
    """The transform the model applies to its output embedding's result (identity for most), found
    once per model by a one-token probe forward; None when the chunked path cannot reproduce it (or
    the model has no linear output embedding). Call it before DDP/FSDP wrap the model."""
    head = _linear_head(model)
    if head is None:
        return None
    if head not in _VERDICTS:
        _VERDICTS[head] = _probe(model, head)
    verdict = _VERDICTS[head]
    return None if verdict is _UNSUPPORTED else verdict


def head_verdict(model: torch.nn.Module) -> Any:
    """The inspection's verdict for ``model`` (runs the probe once): a picklable value that
    ``adopt_head_verdict`` gives to another copy of the same model (FSDP's ranks build theirs on the
    meta device and cannot run the probe; rank 0 runs it on its copy and broadcasts this)."""
    inspect_output_head(model)
    head = _linear_head(model)
    return None if head is None else _VERDICTS[head]


def adopt_head_verdict(model: torch.nn.Module, verdict: Any) -> None:
    """Record ``verdict`` (from ``head_verdict`` on an identical model) for ``model``'s head."""
    head = _linear_head(model)
    if head is not None and verdict is not None:
        _VERDICTS[head] = verdict


def output_head(model: torch.nn.Module) -> Optional[tuple[torch.nn.Linear, LogitTransform]]:
    """The model's output embedding and its logit transform when the chunked path is exact for it,
    else None (see ``inspect_output_head``)."""
    head = _linear_head(model)
    if head is None:
        return None
    if head not in _VERDICTS:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            if not getattr(head, "_atropos_warned", False):
                head._atropos_warned = True
                log.warning(
                    "chunked log-probs: model not inspected before torch.distributed wrapped it "
                    "(call inspect_output_head at set-up); using the full-vocabulary path"
                )
            return None
    transform = inspect_output_head(model)
    return None if transform is None else (head, transform)
