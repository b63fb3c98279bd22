from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np
import pytest
import torch

from gaca_train.estimators.rows import StepRows, anchor_ids


def test_anchor_ids_are_stable_across_processes():
    keys = ["kitchen|holds apple", "", "é unicode ☃"]
    here = anchor_ids(keys).tolist()
    code = f"from gaca_train.estimators.rows import anchor_ids; print(anchor_ids({keys!r}).tolist())"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert str(here) == other.strip()
    # The id is the first 8 bytes of BLAKE2b, signed little-endian.
    expected = int.from_bytes(hashlib.blake2b(keys[0].encode(), digest_size=8).digest(), "little", signed=True)
    assert here[0] == expected
    assert len(set(here)) == 3


def test_anchor_ids_reject_non_strings():
    with pytest.raises(TypeError, match="anchor key 1 must be a str, got int"):
        anchor_ids(["a", 3])


def test_rows_accept_lists_and_numpy():
    rows = StepRows(
        group=np.array([1, 1], dtype=np.int32),
        traj=[0, 1],
        step=[0, 0],
        anchor=[5, 5],
        reward=np.array([0.0, 1.0]),
        nll=[0.5, 0.7],
        valid=[True, False],
    )
    assert rows.group.dtype == torch.int64
    assert rows.reward.dtype == torch.float64  # NumPy float64 stays float64
    assert rows.nll.dtype == torch.float32
    assert len(rows) == 2


def test_from_steps_hashes_string_keys():
    steps = [
        {"group": 0, "traj": 0, "step": 0, "anchor_key": "s0", "reward": 0.0, "nll": 1.0, "valid": True},
        {"group": 0, "traj": 1, "step": 0, "anchor_key": "s0", "reward": 1.0, "nll": 1.0, "valid": True},
    ]
    rows = StepRows.from_steps(steps)
    assert rows.anchor[0] == rows.anchor[1] == anchor_ids(["s0"])[0]
    with pytest.raises(ValueError, match="step record 0 lacks nll"):
        StepRows.from_steps([{k: v for k, v in steps[0].items() if k != "nll"}])
    with pytest.raises(ValueError, match="mix int anchor and str anchor_key"):
        StepRows.from_steps([steps[0], {**steps[1], "anchor": 3, "anchor_key": None}])


def test_permute_keeps_rows_together():
    rows = StepRows(group=[0, 0, 1], traj=[0, 1, 2], step=[0, 0, 0], anchor=[1, 2, 3],
                    reward=[0.0, 1.0, 2.0], nll=[0.1, 0.2, 0.3], valid=[True, False, True])  # fmt: skip
    p = rows.permute(torch.tensor([2, 0, 1]))
    assert p.traj.tolist() == [2, 0, 1]
    assert p.reward.tolist() == [2.0, 0.0, 1.0]
    assert p.valid.tolist() == [True, True, False]
