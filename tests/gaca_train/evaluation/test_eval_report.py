"""The evaluation report's statistics: intervals clustered by task over repeats, pass@k, comparison, task draw."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from gaca_train.evaluation.play import sample_tasks
from gaca_train.evaluation.report import compare, compare_markdown, load_run, markdown, pass_at_k, summarise, wilson


def _episodes(outcomes: dict[str, list[int]], task_type=None) -> list[dict]:
    """Records of tasks -> won (1) or lost (0) per repeat."""
    return [
        {"task_id": t, "repeat": r, "won": bool(w), "score": float(w), "length": 4 - 2 * w, "invalid": 1 - w,
         "malformed": 0, "task_type": task_type(t) if task_type else None}
        for t, wins in outcomes.items() for r, w in enumerate(wins)
    ]  # fmt: skip


def test_repeats_of_a_task_are_not_independent_evidence():
    # 20 tasks, 5 identical repeats each: 8 tasks always won. The evidence is 20 tasks, not 100 episodes.
    outcomes = {f"t{k}": [int(k < 8)] * 5 for k in range(20)}
    summary = summarise(_episodes(outcomes))
    low, high = summary["ci95"]["success_rate"]
    assert summary["success_rate"] == 0.4 and summary["episodes"] == 100 and summary["tasks"] == 20
    # Design effect 5 * 20/19 (the cluster variance's m - 1): Wilson on 19 effective episodes, 7.6 won.
    assert (low, high) == pytest.approx(wilson(0.4 * 19, 19))
    assert high - low == pytest.approx(0.4032, abs=1e-3)
    per_episode = wilson(40, 100)
    assert high - low > 2 * (per_episode[1] - per_episode[0])  # 0.19 wide as if 100 independent episodes
    # Score: the t interval over the 20 task means (0.4 +- t(19) sd / sqrt(20)).
    sd = math.sqrt(sum((float(k < 8) - 0.4) ** 2 for k in range(20)) / 19)
    assert summary["ci95"]["score"] == pytest.approx(
        (0.4 - 2.093 * sd / math.sqrt(20), 0.4 + 2.093 * sd / math.sqrt(20))
    )
    # One episode per task: plain Wilson over episodes, as before.
    single = summarise(_episodes({f"t{k}": [int(k < 8)] for k in range(20)}))
    assert single["ci95"]["success_rate"] == pytest.approx(wilson(8, 20)) and "at_k" not in single


def test_pass_at_k_and_mean_at_k():
    # pass@2 of 4 episodes with 1 won: 1 - C(3, 2) / C(4, 2) = 1 - 3/6 = 0.5
    assert pass_at_k(4, 1, 2) == 0.5 and pass_at_k(4, 0, 3) == 0.0 and pass_at_k(4, 3, 2) == 1.0
    summary = summarise(_episodes({"a": [1, 0, 0, 0], "b": [1, 1, 0, 0], "c": [0, 0, 0, 0]}))
    at_k = summary["at_k"]
    assert list(at_k) == ["pass@1", "pass@2", "pass@4", "mean@4"]
    assert at_k["pass@1"]["value"] == pytest.approx(0.25)  # (1/4 + 2/4 + 0) / 3
    assert at_k["pass@2"]["value"] == pytest.approx((0.5 + (1 - 1 / 6) + 0) / 3)
    assert at_k["pass@4"]["value"] == pytest.approx(2 / 3)
    assert at_k["mean@4"]["value"] == pytest.approx(0.25) and at_k["mean@4"]["ci95"][0] == 0.0
    table = markdown("p", summary)
    assert "| pass@1 | pass@2 | pass@4 | mean@4 |" in table and "clustered by task (3 tasks)" in table


def test_task_type_rows_are_clustered_by_task_too():
    outcomes = {f"{kind}-{k}": [int(k % 2 == 0)] * 3 for kind in ("heat", "cool") for k in range(6)}
    summary = summarise(_episodes(outcomes, task_type=lambda t: t.split("-")[0]))
    heat = summary["by_task_type"]["heat"]
    assert heat["episodes"] == 18 and heat["tasks"] == 6
    assert heat["ci95"]["success_rate"] == pytest.approx(wilson(2.5, 5))  # deff 3 * 6/5: 5 effective episodes
    assert "| heat | 18 | 0.500 [" in markdown("x", summary)


def test_paired_comparison_on_shared_tasks(tmp_path):
    a = _episodes({"t0": [1, 1], "t1": [1, 0], "t2": [0, 0], "t3": [1, 1], "only-a": [1]})
    b = _episodes({"t0": [1, 0], "t1": [0, 0], "t2": [0, 0], "t3": [1, 1], "only-b": [0]})
    result = compare(a, b)
    # per-task differences: 0.5, 0.5, 0, 0 -> mean 0.25, sd 0.2887, t(3) = 3.182: 0.25 +- 0.4593
    assert result["tasks"] == 4 and result["only_a"] == 1 and result["only_b"] == 1
    assert result["success_rate"]["a"] == pytest.approx(0.625) and result["success_rate"]["b"] == pytest.approx(0.375)
    assert result["success_rate"]["diff"] == pytest.approx(0.25)
    assert result["success_rate"]["ci95"] == pytest.approx((0.25 - 0.4593, 0.25 + 0.4593), abs=1e-4)
    text = compare_markdown("gaca", "grpo", result)
    assert "| success | 0.625 | 0.375 | 0.250 [-0.209, 0.709] |" in text
    # The CLI reads two runs' outputs (a .json report or a .jsonl log, by prefix).
    (tmp_path / "a.json").write_text(json.dumps({"settings": {"policy": "gaca"}, "episodes": a}))
    lines = [json.dumps({"run": {"policy": "grpo"}})] + [json.dumps(r) for r in b]
    (tmp_path / "b.jsonl").write_text("\n".join(lines) + "\n")
    assert load_run(tmp_path / "b")[1] == b
    from gaca_train.experiments import evaluate

    assert evaluate.main(["--compare", str(tmp_path / "a"), str(tmp_path / "b")]) == result
    with pytest.raises(SystemExit, match=r"--compare .*nowhere: no such run"):
        evaluate.main(["--compare", str(tmp_path / "a"), str(tmp_path / "nowhere")])


def test_num_episodes_draws_across_task_types():
    # ALFWorld's valid_unseen sizes per type, listed type by type as the split lists its games.
    sizes = {"pick_and_place_simple": 24, "look_at_obj_in_light": 18, "pick_clean_then_place_in_recep": 31,
             "pick_heat_then_place_in_recep": 23, "pick_cool_then_place_in_recep": 21,
             "pick_two_obj_and_place": 17}  # fmt: skip
    ids = [f"valid_unseen/{kind}-{k}/trial" for kind, n in sizes.items() for k in range(n)]
    types = {t: t.split("/")[1].split("-")[0] for t in ids}
    assert len({types[t] for t in ids[:40]}) == 2  # the first 40 ids: two of six types
    drawn = sample_tasks(ids, 40, types, seed=0)
    counts = Counter(types[t] for t in drawn)
    assert len(drawn) == 40 and len(counts) == 6
    assert all(abs(counts[k] - 40 * n / len(ids)) < 1 for k, n in sizes.items())  # proportional shares
    assert drawn == [t for t in ids if t in set(drawn)]  # in the split's order
    assert sample_tasks(ids, 40, types, seed=0) == drawn and sample_tasks(ids, 40, types, seed=1) != drawn
    assert sample_tasks(ids, 500, types) == ids
    untyped = sample_tasks([f"train-{k}" for k in range(100)], 10, None, seed=0)
    assert len(untyped) == 10 and untyped != [f"train-{k}" for k in range(10)]
