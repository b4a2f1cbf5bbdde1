"""The packed rows of a micro-batch and the map between them and its sequences.

A tensor structure only: ``prefix_packing.py`` decides which sequences share a row and builds it
(``layout``); ``batching.MicroBatch`` carries it to the device; ``train_step`` runs the model over
its rows and maps the log-probabilities back (``gather``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class PackedLayout:
    """Rows of packed inputs and where each sequence's positions landed.

    ``index [B, T]``: for input position t of sequence b (the row order of ``collate`` over the rows'
    sequences), the flat position ``row * L + column`` in the packed rows; -1 past the sequence's end.
    ``visible [R, L, L]``: position q may attend to position k."""

    input_ids: torch.Tensor  # [R, L]
    position_ids: torch.Tensor  # [R, L]
    visible: torch.Tensor  # [R, L, L] bool
    index: torch.Tensor  # [B, T] long
    lengths: list[int]  # each row's tokens before padding

    def to(self, device: torch.device, non_blocking: bool = False) -> PackedLayout:
        return PackedLayout(
            self.input_ids.to(device, non_blocking=non_blocking),
            self.position_ids.to(device, non_blocking=non_blocking),
            self.visible.to(device, non_blocking=non_blocking),
            self.index.to(device, non_blocking=non_blocking),
            self.lengths,
        )

    def attention_mask(self, kernel: str, dtype: torch.dtype) -> torch.Tensor:
        """``[R, 1, L, L]``: boolean (True = attend) for SDPA, additive (0 / most negative) for eager."""
        mask = self.visible.unsqueeze(1)
        if kernel == "sdpa":
            return mask
        zero = torch.zeros((), dtype=dtype, device=mask.device)
        return torch.where(mask, zero, torch.finfo(dtype).min)

    def scatter(self, values: torch.Tensor, fill: float | int = 0) -> torch.Tensor:
        """Per-sequence ``[B, T, ...]`` values placed at their packed positions: ``[R, L, ...]``
        (positions several sequences share take one of theirs; ``fill`` where none lands)."""
        r, width = self.input_ids.shape
        out = torch.full(
            (r * width, *values.shape[2:]), fill, dtype=values.dtype, device=values.device
        )
        valid = self.index >= 0
        out[self.index[valid]] = values[: self.index.shape[0], : self.index.shape[1]][valid]
        return out.view(r, width, *values.shape[2:])

    def gather(self, packed: torch.Tensor) -> torch.Tensor:
        """``[R, L, ...]`` packed values back to ``[B, T, ...]`` per sequence (0 past each end)."""
        flat = packed.reshape(-1, *packed.shape[2:])
        valid = self.index >= 0
        picked = flat[self.index.clamp_min(0)]
        mask = valid.view(*valid.shape, *([1] * (picked.dim() - 2)))
        return picked * mask.to(picked.dtype)
