"""Baseline policies of WebShop, and the difficulty benchmark that plays them on a shop's goals.

Every policy but the expert sees only what an agent sees: the ``text`` observation and
``info["admissible_actions"]``. Each is a class with ``reset(instruction, rng)`` and
``act(observation, info) -> action``:

- ``random``: searches a few words drawn from the instruction (1-4), then clicks uniformly among
  the page's admissible clicks; on the start page again it searches again;
- ``rule``: the WebShop paper's rule baseline: search the instruction verbatim, click the first
  result, buy, choosing no options;
- ``rule_options``: the rule, also clicking every option value the instruction names;
- ``title_overlap``: search the instruction, click the result on the first page whose title
  shares the most words with the instruction (ties: the higher result), skipping results priced
  over the instruction's bound where another is not, click the options the instruction names,
  buy;
- ``title_overlap_2pages``: the same over the first two results pages;
- ``reader``: a shopper that reads (:class:`ReaderPolicy`): search the instruction without its
  price clause, open up to three affordable results, read each one's options and Features page,
  and buy the first that offers what the instruction asks (else the best one read);
- ``expert``: the shop's oracle (``info["expert_action"]``; the env needs ``expert=True``).

:func:`run_policy` plays one policy on a list of goals; :func:`difficulty_table` plays them all
and reports score (mean ``get_reward`` x 100) and success (score 1.0), each with a 95% interval.
The command is ``scripts/bench_webshop.py --baselines``.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "POLICIES",
    "Episode",
    "difficulty_table",
    "make_policy",
    "run_policy",
    "summarize",
    "table_markdown",
]

SEP = " [SEP] "
BUTTONS = frozenset(
    {"back to search", "< prev", "next >", "description", "features", "reviews", "attributes", "buy now", "search"}
)
_ASIN = re.compile(r"b[0-9a-z]{9}")
_PRICE = re.compile(r"\$(\d+(?:\.\d+)?)")
_BOUND = re.compile(r"price lower than (\d+(?:\.\d+)?) dollars")
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    """a an and are as at be by for from i in is it me my of on or that the this to want with you need would like
    find looking can buy price lower than dollars""".split()  # noqa: SIM905 - a word list reads best as text
)


def _clicks(info: dict) -> list[str]:
    """The page's admissible clicks, as their targets (``"buy now"``, an asin, an option value)."""
    return [a[6:-1] for a in info["admissible_actions"] if a.startswith("click[")]


def search_action(text: str) -> str:
    """``search[text]`` as the text env accepts it: at most 256 characters, cut at a word."""
    text = re.sub(r"[<>\[\]{}]", " ", text).strip()
    if len(text) > 256:
        text = text[:256].rsplit(" ", 1)[0]
    return f"search[{text}]"


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def named_options(instruction: str, clicks: Sequence[str]) -> list[str]:
    """The option values on an item page that the instruction names, shortest first.

    A value is named when it appears in the instruction as whole words. Shortest first, so that
    where ``large`` and ``x-large`` are both named the longer, clicked last, is the one chosen.
    """
    text = instruction.lower()
    values = [c for c in clicks if c not in BUTTONS and not _ASIN.fullmatch(c)]
    named = [v for v in values if re.search(rf"(?<![a-z0-9]){re.escape(v)}(?![a-z0-9])", text)]
    return sorted(named, key=len)


def results(observation: str, clicks: Sequence[str]) -> list[tuple[str, str, float | None]]:
    """The products a results page lists: ``(asin, title, price)`` in page order, from the ``text`` observation."""
    pieces = observation.split(SEP)
    listed = set(clicks)
    out = []
    for i, piece in enumerate(pieces):
        key = piece.lower()
        if _ASIN.fullmatch(key) and key in listed:
            title = pieces[i + 1] if i + 1 < len(pieces) else ""
            price = _PRICE.search(pieces[i + 2]) if i + 2 < len(pieces) else None
            out.append((key, title, float(price.group(1)) if price else None))
    return out


