"""The benchmark's synthetic batch: shapes, seeding, and the anchor structure it promises."""

from __future__ import annotations

import torch

from gaca_train.experiments.synthetic import synthetic_batch


def test_synthetic_batch_is_seeded_and_shares_first_states_within_a_group():
    rows = synthetic_batch(groups=3, trajs=4, steps=5, seed=1)
    assert len(rows) == 3 * 4 * 5 and rows.group.tolist()[:20] == [0] * 20
    assert rows.step.tolist()[:5] == [0, 1, 2, 3, 4]
    first = rows.anchor[rows.step == 0].view(3, 4)
    assert (first == first[:, :1]).all() and first[:, 0].unique().numel() == 3  # one start state per group
    assert set(rows.reward[rows.step < 4].tolist()) == {0.0} and set(rows.reward.tolist()) <= {0.0, 10.0}
    again = synthetic_batch(groups=3, trajs=4, steps=5, seed=1)
    assert torch.equal(rows.anchor, again.anchor) and torch.equal(rows.nll, again.nll)
    assert not torch.equal(rows.nll, synthetic_batch(groups=3, trajs=4, steps=5, seed=2).nll)
