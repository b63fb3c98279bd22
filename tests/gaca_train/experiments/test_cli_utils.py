"""The command-line helpers every script shares (gaca_train.experiments.cli_utils): deprecated aliases, seed lists."""

from __future__ import annotations

import argparse

import pytest

from gaca_train.experiments.cli_utils import add_deprecated_alias, parse_seeds


def test_parse_seeds_reads_ranges_lists_and_one_seed():
    assert parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert parse_seeds("0,2,7") == [0, 2, 7]
    assert parse_seeds("3") == [3]
    assert parse_seeds("0-2, 7,1") == [0, 1, 2, 7]  # in the order written, each once
    assert parse_seeds("5-5") == [5]


@pytest.mark.parametrize("text", ["", "a", "0-", "-3", "1.5", "0-4-6", "0,,2", "seeds"])
def test_parse_seeds_names_the_accepted_forms_for_bad_input(text):
    with pytest.raises(ValueError, match=r"--seeds takes a range 0-4, a list 0,2,7 or one seed 3"):
        parse_seeds(text)


def test_parse_seeds_refuses_a_range_that_goes_down():
    with pytest.raises(ValueError, match="--seeds range '4-0' must go up from a non-negative seed, as in 0-4"):
        parse_seeds("4-0")


def test_a_deprecated_alias_stores_the_new_option_and_warns():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-tasks", type=int, choices=(1, 2, 3), default=2, help="tasks")
    add_deprecated_alias(parser, "--num-episodes", "--max-tasks")
    assert parser.parse_args([]).max_tasks == 2  # the alias has no default of its own
    assert parser.parse_args(["--max-tasks", "3"]).max_tasks == 3
    with pytest.warns(FutureWarning, match="--num-episodes is deprecated and will be removed in the next release; "
                      "use --max-tasks"):  # fmt: skip
        assert parser.parse_args(["--num-episodes", "1"]).max_tasks == 1
    with pytest.raises(SystemExit), pytest.warns(FutureWarning):
        parser.parse_args(["--num-episodes", "9"])  # the new option's checks apply to the alias
    assert "deprecated alias of --max-tasks" in parser.format_help()
    with pytest.raises(ValueError, match="the parser has no option --nope"):
        add_deprecated_alias(parser, "--old", "--nope")
