from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_ranks_with_unequal_episodes_share_trl_vllm_server_generation(tmp_path):
    # Rank 0: 2 envs, episodes of 2 steps; rank 1: 3 envs, 5 steps. TRL's server-mode generate slices
    # the gathered answers by an equal prompt count per rank and is a collective: without lockstep
    # rank 1 gets rank 0's answers, then waits forever for a rank that has stopped generating.
    with socket.socket() as probe:  # a free loopback port for the rendezvous
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
               "--master_port", port, "-m", "tests.gaca_train.lockstep_worker", str(tmp_path)]  # fmt: skip
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    rank0, rank1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert rank0["lengths"] == [2, 2] and rank1["lengths"] == [5, 5, 5]
    assert rank0["steps"] == 4 and rank1["steps"] == 15
    assert rank0["answers_match"] and rank1["answers_match"]  # every completion answers its own prompt
    # Same calls with the same prompt counts on both ranks: 3 prompts a turn in chunks of 2, 5 turns.
    assert rank0["calls"] == rank1["calls"] == [2, 1] * 5
