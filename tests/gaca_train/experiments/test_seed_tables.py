"""The quickstart's seed tables: the sweep's table, and what a single run may say about itself against it."""

from __future__ import annotations

import json

import pytest
import torch

from gaca_train.experiments import quickstart, seed_tables

AVX512 = {"cpu": "AMD EPYC", "cpu_capability": "AVX512", "threads": 2, "versions": {"torch": "2.13.0"}}
AVX2 = {**AVX512, "cpu_capability": "AVX2"}


def test_mean_ci_is_the_student_t_interval():
    # values 0.1, 0.2, 0.3: mean 0.2, sd 0.1, t(2 dof) = 4.303 -> half-width 4.303 * 0.1 / sqrt(3) = 0.2484
    mean, half = seed_tables.mean_ci([0.1, 0.2, 0.3])
    assert mean == pytest.approx(0.2) and half == pytest.approx(0.24844, abs=1e-4)
    assert seed_tables.mean_ci([0.4]) == (0.4, 0.0)


def test_machine_names_what_a_runs_digits_depend_on():
    m = seed_tables.machine()
    assert m["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert m["threads"] == torch.get_num_threads()
    assert m["versions"]["torch"] == torch.__version__ and set(m["versions"]) >= {"transformers", "trl"}


def _sweep(tmp_path, monkeypatch, fingerprint) -> dict:
    results = {0: (0.1, 0.3), 1: (0.2, 0.3), 2: (0.1, 0.4)}  # seed -> (before, after)
    calls = []

    def fake_main(argv):
        seed = int(argv[argv.index("--seed") + 1])
        calls.append(argv)
        before, after = results[seed]
        settings = {"env": "alfworld", "iterations": 30}
        return {"before": {"success_rate": before, "episodes": 256}, "after": {"success_rate": after},
                "seconds": 10.0, "settings": settings, "machine": fingerprint}  # fmt: skip

    monkeypatch.setattr(quickstart, "main", fake_main)
    table = quickstart.sweep(["--iterations", "30"], [0, 1, 2], tmp_path)
    assert [c[-1] for c in calls] == [str(tmp_path / f"seed{s}") for s in (0, 1, 2)]
    return table


def test_seed_sweep_writes_a_paired_table_with_its_machine(tmp_path, monkeypatch):
    table = _sweep(tmp_path, monkeypatch, AVX512)
    assert table["gain"]["mean"] == pytest.approx(0.2) and table["gain"]["min"] == pytest.approx(0.1)
    assert table["gain"]["max"] == pytest.approx(0.3) and table["before"]["mean"] == pytest.approx(0.4 / 3)
    assert table["machine"] == AVX512
    assert json.loads((tmp_path / "seeds.json").read_text()) == table
    md = (tmp_path / "seeds.md").read_text()
    assert "| 2 | 0.100 | 0.400 | +0.300 |" in md and "+0.200 ± " in md
    assert "(256 valid_seen episodes per measurement; CPU AMD EPYC, capability AVX512, 2 threads.)" in md


def _run(before: float, after: float, seed: int, fingerprint: dict, settings: dict) -> dict:
    return {"before": {"success_rate": before}, "after": {"success_rate": after}, "seed": seed,
            "settings": settings, "machine": fingerprint}  # fmt: skip


def test_a_run_says_it_repeats_a_row_only_on_the_tables_machine_and_with_the_same_digits(tmp_path, monkeypatch):
    table = _sweep(tmp_path, monkeypatch, AVX512)
    settings = table["settings"]
    compare = lambda run: seed_tables.compare_with_reference(run, [table])  # noqa: E731
    same = compare(_run(0.2, 0.3, 1, AVX512, settings))
    assert "reference (AVX512 kernels), seeds 0-2" in same and "this run's +0.100 is within that range" in same
    assert "its seed 1 row 0.200 -> 0.300, this run 0.200 -> 0.300: the same digits" in same
    other = compare(_run(0.1, 0.1, 1, AVX512, settings))
    assert "this run's +0.000 is outside that range" in other and "other digits" in other
    assert "this seed is not in it" in compare(_run(0.1, 0.3, 7, AVX512, settings))
    threads = compare(_run(0.2, 0.3, 1, {**AVX512, "threads": 1}, settings))
    assert "the table's threads differ from this run's: expect the table's spread, not its digits" in threads
    kernels = compare(_run(0.2, 0.3, 1, AVX2, settings))
    assert "capability is AVX2, and no table was built with it" in kernels and "the same digits" not in kernels
    assert "settings differ" in compare(_run(0.2, 0.3, 1, AVX512, {"env": "alfworld", "iterations": 5}))
    assert "no reference seed table" in seed_tables.compare_with_reference(_run(0.2, 0.3, 1, AVX512, settings), [])


def test_a_run_is_compared_with_the_table_of_its_own_capability(tmp_path, monkeypatch):
    wide = _sweep(tmp_path / "avx512", monkeypatch, AVX512)
    narrow = {**_sweep(tmp_path / "avx2", monkeypatch, AVX2)}
    narrow["runs"] = [{**r, "after": r["after"] + 0.1} for r in narrow["runs"]]
    narrow = seed_tables.seed_table(narrow["runs"], narrow["settings"], 256, AVX2)
    run = _run(0.2, 0.4, 1, AVX2, wide["settings"])
    note = seed_tables.compare_with_reference(run, [wide, narrow])
    assert "reference (AVX2 kernels)" in note and "range +0.200 to +0.400" in note and "the same digits" in note
    assert "reference (AVX512 kernels)" in seed_tables.compare_with_reference(
        {**run, "machine": AVX512}, [narrow, wide]
    )


def test_the_shipped_tables_each_hold_their_machine_and_a_clear_gain():
    tables = seed_tables.reference_tables()
    assert {t["machine"]["cpu_capability"] for t in tables} == {p.stem.upper() for p in
                                                                seed_tables.REFERENCE_DIR.glob("*.json")}  # fmt: skip
    for table in tables:
        assert table["machine"]["threads"] == 2 and len(table["runs"]) == 5  # as `make demo` runs, seeds 0-4
        assert table["gain"]["mean"] >= 0.10 and table["gain"]["min"] >= 0.09
