from __future__ import annotations

import numpy as np
import pytest

from cache.batching import collate, plan_batches
from cache.prompts import EncodedText


def naive_plan(lengths, keys, batch_size, budget):
    """Deliberately plain re-implementation of the documented packing rule."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], keys[i]))
    batches = []
    for i in order:
        if batches:
            last = batches[-1]
            width = max(lengths[j] for j in last + [i])
            if len(last) + 1 <= batch_size and (len(last) + 1) * width <= budget:
                last.append(i)
                continue
        batches.append([i])
    return batches


@pytest.mark.parametrize("batch_size,budget", [(1, 10**6), (4, 10**6), (8, 64), (32, 100), (3, 5)])
def test_plan_matches_naive_rule(batch_size, budget):
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 40, size=57).tolist()
    keys = [f"k{i:03d}" for i in range(57)]
    plan = plan_batches(lengths, keys, batch_size, budget)
    assert plan == naive_plan(lengths, keys, batch_size, budget)
    assert sorted(i for b in plan for i in b) == list(range(57))
    for batch in plan:
        assert len(batch) <= batch_size
        assert len(batch) == 1 or len(batch) * max(lengths[i] for i in batch) <= budget


def test_sorted_batches_pad_less_than_input_order():
    rng = np.random.default_rng(1)
    lengths = rng.integers(4, 200, size=256).tolist()
    keys = [str(i) for i in range(256)]
    sorted_pad = sum(len(b) * max(lengths[i] for i in b) for b in plan_batches(lengths, keys, 32, 10**9))
    in_order = sum(32 * max(lengths[i : i + 32]) for i in range(0, 256, 32))
    assert sorted_pad < 0.7 * in_order


@pytest.mark.parametrize("side", ["left", "right"])
def test_collate_positions_and_masks(side):
    items = [
        EncodedText(np.array([5, 6, 7]), np.array([False, True, True]), False),
        EncodedText(np.array([9]), np.array([True]), False),
    ]
    batch = collate(items, pad_id=0, padding_side=side)
    if side == "right":
        assert batch.input_ids.tolist() == [[5, 6, 7], [9, 0, 0]]
        assert batch.position_ids[1, 0] == 0
        assert batch.pool_mask.tolist() == [[False, True, True], [True, False, False]]
    else:
        assert batch.input_ids.tolist() == [[5, 6, 7], [0, 0, 9]]
        assert batch.position_ids[1, 2] == 0
        assert batch.pool_mask.tolist() == [[False, True, True], [False, False, True]]
    assert batch.position_ids[0].tolist() == [0, 1, 2]
    assert batch.attention_mask.sum().item() == 4 == batch.n_tokens
