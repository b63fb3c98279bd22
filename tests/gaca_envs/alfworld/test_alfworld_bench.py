from __future__ import annotations

from gaca_envs.alfworld import bench, data


def test_first_use_benchmark_fills_every_split_of_an_empty_cache(monkeypatch, capsys):
    # ALFWorld's 3,827 games take minutes; one game per split shows the path and the report.
    for split in data.DEFAULT_CACHE_GAMES:
        monkeypatch.setitem(data.DEFAULT_CACHE_GAMES, split, 1)
    bench.main(["--first-use", "--workers", "1"])
    out = capsys.readouterr().out
    for split in ("train", "valid_seen", "valid_unseen"):
        assert f"first use, {split}: 1 games in " in out
    assert "first use, all splits: 3 games in " in out and "(1 worker(s))" in out