def highest_prices(observation: str) -> dict[str, float]:
    """Each listed product's highest price on a results page (the top of a price range)."""
    pieces = observation.split(SEP)
    return {
        piece.lower(): max(float(p) for p in _PRICE.findall(pieces[i + 2]))
        for i, piece in enumerate(pieces[:-2])
        if _ASIN.fullmatch(piece.lower()) and _PRICE.search(pieces[i + 2])
    }


def price_bound(instruction: str) -> float | None:
    """The bound of ``"price lower than X dollars"`` in an instruction, if it states one."""
    m = _BOUND.search(instruction.lower())
    return float(m.group(1)) if m else None


class Policy:
    """A baseline policy; ``reset`` at each episode's start, then ``act`` on each observation."""

    name = ""
    needs_expert = False

    def reset(self, instruction: str, rng: random.Random) -> None:
        self.instruction = instruction
        self.rng = rng
        self.pending: list[str] = []

    def act(self, observation: str, info: dict) -> str:
        raise NotImplementedError


class RandomPolicy(Policy):
    """Searches 1-4 words of the instruction, then clicks uniformly among the admissible clicks."""

    name = "random"

    def act(self, observation: str, info: dict) -> str:
        if info["page"] == "start":
            words = self.instruction.split()
            k = self.rng.randint(1, min(4, len(words)))
            return search_action(" ".join(self.rng.sample(words, k)))
        clicks = _clicks(info)
        return f"click[{self.rng.choice(clicks)}]"


class RulePolicy(Policy):
    """The WebShop paper's rule baseline; with ``options=True`` it also clicks the options the instruction names."""

    def __init__(self, options: bool = False) -> None:
        self.options = options
        self.name = "rule_options" if options else "rule"

    def choose(self, observation: str, info: dict) -> str | None:
        """The result to click on a results page (None: look at the next page first)."""
        listed = results(observation, _clicks(info))
        return listed[0][0] if listed else None

    def act(self, observation: str, info: dict) -> str:
        if self.pending:
            return self.pending.pop(0)
        page = info["page"]
        if page == "start":
            return search_action(self.instruction)
        if page == "search_results":
            asin = self.choose(observation, info)
            if asin is None:
                return "click[next >]" if "next >" in _clicks(info) else "click[back to search]"
            if asin not in _clicks(info):  # chosen from a page seen before: go back to it
                return "click[< prev]"
            return f"click[{asin}]"
        if page == "item_page":
            if self.options:
                self.pending = [f"click[{v}]" for v in named_options(self.instruction, _clicks(info))]
            self.pending.append("click[buy now]")
            return self.pending.pop(0)
        return "click[< prev]"


class TitleOverlapPolicy(RulePolicy):
    """Clicks the listed product whose title shares the most words with the instruction, on 1 or 2 pages."""

    def __init__(self, pages: int = 1) -> None:
        super().__init__(options=True)
        self.pages = pages
        self.name = "title_overlap" if pages == 1 else f"title_overlap_{pages}pages"

    def reset(self, instruction: str, rng: random.Random) -> None:
        super().reset(instruction, rng)
        self.seen: list[tuple[str, str, float | None]] = []
        self.pages_seen = 0
        self.best: str | None = None

    def choose(self, observation: str, info: dict) -> str | None:
        if self.best is not None:
            return self.best
        listed = results(observation, _clicks(info))
        self.seen += listed
        self.pages_seen += 1
        if self.pages_seen < self.pages and "next >" in _clicks(info):
            return None
        if not self.seen:
            return None
        wanted, bound = _words(self.instruction), price_bound(self.instruction)
        affordable = [r for r in self.seen if bound is None or r[2] is None or r[2] <= bound] or self.seen
        self.best = max(affordable, key=lambda r: len(_words(r[1]) & wanted))[0]  # max keeps the first of ties
        return self.best


# Words by which an instruction asks for an option of a group whose name holds the key.
_ASKS_OPTION = {"color": ("color", "colour"), "size": ("size",), "flavor": ("flavor", "flavored"),
                "scent": ("scent", "scented")}  # fmt: skip


