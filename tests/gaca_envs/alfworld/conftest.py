"""Shared fixtures: a small set of generated games (one per task type, every room kind)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# Seed 6 gives, for game indices 0-5, one game of each task type across all four room kinds
# (checked by test_fixture_covers_every_task_type_and_room_kind).
FIXTURE_SEED = 6
FIXTURE_GAMES = 6


@pytest.fixture(scope="session")
def alfworld_root(tmp_path_factory) -> Path:
    """A folder with ``json_2.1.1/train`` holding six generated, solved games."""
    from gaca_envs.alfworld.generate import generate

    out = tmp_path_factory.mktemp("alfworld_data")
    generate(out, FIXTURE_GAMES, seed=FIXTURE_SEED, split="train")
    return out


@pytest.fixture(scope="session")
def game_files(alfworld_root) -> list[Path]:
    """The fixture's game files in game-index order."""
    files = sorted((alfworld_root / "json_2.1.1" / "train").glob("*/*/game.tw-pddl"), key=lambda p: p.parent.name)
    assert len(files) == FIXTURE_GAMES
    return files


@pytest.fixture(scope="session")
def games(game_files) -> list[dict]:
    """Per fixture game: its file, task id, ``game.tw-pddl`` content and ``traj_data.json``."""
    return [
        {
            "file": path,
            "task_id": "/".join(path.parent.parts[-3:]),
            "game": json.loads(path.read_text()),
            "traj": json.loads((path.parent / "traj_data.json").read_text()),
        }
        for path in game_files
    ]
