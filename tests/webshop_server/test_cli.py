"""The `webshop-server` command line."""

from __future__ import annotations

import json

from webshop_server.cli import build_parser, main


def test_defaults_are_safe():
    args = build_parser().parse_args([])
    assert args.host == "127.0.0.1" and args.port == 3000 and args.workers == 1
    assert args.catalog == "embedded" and args.access_log is False


def test_write_goals_publishes_the_goal_list(tmp_path, shop):
    path = tmp_path / "goals.json"
    assert main(["--write-goals", str(path), "--cache-dir", str(tmp_path / "cache")]) == 0
    data = json.loads(path.read_text())
    assert data["source"] == "embedded:n=1000,seed=0"
    assert [g["instruction_text"] for g in data["goals"]] == [g["instruction_text"] for g in shop.goals]
    assert data["splits"]["test"] == [0, 500]


def test_bad_arguments_exit_with_a_message(tmp_path, capsys):
    assert main(["--catalog", str(tmp_path / "missing")]) == 2
    assert "catalog must be 'embedded' or an existing folder" in capsys.readouterr().err
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