def _attribute_forms() -> dict[str, str]:
    """Every wording of every feature the shop's products have (a thesaurus): form -> the feature."""
    from webshop_server import vocab
    from webshop_server.goals import attribute_forms

    features = {a for types in vocab.CATEGORIES.values() for t in types for a in t.attributes}
    features |= {a for attrs in vocab.CATEGORY_ATTRIBUTES_V1.values() for a in attrs}
    return {form: a for a in sorted(features) for form in attribute_forms(a)}


def _noun_forms() -> dict[str, str]:
    """Every name of every product type (the noun and its synonyms): name -> the noun titles carry."""
    from webshop_server import vocab

    nouns = {t.noun for types in vocab.CATEGORIES.values() for t in types}
    return {form: n for n in sorted(nouns) for form in (n, *vocab.NOUN_SYNONYMS.get(n, ()))}


def asked_features(instruction: str, forms: dict[str, str]) -> set[str]:
    """The features an instruction asks for, in their canonical wording, longest wording first."""
    text, found = f" {instruction.lower()} ", set()
    for form in sorted(forms, key=len, reverse=True):
        pattern = rf"(?<![a-z0-9-]){re.escape(form)}(?![a-z0-9-])"
        if re.search(pattern, text):
            found.add(forms[form])
            text = re.sub(pattern, " ", text)
    return found


def option_groups(observation: str, clicks: Sequence[str]) -> dict[str, list[str]]:
    """An item page's option groups, ``name -> values``, read from the ``text`` observation.

    A group is a piece that is not clickable (its name) followed by the clickable values under it.
    """
    pieces = observation.split(SEP)
    values = {c for c in clicks if c not in BUTTONS and not _ASIN.fullmatch(c)}
    groups: dict[str, list[str]] = {}
    name = None
    for piece in pieces:
        key = piece.lower()
        if key in values and name is not None:
            groups[name].append(key)
        elif key in BUTTONS or key.startswith(("instruction:", "price:", "rating:")) or key in values:
            name = None
        else:
            name = key
            groups[name] = []
    return {n: vs for n, vs in groups.items() if vs}


