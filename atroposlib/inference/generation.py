"""The batched generation loop: left-padded prefill, then token-by-token decoding with a KV cache.

``DecodeBatch`` holds the rows being generated. ``add`` prefills new rows (left-padded) and merges them
into the running batch (continuous batching: the shorter KV cache is left-padded with masked columns);
``step`` decodes one token for every row. Each row has its own prompt, sampling params, generator, stop
strings and token budget, and leaves the batch (its KV-cache row is dropped) as soon as it finishes.
Position ids come from each row's own token count, so a padded row sees exactly the positions it would see
alone, and the returned logprobs are the raw model log-softmax (temperature 1, before top-p/top-k), i.e.
what a plain forward pass of the same model on the same tokens gives. ``generate_batch`` runs a fixed set
of rows to completion.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from atroposlib.inference.sampling import RowParams, sample_next


@dataclass
class RowResult:
    """One finished row: completion ids, their logprobs, optional top alternatives, text, finish reason."""

    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[list[tuple[int, float]]] = field(default_factory=list)
    text: str = ""
    finish_reason: str = "length"
    stop_reason: Optional[str] = None
    # One entry per prompt token (None for the first): [(token id, logprob, rank)], actual token first.
    prompt_logprobs: Optional[list[Optional[list[tuple[int, float, int]]]]] = None
    done: bool = False
    # (weights version, index of the first token it generated), in order: see ``note_version``
    version_marks: list[tuple[int, int]] = field(default_factory=list)
    _versioned: int = 0  # tokens whose version is noted

    def note_version(self, version: int) -> None:
        """The tokens generated since the last call came from weights ``version``."""
        n = len(self.token_ids)
        if n > self._versioned:
            if not self.version_marks or self.version_marks[-1][0] != version:
                self.version_marks.append((version, self._versioned))
            self._versioned = n

    def weight_versions(self) -> list[dict[str, Any]]:
        """vLLM's ``weight_versions`` of this row: ``[{"version", "start", "end"}]``, the weights
        version that generated output tokens ``[start, end)``."""
        n = len(self.token_ids)
        out = []
        for i, (version, start) in enumerate(self.version_marks):
            end = self.version_marks[i + 1][1] if i + 1 < len(self.version_marks) else n
            start, end = min(start, n), min(end, n)
            if end > start:
                out.append({"version": str(version), "start": start, "end": end})
        return out


def prompt_logprobs(
    model: torch.nn.Module, prompt_ids: list[int], k: int
) -> list[Optional[list[tuple[int, float, int]]]]:
    """Logprob and rank (1 = most likely) of every prompt token under the prefix before it, plus the
    ``k`` most likely alternatives at that position (vLLM's ``prompt_logprobs``). Entry 0 is None."""
    device = next(model.parameters()).device
    ids = torch.tensor([prompt_ids], dtype=torch.long, device=device)
    with torch.inference_mode():
        logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), dim=-1)
    actual = ids[0, 1:]
    actual_lp = logp.gather(-1, actual.unsqueeze(-1)).squeeze(-1)
    ranks = (logp > actual_lp.unsqueeze(-1)).sum(-1) + 1
    out: list[Optional[list[tuple[int, float, int]]]] = [None]
    top_v = top_i = None
    if k > 0:
        top_v, top_i = logp.topk(min(k, logp.shape[-1]), dim=-1)
    for t in range(actual.shape[0]):
        entry = [(int(actual[t]), float(actual_lp[t]), int(ranks[t]))]
        if top_i is not None and top_v is not None:
            for r, (tid, lp) in enumerate(zip(top_i[t].tolist(), top_v[t].tolist(), strict=True)):
                if tid != entry[0][0]:
                    entry.append((tid, lp, r + 1))
        out.append(entry)
    return out


def _find_stop(text: str, stops: Sequence[str]) -> tuple[int, Optional[str]]:
    best, which = -1, None
    for s in stops:
        i = text.find(s)
        if i >= 0 and (best < 0 or i < best):
            best, which = i, s
    return best, which


def cache_argument(model: torch.nn.Module) -> str:
    """The name under which the model's ``forward`` takes the KV cache: ``cache`` in recent
    transformers (``past_key_values`` there is deprecated, with a warning on every call), else
    ``past_key_values``."""
    import inspect

    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def cache_of(out: Any) -> Any:
    """The KV cache a forward pass returned (``out.cache``, or ``out.past_key_values`` before)."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


@dataclass
class _Decoding:
    """The running batch's tensors, all present while the batch has rows."""

    cache: Any  # the model's KV cache (a transformers DynamicCache)
    mask: torch.Tensor  # [B, T] over the cached positions
    next_pos: torch.Tensor  # [B] position id of the next input token
    last: torch.Tensor  # [B] token to feed at the next step


