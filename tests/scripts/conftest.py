from __future__ import annotations

import pytest


@pytest.fixture
def train_parser():
    """scripts/train.py's CLI parser, new per test: TrlParser keeps a YAML's values as defaults for later parses."""
    from gaca_train.experiments.train import make_parser  # imports TRL: only for the tests that ask

    return make_parser()
