"""Baseline policies of WebShop and the difficulty benchmark (scripts/bench_webshop.py --baselines)."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import gaca_envs  # noqa: F401
from gaca_envs.webshop import bench
from gaca_envs.webshop.baselines import (
    Episode,
    make_policy,
    named_options,
    price_bound,
    results,
    run_policy,
    summarize,
)
from webshop_server.expert import oracle_actions


@pytest.fixture
def env(app):
    e = gym.make("GACA-WebShop-v0", app=app, split="test")
    yield e
    e.close()


def test_the_rule_searches_the_instruction_clicks_the_first_result_and_buys(env, shop):
    (episode,) = run_policy(env, "rule", [7])
    goal = shop.goals[7]
    first = shop.search(tuple(goal["instruction_text"].lower().split()))[0]["asin"].lower()
    assert episode.actions == [f"search[{goal['instruction_text']}]", f"click[{first}]", "click[buy now]"]
    assert episode.score == shop.score(goal, first.upper(), {})[0]


def test_rule_options_clicks_every_option_value_the_instruction_names(env, shop):
    for task in range(0, 40, 7):
        (episode,) = run_policy(env, "rule_options", [task])
        asin = episode.actions[1][6:-1].upper()
        product, text = shop.catalog.by_asin[asin], shop.goals[task]["instruction_text"]
        offered = [v for vs in product["options"].values() for v in vs]
        clicked = [a[6:-1] for a in episode.actions[2:-1]]
        assert sorted(clicked) == sorted(named_options(text, offered))
        assert all(v in text for v in clicked)


def test_named_options_clicks_the_longer_of_two_nested_values_last():
    assert named_options("a shirt in size: x-large, color: red", ["large", "x-large", "red", "buy now"]) == [
        "red", "large", "x-large"
    ]  # fmt: skip
    assert named_options("a shirt, color: reddish", ["red"]) == []


def test_results_and_price_bound_read_what_the_page_shows(env):
    obs, info = env.reset(options={"task_id": 3})
    obs, _, _, _, info = env.step(f"search[{info['task']}]")
    listed = results(obs, [a[6:-1] for a in info["admissible_actions"] if a.startswith("click[")])
    assert len(listed) == 10 and all(price is not None and title for _, title, price in listed)
    assert price_bound("x, and price lower than 40.00 dollars") == 40.0 and price_bound("no bound") is None


def test_title_overlap_picks_the_listed_title_sharing_most_words_within_the_bound(env, shop):
    from gaca_envs.webshop.baselines import _words

    for task in (2, 11):
        (episode,) = run_policy(env, "title_overlap", [task])
        goal = shop.goals[task]
        hits = shop.search(tuple(goal["instruction_text"].lower().split()))[:10]
        ok = [p for p in hits if shop.catalog.prices[p["asin"]] <= goal["price_upper"]] or list(hits)
        wanted = _words(goal["instruction_text"])
        best = max(len(_words(p["Title"]) & wanted) for p in ok)
        chosen = shop.catalog.by_asin[episode.actions[1][6:-1].upper()]
        assert len(_words(chosen["Title"]) & wanted) == best


def test_two_pages_goes_back_to_a_first_page_choice(env):
    eps = run_policy(env, "title_overlap_2pages", range(30))
    assert all(e.actions[1] == "click[next >]" for e in eps)
    assert any(e.actions[2] == "click[< prev]" for e in eps)


def test_random_policy_draws_from_its_seed_and_clicks_only_admissible_actions(env):
    a, b = run_policy(env, "random", [1, 2], seed=3), run_policy(env, "random", [2], seed=3)
    assert a[1].actions == b[0].actions
    assert run_policy(env, "random", [2], seed=4)[0].actions != b[0].actions
    assert all(e.steps <= 15 for e in a)


def test_the_expert_wins_and_summaries_give_wilson_and_normal_intervals(app, shop):
    env = gym.make("GACA-WebShop-v0", app=app, split="test", expert=True)
    episodes = run_policy(env, "expert", range(5))
    assert all(e.won and e.score == 1.0 for e in episodes)
    assert [e.actions for e in episodes] == [oracle_actions(shop, n) for n in range(5)]
    s = summarize([Episode("a", 1.0, True, 3), Episode("b", 0.5, False, 5)])
    assert s["score"] == 75.0 and s["success_rate"] == 0.5 and s["mean_steps"] == 4
    assert s["score_ci"][0] < 75 < s["score_ci"][1] and 0.05 < s["success_ci"][0] < 0.5 < s["success_ci"][1] < 0.95
    with pytest.raises(ValueError, match="expert=True"):
        make_policy("expert").act("", {"admissible_actions": []})
    with pytest.raises(ValueError, match="policy must be one of"):
        make_policy("greedy")


def test_the_baselines_refuse_an_env_without_text_observations(app):
    env = gym.make("GACA-WebShop-v0", app=app, observation_mode="html")
    with pytest.raises(ValueError, match="observation_mode='text'"):
        run_policy(env, "rule", [0])


def test_bench_baselines_prints_the_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "table.json"
    bench.main(["--baselines", "--env", "GACA-WebShop-v1", "--n-products", "400", "--split", "all", "--goals", "12",
                "--policies", "rule,rule_options,expert", "--json", str(out),
                "--shop-config", json.dumps({"cache_dir": str(tmp_path)})])  # fmt: skip
    text = capsys.readouterr().out
    assert "embedded-v1:n=400" in text and "| rule_options |" in text and "search p50" in text
    assert "goals with a near-duplicate that fails them" in text
    (data,) = json.loads(out.read_text())
    assert data["figures"]["goals"] == 12 and data["table"]["expert"]["success_rate"] == 1.0
    assert 0 < data["figures"]["near_duplicate_traps"] <= 12
    assert set(data["table"]) == {"rule", "rule_options", "expert"}
    with pytest.raises(SystemExit, match="unknown greedy"):
        bench.main(["--baselines", "--policies", "rule,greedy"])


def test_v1_plays_the_hard_shop_by_default_and_reads_shop_config_over_it(tmp_path):
    config = {"n_products": 300, "cache_dir": str(tmp_path)}
    env = gym.make("GACA-WebShop-v1", shop_config=config, split="all", expert=True)
    shop = env.unwrapped.backend.app.extensions["webshop"]
    assert shop.catalog.source == "embedded-v1:n=300,seed=0" and len(shop.catalog) == 300
    obs, info = env.reset(options={"task_id": 0})
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(info["expert_action"])
        done = terminated or truncated
    assert info["won"] and reward == 10.0
