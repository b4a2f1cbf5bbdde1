"""Atropos's queue-packing helpers (``atroposlib.api.utils``): exact batches of whole groups."""

from __future__ import annotations

import random

from atroposlib.api.utils import (
    find_groups_summing_to_target,
    grab_batch_with_minimum_allocations,
    grab_exact_from_heterogeneous_queue,
)


def g(n: int, env_id=None, tag=0) -> dict:
    out = {"tokens": [[tag]] * n}
    if env_id is not None:
        out["env_id"] = env_id
    return out


def test_find_groups_summing_to_target():
    buf = [g(4), g(3), g(2), g(1)]
    assert find_groups_summing_to_target(buf, 6) == [0, 2]  # FIFO greedy: 4, skip 3, 2
    assert find_groups_summing_to_target([g(4), g(3), g(3)], 6) == [1, 2]  # exact subset
    assert find_groups_summing_to_target([g(4), g(4)], 6) == []
    assert find_groups_summing_to_target([], 6) == []


def test_grab_exact_packs_small_groups_into_units_of_the_largest():
    queue = [g(2, tag=1), g(4, tag=2), g(2, tag=3), g(4, tag=4)]
    batch, rest = grab_exact_from_heterogeneous_queue(queue, 8)
    assert sum(len(x["tokens"]) for x in batch) == 8
    assert [x["tokens"][0][0] for x in batch] == [2, 1, 3]  # a 4, then the two 2s as one unit
    assert rest == [queue[3]]
    assert grab_exact_from_heterogeneous_queue([g(2), g(4)], 8) == (None, [g(2), g(4)])
    lone = [g(2), g(4), g(4)]
    assert grab_exact_from_heterogeneous_queue(lone, 6) == (None, lone)  # 2 cannot fill a unit


def test_grab_exact_random_queues_always_exact():
    rng = random.Random(0)
    for _ in range(300):
        queue = [g(rng.choice([1, 2, 4, 8])) for _ in range(rng.randint(1, 30))]
        bs = 8 * rng.randint(1, 4)
        batch, rest = grab_exact_from_heterogeneous_queue(queue, bs)
        if batch is not None:
            assert sum(len(x["tokens"]) for x in batch) == bs
            assert len(batch) + len(rest) == len(queue)


def test_minimum_allocations():
    envs = [
        {"registered_id": 0, "connected": True, "min_batch_allocation": None},
        {"registered_id": 1, "connected": True, "min_batch_allocation": 0.5},
    ]
    queue = [g(2, 0, 1), g(2, 0, 2), g(2, 0, 3), g(2, 1, 4), g(2, 0, 5)]
    batch, rest = grab_batch_with_minimum_allocations(queue, 4, envs)
    assert batch is not None and sorted(x["tokens"][0][0] for x in batch) == [
        1,
        4,
    ]  # env 1 got half
    assert len(rest) == 3
    # env 1 has nothing queued: no batch (its minimum cannot be met)
    only0 = [g(2, 0), g(2, 0)]
    assert grab_batch_with_minimum_allocations(only0, 4, envs) == (None, only0)
    # without minimums it is the plain exact grab
    plain = [{"registered_id": 0, "connected": True, "min_batch_allocation": None}]
    assert grab_batch_with_minimum_allocations(only0, 4, plain)[0] == only0
