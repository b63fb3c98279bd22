from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def train_parser():
    """scripts/train.py's CLI parser, new per test: TrlParser keeps a YAML's values as defaults for later parses."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import train
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return train.make_parser()
