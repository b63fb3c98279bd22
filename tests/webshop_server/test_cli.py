"""The `webshop-server` command line."""

from __future__ import annotations

import dataclasses
import json

import pytest

from webshop_server.cli import build_parser, config_from_args, main
from webshop_server.shop import ShopConfig


def test_defaults_are_safe():
    args = build_parser().parse_args([])
    assert args.host == "127.0.0.1" and args.port == 3000 and args.workers == 1
    assert args.catalog == "embedded" and args.access_log is False


def test_every_shop_config_field_has_an_option_with_its_default():
    parser = build_parser()
    options = {action.dest: action for action in parser._actions}
    for f in dataclasses.fields(ShopConfig):
        assert f"--{f.name.replace('_', '-')}" in options[f.name].option_strings, f.name
        assert options[f.name].default == f.default, f.name
        assert f.metadata["help"] in options[f.name].help, f.name
    assert config_from_args(parser.parse_args([])) == ShopConfig()


def test_options_reach_the_config(tmp_path):
    argv = ["--catalog", str(tmp_path), "--n-products", "7", "--seed", "3", "--goals-file", "g.json",
            "--cache-dir", "", "--session-ttl-s", "5.5", "--max-sessions", "9", "--max-query-chars", "11",
            "--max-request-bytes", "1234", "--max-url-chars", "99", "--show-attrs",
            "--title-nouns", "fallback"]  # fmt: skip
    config = config_from_args(build_parser().parse_args(argv))
    assert config == ShopConfig(
        catalog=str(tmp_path), n_products=7, seed=3, goals_file="g.json", cache_dir="", session_ttl_s=5.5,
        max_sessions=9, max_query_chars=11, max_request_bytes=1234, max_url_chars=99, show_attrs=True,
        title_nouns="fallback",
    )  # fmt: skip
    assert set(dataclasses.asdict(config)) == {f.name for f in dataclasses.fields(ShopConfig)}
    # The older spelling --session-ttl keeps working; a bool field can be switched off again.
    args = build_parser().parse_args(["--session-ttl", "7", "--show-attrs", "--no-show-attrs"])
    assert config_from_args(args).session_ttl_s == 7.0 and config_from_args(args).show_attrs is False


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-sessions", "0"], "max_sessions must be >= 1, got 0"),
        (["--title-nouns", "spacy"], "title_nouns must be 'auto' or 'fallback', got 'spacy'"),
    ],
)
def test_bad_config_values_exit_with_the_configs_message(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_write_goals_publishes_the_goal_list(tmp_path, shop):
    path = tmp_path / "goals.json"
    assert main(["--write-goals", str(path), "--cache-dir", str(tmp_path / "cache")]) == 0
    data = json.loads(path.read_text())
    assert data["source"] == "embedded:n=1000,seed=0"
    assert [g["instruction_text"] for g in data["goals"]] == [g["instruction_text"] for g in shop.goals]
    assert data["splits"]["test"] == [0, 500]


def test_bad_arguments_exit_with_a_message(tmp_path, capsys):
    assert main(["--catalog", str(tmp_path / "missing")]) == 2
    assert "catalog must be one of 'embedded', 'embedded-v1' or an existing folder" in capsys.readouterr().err
    assert main(["--workers", "0"]) == 2
    assert "--workers must be >= 1" in capsys.readouterr().err
    assert main(["--catalog", str(tmp_path), "--write-goals", str(tmp_path / "g.json")]) == 2
    assert "no file matching 'items_shuffle*.json'" in capsys.readouterr().err


def test_original_data_folder_is_served(original_folder, tmp_path):
    from webshop_server import create_app

    path = tmp_path / "goals.json"
    args = ["--catalog", str(original_folder), "--cache-dir", str(tmp_path / "c"), "--write-goals", str(path)]
    assert main(args) == 0
    goals = json.loads(path.read_text())["goals"]
    client = create_app({"catalog": str(original_folder), "cache_dir": str(tmp_path / "c")}).test_client()
    html = client.get("/fixed_0").get_data(as_text=True)
    assert goals[0]["instruction_text"] in html
    results = client.post("/fixed_0", data={"search_query": "argan hair oil"}, follow_redirects=True)
    assert "B00000000A" in results.get_data(as_text=True)


def test_write_goals_publishes_the_hard_shops_goals(tmp_path):
    path = tmp_path / "goals.json"
    args = ["--catalog", "embedded-v1", "--n-products", "200", "--cache-dir", str(tmp_path / "c"), "--write-goals"]
    assert main([*args, str(path)]) == 0
    data = json.loads(path.read_text())
    assert data["source"] == "embedded-v1:n=200,seed=0" and data["splits"]["test"] == [0, 500]
    assert data["goals"] and all(g["attributes"] and g["instruction_text"] for g in data["goals"])