class DecodeBatch:
    """The rows currently being generated, their KV cache, attention mask and next positions."""

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        pad_id: int,
        eos_ids: set[int],
        decode: Callable[[list[int]], str],
    ) -> None:
        self.model = model
        self.pad_id = pad_id
        self.eos_ids = eos_ids
        self.decode = decode
        self.device = next(model.parameters()).device
        self.cache_arg = cache_argument(model)
        self.rows: list[RowParams] = []
        self.results: list[RowResult] = []
        self.generators: list[torch.Generator] = []
        self.decoding: Optional[_Decoding] = None  # None while no row is being generated
        self.generated = 0

    def __len__(self) -> int:
        return len(self.rows)

    def can_merge(self) -> bool:
        """True when the cache layout allows adding rows to a running batch."""
        if self.decoding is None:
            return True
        from transformers.cache_utils import DynamicLayer

        layers = getattr(self.decoding.cache, "layers", [None])
        return all(type(layer) is DynamicLayer for layer in layers)

    def add(self, rows: Sequence[RowParams]) -> list[RowResult]:
        """Prefill ``rows``, sample their first token and merge them into the batch. Returns their
        (mutable) results; a result's ``done`` turns True when that row finishes."""
        results = [RowResult() for _ in rows]
        if not rows:
            return results
        for row, res in zip(rows, results, strict=True):
            if row.prompt_logprobs is not None:
                res.prompt_logprobs = prompt_logprobs(
                    self.model, row.prompt_ids, row.prompt_logprobs
                )
        width = max(len(r.prompt_ids) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, width - len(r.prompt_ids) :] = torch.tensor(r.prompt_ids, dtype=torch.long)
            mask[i, width - len(r.prompt_ids) :] = 1
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():
            out = self.model(
                input_ids=ids.to(self.device),
                attention_mask=mask.to(self.device),
                position_ids=pos.to(self.device),
                use_cache=True,
                logits_to_keep=1,
            )
        gens = [r.make_generator() for r in rows]
        chosen, keep = self._sample(out.logits[:, -1, :], list(rows), results, gens)
        cache, mask = cache_of(out), mask.to(self.device)
        next_pos = pos[:, -1] + 1
        if len(keep) < len(rows):
            if not keep:
                return results
            sel = torch.tensor(keep, dtype=torch.long, device=self.device)
            cache.batch_select_indices(sel)
            mask, next_pos, chosen = (
                mask.index_select(0, sel),
                next_pos.index_select(0, sel.cpu()),
                chosen[sel],
            )
        kept_rows = [rows[i] for i in keep]
        new = _Decoding(cache, mask, next_pos, chosen)
        if self.decoding is None or not self.rows:
            self.decoding = new
        else:
            self._merge(self.decoding, new)
        self.rows += kept_rows
        self.results += [results[i] for i in keep]
        self.generators += [gens[i] for i in keep]
        self._trim()
        return results

    def step(self) -> None:
        """Decode one token for every row; finished rows leave the batch."""
        d = self.decoding
        if d is None or not self.rows:
            return
        ones = torch.ones((len(self.rows), 1), dtype=d.mask.dtype, device=self.device)
        d.mask = torch.cat([d.mask, ones], dim=-1)
        with torch.inference_mode():
            out = self.model(
                input_ids=d.last.unsqueeze(-1).to(self.device),
                attention_mask=d.mask,
                position_ids=d.next_pos.unsqueeze(-1).to(self.device),
                use_cache=True,
                logits_to_keep=1,
                **{self.cache_arg: d.cache},
            )
        d.cache = cache_of(out)
        d.next_pos = d.next_pos + 1
        chosen, keep = self._sample(out.logits[:, -1, :], self.rows, self.results, self.generators)
        d.last = chosen
        if len(keep) < len(self.rows):
            self._select(d, keep)

    def drop(self, results: Sequence[RowResult]) -> None:
        """Take the rows whose results are ``results`` out of the batch (their client went away): they
        finish now with ``finish_reason`` ``"abort"`` and the text generated so far."""
        gone = {id(r) for r in results}
        keep = [b for b, res in enumerate(self.results) if id(res) not in gone]
        if len(keep) == len(self.results):
            return
        for res in results:
            if not res.done:
                res.text, res.finish_reason, res.done = self.decode(res.token_ids), "abort", True
        if self.decoding is not None:
            self._select(self.decoding, keep)

    # -- internals ---------------------------------------------------------------------------
    def _sample(
        self,
        logits: torch.Tensor,
        rows: Sequence[RowParams],
        results: Sequence[RowResult],
        gens: list[torch.Generator],
    ) -> tuple[torch.Tensor, list[int]]:
        logits = logits.float()
        logp = torch.log_softmax(logits, dim=-1)
        chosen = sample_next(
            logits,
            torch.tensor([r.temperature for r in rows], dtype=torch.float32, device=logits.device),
            torch.tensor([r.top_p for r in rows], dtype=torch.float32, device=logits.device),
            torch.tensor([r.top_k for r in rows], dtype=torch.long, device=logits.device),
            gens,
        )
        chosen_lp = logp.gather(-1, chosen.unsqueeze(-1)).squeeze(-1).tolist()
        want_top = max(r.top_logprobs for r in rows)
        top_vals = top_ids = None
        if want_top > 0:
            top_vals, top_ids = logp.topk(min(want_top, logp.shape[-1]), dim=-1)
        keep: list[int] = []
        for b, (row, res, tok) in enumerate(zip(rows, results, chosen.tolist(), strict=True)):
            res.token_ids.append(tok)
            res.logprobs.append(chosen_lp[b])
            if row.top_logprobs > 0 and top_ids is not None and top_vals is not None:
                k = row.top_logprobs
                res.top_logprobs.append(
                    list(zip(top_ids[b, :k].tolist(), top_vals[b, :k].tolist(), strict=True))
                )
            self.generated += 1
            if tok in self.eos_ids and not row.ignore_eos:
                res.finish_reason, res.done = "stop", True
            elif row.stop:
                text = self.decode(res.token_ids)
                at, which = _find_stop(text, row.stop)
                if at >= 0:
                    res.text, res.finish_reason, res.stop_reason, res.done = (
                        text[:at],
                        "stop",
                        which,
                        True,
                    )
            if not res.done and len(res.token_ids) >= row.max_tokens:
                res.finish_reason, res.done = "length", True
            if res.done:
                if res.stop_reason is None:
                    res.text = self.decode(res.token_ids)
            else:
                keep.append(b)
        return chosen, keep

    def _select(self, d: _Decoding, keep: list[int]) -> None:
        self.rows = [self.rows[i] for i in keep]
        self.results = [self.results[i] for i in keep]
        self.generators = [self.generators[i] for i in keep]
        if not keep:
            self.decoding = None
            return
        sel = torch.tensor(keep, dtype=torch.long, device=self.device)
        d.cache.batch_select_indices(sel)
        d.mask = d.mask.index_select(0, sel)
        d.next_pos = d.next_pos.index_select(0, sel.to(d.next_pos.device))
        d.last = d.last.index_select(0, sel.to(d.last.device))
        self._trim()

    def _trim(self) -> None:
        """Drop leading cache columns that no remaining row attends to."""
        d = self.decoding
        if d is None:
            return
        used = d.mask.any(dim=0).nonzero()
        start = int(used[0]) if used.numel() else 0
        if start > 0:
            d.mask = d.mask[:, start:]
            for layer in d.cache.layers:
                layer.keys = layer.keys[..., start:, :]
                layer.values = layer.values[..., start:, :]

    def _merge(self, d: _Decoding, new: _Decoding) -> None:
        """Append ``new``'s rows to ``d``, left-padding the shorter cache with masked columns."""
        old_t, new_t = d.mask.shape[1], new.mask.shape[1]
        width = max(old_t, new_t)

        def pad(x: torch.Tensor, t: int, dim_from_end: int) -> torch.Tensor:
            if t == width:
                return x
            spec = [0, 0] * (dim_from_end - 1) + [width - t, 0]
            return torch.nn.functional.pad(x, spec)

        for mine, theirs in zip(d.cache.layers, new.cache.layers, strict=True):
            mine.keys = torch.cat([pad(mine.keys, old_t, 2), pad(theirs.keys, new_t, 2)], dim=0)
            mine.values = torch.cat(
                [pad(mine.values, old_t, 2), pad(theirs.values, new_t, 2)], dim=0
            )
        d.mask = torch.cat([pad(d.mask, old_t, 1), pad(new.mask, new_t, 1)], dim=0)
        d.next_pos = torch.cat([d.next_pos, new.next_pos.to(d.next_pos.device)])
        d.last = torch.cat([d.last, new.last.to(d.last.device)])


def generate_batch(
    model: torch.nn.Module,
    rows: Sequence[RowParams],
    *,
    pad_id: int,
    eos_ids: set[int],
    decode: Callable[[list[int]], str],
) -> list[RowResult]:
    """Generate every row to completion in one padded batch; return results in row order."""
    batch = DecodeBatch(model, pad_id=pad_id, eos_ids=eos_ids, decode=decode)
    results = batch.add(rows)
    while len(batch):
        batch.step()
    return results


__all__ = ["DecodeBatch", "RowResult", "generate_batch", "prompt_logprobs"]
