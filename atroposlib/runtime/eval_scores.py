"""Scores of an evaluation that samples each item ``n`` times: avg@n and the unbiased pass@k.

``sample_metrics({"eval/percent_correct": per_item})``, where ``per_item`` holds one list of 0/1 (or
partial) scores per item: with one sample per item it is the plain mean (the metric as before); with
``n`` samples it adds ``<name>_avg@n`` (the mean over all samples) and ``<name>_pass@k`` for k = 1 and
k = n (and the powers of two between), the unbiased estimator 1 - C(n - c, k) / C(n, k) per item
(Chen et al. 2021), averaged over items; a sample counts as correct when its score is >= 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def pass_at_k(m: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``m`` samples of which ``c`` are correct:
    ``1 - C(m - c, k) / C(m, k)``, computed as a stable product."""
    m, c, k = int(m), int(c), int(k)
    if m - c < k:
        return 1.0
    prod = 1.0
    for i in range(m - c + 1, m + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def ks_for(n: int) -> list[int]:
    """The k values reported for ``n`` samples per item: 1, the powers of two below n, and n."""
    ks, k = [1], 2
    while k < n:
        ks.append(k)
        k *= 2
    return ks + ([n] if n > 1 else [])


def sample_metrics(per_item: Mapping[str, Sequence[Sequence[float]]]) -> dict[str, float]:
    """The metrics of each name's per-item sample scores (see the module docstring)."""
    out: dict[str, float] = {}
    for name, items in per_item.items():
        items = [list(s) for s in items if len(s)]
        if not items:
            continue
        n = min(len(s) for s in items)
        flat = [v for s in items for v in s[:n]]
        out[name] = sum(flat) / len(flat)
        if n > 1:
            out[f"{name}_avg@{n}"] = out[name]
            for k in ks_for(n):
                out[f"{name}_pass@{k}"] = sum(
                    pass_at_k(n, sum(v >= 1.0 for v in s[:n]), k) for s in items
                ) / len(items)
    return out


__all__ = ["ks_for", "pass_at_k", "sample_metrics"]