class ReaderPolicy(RulePolicy):
    """Reads candidates' options and features before it buys; sees only what an agent sees.

    It knows the shop's words as a shopper knows a language (a thesaurus: every wording of every
    feature, ``goals.attribute_forms``, and every name of every product type,
    ``vocab.NOUN_SYNONYMS``), so it reads an instruction's features and product type in their usual
    words. It searches the instruction without its price clause and opens the results whose whole
    price range fits the bound, those whose title names the type and more of the features first.
    A product passes when its title names the type, each option kind the instruction asks for
    (colour, size, flavour, scent) has a value the instruction names, and every asked feature
    shows on its title or its Features page (read only when the title does not show them all). It
    buys the first that passes; after ``tries`` reads, or when the 15 steps allow no more, it buys
    the best one read (options first, then fewest misses) where it can still reach it.

    Args:
        tries: candidates it reads at most.
        max_steps: the episode's step limit it plans within (the env's ``max_env_steps``).
    """

    name = "reader"

    def __init__(self, tries: int = 3, max_steps: int = 15) -> None:
        super().__init__(options=True)
        self.tries, self.max_steps = tries, max_steps
        self.forms, self.nouns = _attribute_forms(), _noun_forms()

    def reset(self, instruction: str, rng: random.Random) -> None:
        super().reset(instruction, rng)
        self.queue: list[str] | None = None  # candidates in the order it opens them
        self.titles: dict[str, str] = {}
        self.opened: list[str] = []
        self.reads: dict[str, tuple[bool, int]] = {}  # asin -> (options covered, features or type missing)
        self.target: str | None = None  # the product it has decided to buy
        self.groups: dict[str, list[str]] = {}
        self.steps = 0
        self.asked = asked_features(instruction, self.forms)
        self.noun = max(asked_features(instruction, self.nouns) or {""}, key=len)  # the product type asked for
        text = instruction.lower()
        self.asked_groups = {key for key, words in _ASKS_OPTION.items()
                             if any(re.search(rf"\b{w}\b", text) for w in words)}  # fmt: skip

    def choose(self, observation: str, info: dict) -> str | None:
        if self.queue is None:
            listed = results(observation, _clicks(info))
            wanted, bound = _words(_BOUND.sub(" ", self.instruction)), price_bound(self.instruction)
            high = highest_prices(observation)  # a range's price may be anywhere in it: its top must fit
            affordable = [r for r in listed if bound is None or high.get(r[0], 0.0) <= bound] or listed
            ranked = sorted(affordable, key=lambda r: (self.noun not in r[1].lower(),
                                                       -sum(f in r[1].lower() for f in self.asked),
                                                       -len(_words(r[1]) & wanted)))  # fmt: skip
            self.queue = [asin for asin, _, _ in ranked]  # sorted is stable: page order on ties
            self.titles = {asin: title for asin, title, _ in listed}
        if self.target is not None:
            return self.target
        left = [a for a in self.queue if a not in self.opened]
        return left[0] if left else None

    def _read(self, asin: str, features: str) -> tuple[bool, int]:
        """(whether the options asked for are offered, how many asked features or type words the page lacks)."""
        text = self.instruction.lower()
        covered = True
        for key in self.asked_groups:  # an option the instruction asks for needs a group with a value it names
            groups = [values for name, values in self.groups.items() if key in name]
            covered &= any(re.search(rf"(?<![a-z0-9]){re.escape(v)}(?![a-z0-9])", text) for vs in groups for v in vs)
        title = self.titles.get(asin, "").lower()
        shown = f"{title} {features}".lower()
        return covered, sum(feature not in shown for feature in self.asked) + (self.noun not in title)

    def _decide(self, asin: str) -> None:
        """After reading ``asin`` (on its Features page): buy it, read another, or buy the best one read."""
        covered, missing = self.reads[asin]
        if covered and missing == 0:
            self.target = asin
            return
        # Steps still to come, this one (back to the product) already counted in self.steps:
        buy_here = 1 + 2 + 1  # (on the next one's Features page) back to the product, two options at most, buy
        another = 1 + 1 + 1  # back to the results, open the next, its Features page
        if len(self.opened) < self.tries and self.steps + another + buy_here <= self.max_steps:
            return  # read the next candidate
        best = max(self.opened, key=lambda a: (self.reads[a][0], -self.reads[a][1], a == asin))
        back_to_best = 1 + 1 + 2 + 1  # back to the results, open the best, options, buy
        self.target = best if best == asin or self.steps + back_to_best <= self.max_steps else asin

    def act(self, observation: str, info: dict) -> str:
        self.steps += 1
        if self.pending:
            return self.pending.pop(0)
        page = info["page"]
        if page == "start":
            return search_action(_BOUND.sub("", self.instruction).strip(" ,"))
        if page == "search_results":
            asin = self.choose(observation, info)
            if asin is None:
                return "click[back to search]"
            if asin not in self.opened:
                self.opened.append(asin)
            return f"click[{asin}]"
        if page == "item_page":
            asin = self.opened[-1] if self.target is None else self.target
            if self.target is None and asin not in self.reads:
                self.groups = option_groups(observation, _clicks(info))
                covered, missing = self._read(asin, "")
                if covered and missing and "features" in _clicks(info):
                    return "click[features]"  # the title does not show everything: read the Features page
                self.reads[asin] = (covered, missing)
                self.steps -= 1  # deciding here, one step before a Features page would have
                self._decide(asin)
                self.steps += 1
            if self.target is None or self.target != asin:
                return "click[< prev]"
            self.pending = [f"click[{v}]" for v in named_options(self.instruction, _clicks(info))]
            self.pending.append("click[buy now]")
            return self.pending.pop(0)
        if page == "item_sub_page":
            asin = self.opened[-1]
            self.reads[asin] = self._read(asin, " ".join(observation.split(SEP)[4:]))
            self._decide(asin)
            return "click[< prev]"
        return "click[< prev]"


class ExpertPolicy(Policy):
    """The shop's oracle, read from ``info["expert_action"]`` (an env made with ``expert=True``)."""

    name = "expert"
    needs_expert = True

    def act(self, observation: str, info: dict) -> str:
        action = info.get("expert_action")
        if action is None:
            raise ValueError("the expert policy needs an env made with expert=True (info['expert_action'])")
        return action


POLICIES: dict[str, Callable[[], Policy]] = {
    "random": RandomPolicy,
    "rule": RulePolicy,
    "rule_options": lambda: RulePolicy(options=True),
    "title_overlap": TitleOverlapPolicy,
    "title_overlap_2pages": lambda: TitleOverlapPolicy(pages=2),
    "reader": ReaderPolicy,
    "expert": ExpertPolicy,
}


def make_policy(name: str) -> Policy:
    """A fresh policy by name (one of ``POLICIES``).

    Raises:
        ValueError: for an unknown name.
    """
    if name not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {name!r}")
    return POLICIES[name]()


@dataclass
class Episode:
    """One played goal: its task id, score in [0, 1], success, steps and actions."""

    task_id: str
    score: float
    won: bool
    steps: int
    actions: list[str] = field(default_factory=list)


def run_policy(env: Any, policy: Policy | str, task_ids: Sequence[Any], seed: int = 0) -> list[Episode]:
    """Plays ``policy`` once on each goal of ``task_ids`` in ``env`` (a WebShop env, ``text`` observations).

    The policy's random draws come from ``random.Random(f"{seed}:{task_id}")``, so each episode
    is the same whatever the order or subset of goals.
    """
    if isinstance(policy, str):
        policy = make_policy(policy)
    if getattr(env.unwrapped, "observation_mode", "text") != "text":
        raise ValueError("the baselines read the 'text' observation: make the env with observation_mode='text'")
    episodes = []
    for task_id in task_ids:
        obs, info = env.reset(options={"task_id": task_id})
        policy.reset(info["task"], random.Random(f"{seed}:{task_id}"))
        actions, score, won, done = [], 0.0, False, False
        while not done:
            action = policy.act(obs, info)
            actions.append(action)
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
            score, won = info["score"], info["won"]
        episodes.append(Episode(str(info["task_id"]), float(score), bool(won), len(actions), actions))
    return episodes


def _wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return 0.0, 0.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def summarize(episodes: Sequence[Episode]) -> dict:
    """Score (mean x 100, normal 95% interval) and success (rate, Wilson 95% interval) of played episodes."""
    n = len(episodes)
    scores = [e.score for e in episodes]
    mean = sum(scores) / n if n else 0.0
    sd = math.sqrt(sum((s - mean) ** 2 for s in scores) / (n - 1)) if n > 1 else 0.0
    half = 1.96 * sd / math.sqrt(n) if n else 0.0
    wins = sum(e.won for e in episodes)
    low, high = _wilson(wins, n)
    return {
        "episodes": n,
        "score": 100 * mean,
        "score_ci": [100 * (mean - half), 100 * (mean + half)],
        "success_rate": wins / n if n else 0.0,
        "success_ci": [low, high],
        "mean_steps": sum(e.steps for e in episodes) / n if n else 0.0,
    }


def difficulty_table(
    make_env: Callable[[bool], Any], task_ids: Sequence[Any], policies: Sequence[str] = tuple(POLICIES), seed: int = 0
) -> dict[str, dict]:
    """Every policy of ``policies`` on ``task_ids``; ``make_env(expert)`` builds the env each policy plays."""
    table = {}
    for name in policies:
        policy = make_policy(name)
        env = make_env(policy.needs_expert)
        try:
            table[name] = summarize(run_policy(env, policy, task_ids, seed))
        finally:
            env.close()
    return table


def table_markdown(table: dict[str, dict]) -> str:
    """The difficulty table as Markdown: score x 100 and success, each with its 95% interval."""
    lines = ["| policy | score | 95% CI | success | 95% CI | steps |", "|---|---|---|---|---|---|"]
    for name, row in table.items():
        (sl, sh), (pl, ph) = row["score_ci"], row["success_ci"]
        lines.append(
            f"| {name} | {row['score']:.1f} | {sl:.1f}-{sh:.1f} | {100 * row['success_rate']:.1f}% | "
            f"{100 * pl:.1f}-{100 * ph:.1f}% | {row['mean_steps']:.1f} |"
        )
    return "\n".join(lines)
