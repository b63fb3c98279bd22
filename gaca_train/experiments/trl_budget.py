"""The completion budget of an ALFWorld episode under plain TRL (``GRPOTrainer(environment_factory=...)``).

    python scripts/trl_budget.py                                   # characters, 100 generated games, 50 steps
    python scripts/trl_budget.py --tokenizer Qwen/Qwen2.5-1.5B-Instruct --json budget.json

TRL 1.16 counts everything after the prompt against ``max_completion_length``: each turn's tool call
and each tool answer (:mod:`gaca_envs.trl`, "Completion length"). This plays ``--games`` ALFWorld games
(drawn with ``--seed`` from the split's tasks) through the real adapter,
``gaca_envs.trl.environment_factory("GACA-ALFWorld-v0", ...)()``, with a random agent: at each step it
calls ``act`` with an action drawn (same seed) from the admissible ones, until the episode ends or
``--max-env-steps`` steps. The adapter's ``reset`` text and ``act`` answers are exactly what TRL
appends to the conversation.

Counted per episode: the first prompt (the user message as TRL builds it: the dataset's instruction,
then the ``reset`` text; not part of the completion), each tool call as the model writes it (the JSON
``{"name": "act", "arguments": {"action": ...}}``) and each tool answer. Without ``--tokenizer`` the
unit is characters. With it the unit is tokens, counted as TRL 1.16 builds the sequence: the prompt
rendered with the ``act`` tool schema; a call, the model's turn up to and including its end-of-turn
token; an answer, the tool message's rendering and the next generation prompt (TRL's
``_get_tool_suffix_ids``). A chat template that cannot render tool calls and tool messages (TRL's
``supports_tool_calling``) is said so, and the raw texts' tokens are counted instead.

Prints a Markdown table: per step the mean call, answer and both; per episode the median, 90th
percentile and maximum of calls + answers, over the episodes that played every step and over all;
and the ``max_completion_length`` that covers the maximum with ``--margin``, rounded up to a multiple
of 1024. ``--json`` writes the figures and every episode's counts and actions.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gaca_envs  # noqa: F401  (registers the env ids)
from gaca_envs.data_source import generated_data_reason
from gaca_envs.trl import DEFAULT_INSTRUCTION, environment_factory

ENV_ID = "GACA-ALFWorld-v0"
TOOL_NAME = "act"


@dataclass
class Episode:
    """One episode's texts as TRL sees them.

    Attributes:
        task_id: the task played.
        prompt: the first user message (the instruction, then the adapter's ``reset`` text).
        actions: the actions the agent took, in order.
        answers: the adapter's answer to each action.
        won: whether the task was solved.
    """

    task_id: str
    prompt: str
    actions: list[str]
    answers: list[str]
    won: bool


@dataclass
class EpisodeCounts:
    """An episode's size in one unit (characters or tokens): the prompt, then per step the call and the answer."""

    task_id: str
    prompt: int
    calls: list[int]
    answers: list[int]
    won: bool

    @property
    def total(self) -> int:
        """What TRL counts against ``max_completion_length``: every call and every answer."""
        return sum(self.calls) + sum(self.answers)


def tool_call_text(action: str) -> str:
    """A call of the ``act`` tool as the model writes it: ``{"name": "act", "arguments": {"action": ...}}``."""
    return json.dumps({"name": TOOL_NAME, "arguments": {"action": action}})


def tool_call_message(action: str) -> dict[str, Any]:
    """The assistant message of one ``act`` call in the OpenAI/TRL format (arguments as a dict, as TRL parses them)."""
    call = {"type": "function", "function": {"name": TOOL_NAME, "arguments": {"action": action}}}
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def tool_message(answer: str) -> dict[str, Any]:
    """The tool message TRL appends with an ``act`` answer."""
    return {"role": "tool", "name": TOOL_NAME, "content": answer}


def play_episodes(
    games: int,
    *,
    max_env_steps: int = 50,
    seed: int = 0,
    split: str = "train",
    data_path: str | None = None,
    instruction: str = DEFAULT_INSTRUCTION,
) -> list[Episode]:
    """Plays ``games`` ALFWorld games through the TRL adapter with a seeded random agent.

    ``random.Random(seed)`` first draws the games (without replacement, from the split's task ids in
    sorted order), then, step by step, each action from ``info["admissible_actions"]``.

    Args:
        games: number of games (distinct tasks).
        max_env_steps: the env's episode cap.
        seed: seed of the draws.
        split: the ALFWorld split.
        data_path: a folder holding ``json_2.1.1``; None: ``$ALFWORLD_DATA``, else the generated games.
        instruction: the dataset's user message that the ``reset`` text is appended to (TRL appends
            it to the instruction and two newlines, as :func:`gaca_envs.trl.task_dataset` writes it).

    Returns:
        One :class:`Episode` per game, in the order played.

    Raises:
        ValueError: for ``games`` < 1 or more than the split's tasks, and whatever the env raises for
            its arguments (a bad ``max_env_steps``, ``split`` or ``data_path``).
    """
    if not isinstance(games, int) or games < 1:
        raise ValueError(f"games must be an int >= 1, got {games!r}")
    env = environment_factory(ENV_ID, allow_generated_data=True, **_env_kwargs(split, max_env_steps, data_path))()
    task_ids = sorted(env.env.unwrapped.task_ids)
    if games > len(task_ids):
        raise ValueError(f"games={games} is more than the {len(task_ids)} tasks of split {split!r}; pass fewer games")
    rng = random.Random(seed)
    episodes = []
    for task_id in rng.sample(task_ids, games):
        prompt = instruction + "\n\n" + env.reset(task_id=task_id)
        answers = []
        while not env.done:
            answers.append(env.act(rng.choice(env.info["admissible_actions"])))
        episodes.append(Episode(task_id, prompt, env.actions, answers, bool(env.info.get("won"))))
    return episodes


def count_characters(episode: Episode) -> EpisodeCounts:
    """An episode's size in characters: the prompt, each call's JSON text and each answer."""
    calls = [len(tool_call_text(a)) for a in episode.actions]
    return EpisodeCounts(episode.task_id, len(episode.prompt), calls, [len(a) for a in episode.answers], episode.won)


class TokenCounter:
    """Counts an episode's tokens as TRL 1.16's tool loop builds the sequence (see the module docstring).

    Args:
        tokenizer: a Hugging Face tokenizer.
        tool: the ``act`` tool as ``apply_chat_template(tools=...)`` takes it (the adapter's bound method
            or its JSON schema).

    Attributes:
        uses_template: whether the chat template renders tool calls and tool messages (else the raw
            texts' tokens are counted, without the template's wrapping).
    """

    def __init__(self, tokenizer: Any, tool: Callable | dict) -> None:
        from trl.chat_template_utils import supports_tool_calling

        self.tokenizer = tokenizer
        self.tool = tool
        self.uses_template = supports_tool_calling(tokenizer)
        self._calls: dict[str, int] = {}
        self._answer_prefix: list[int] | None = None

    def count(self, episode: Episode) -> EpisodeCounts:
        """The episode's size in tokens."""
        calls = [self._call(a) for a in episode.actions]
        answers = [self._answer(a) for a in episode.answers]
        return EpisodeCounts(episode.task_id, self._prompt(episode.prompt), calls, answers, episode.won)

    def _ids(self, messages: list[dict[str, Any]], *, generation_prompt: bool, tools: bool = False) -> list[int]:
        return self.tokenizer.apply_chat_template(
            messages,
            tools=[self.tool] if tools else None,
            add_generation_prompt=generation_prompt,
            tokenize=True,
            return_dict=False,
        )

    def _raw(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _prompt(self, prompt: str) -> int:
        if not self.uses_template:
            return self._raw(prompt)
        return len(self._ids([{"role": "user", "content": prompt}], generation_prompt=True, tools=True))

    def _call(self, action: str) -> int:
        if action not in self._calls:
            if self.uses_template:
                # The model's turn: after the generation prompt, up to and including its end-of-turn token.
                user = [{"role": "user", "content": "dummy"}]
                before = self._ids(user, generation_prompt=True)
                after = self._trim_to_eos(self._ids(user + [tool_call_message(action)], generation_prompt=False))
                self._calls[action] = len(self._suffix(before, after))
            else:
                self._calls[action] = self._raw(tool_call_text(action))
        return self._calls[action]

    def _answer(self, answer: str) -> int:
        if not self.uses_template:
            return self._raw(answer)
        # TRL's _get_tool_suffix_ids: a dummy call of the same tool, then the tool message and the generation prompt.
        call = {"type": "function", "function": {"name": TOOL_NAME, "arguments": {}}}
        dummy = [{"role": "user", "content": "dummy"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
        if self._answer_prefix is None:
            self._answer_prefix = self._trim_to_eos(self._ids(dummy, generation_prompt=False))
        after = self._ids(dummy + [tool_message(answer)], generation_prompt=True)
        return len(self._suffix(self._answer_prefix, after))

    def _trim_to_eos(self, ids: list[int]) -> list[int]:
        eos = [i for i, token in enumerate(ids) if token == self.tokenizer.eos_token_id]
        return ids[: eos[-1] + 1] if eos else ids

    def _suffix(self, before: list[int], after: list[int]) -> list[int]:
        if after[: len(before)] != before:
            raise ValueError(
                "the tokenizer's chat template does not render a conversation as a prefix of its continuation, "
                "so a turn's tokens are not the difference of two renderings (TRL's tool loop fails the same way)"
            )
        return after[len(before) :]


def load_tokenizer(name_or_path: str) -> Any:
    """A tokenizer from a local folder or the Hugging Face cache; never downloads.

    Raises:
        ValueError: naming the tokenizer and how to make it available, when it is not found locally.
    """
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name_or_path, local_files_only=True)
    except (OSError, ValueError) as e:
        path = Path(name_or_path).expanduser()
        if path.is_dir():
            reason = "the folder holds no tokenizer that transformers' AutoTokenizer loads (tokenizer.json and "
            reason += "tokenizer_config.json, as save_pretrained writes them)"
        elif name_or_path.startswith((".", "/", "~")) or name_or_path.count("/") != 1:
            reason = "no such folder; pass a folder with the tokenizer's files or a Hugging Face id in the local cache"
        else:
            reason = (
                "not in the local Hugging Face cache, and nothing is downloaded here; download it first on a machine "
                f"with network (hf download {name_or_path}), or pass a folder with the tokenizer's files"
            )
        raise ValueError(f"--tokenizer {name_or_path!r}: {reason}") from e


def _percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile, linear between order statistics (numpy's default)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _spread(totals: list[int]) -> dict[str, Any] | None:
    if not totals:
        return None
    return {"episodes": len(totals), "median": statistics.median(totals), "p90": _percentile(totals, 90),
            "max": max(totals)}  # fmt: skip


def summarize(counts: list[EpisodeCounts], *, max_env_steps: int, margin: float) -> dict[str, Any]:
    """The figures of the table: per step means, per episode spreads, the covering budget.

    Args:
        counts: every episode's counts, in one unit.
        max_env_steps: the episode cap the games were played with.
        margin: the share added to the largest episode before rounding up to a multiple of 1024.

    Returns:
        ``per_step`` (mean ``call``, ``answer``, ``total``), ``per_episode`` (``full_length``: the
        episodes of ``max_env_steps`` steps, None if none; ``all``), ``first_prompt`` (mean, max),
        ``steps``, ``won`` and ``budget`` (the multiple of 1024).
    """
    calls = [c for e in counts for c in e.calls]
    answers = [a for e in counts for a in e.answers]
    steps = len(calls)
    totals = [e.total for e in counts]
    largest = max(totals)
    return {
        "per_step": {
            "call": sum(calls) / steps,
            "answer": sum(answers) / steps,
            "total": (sum(calls) + sum(answers)) / steps,
        },
        "per_episode": {
            "full_length": _spread([e.total for e in counts if len(e.calls) == max_env_steps]),
            "all": _spread(totals),
        },
        "first_prompt": {"mean": statistics.fmean(e.prompt for e in counts), "max": max(e.prompt for e in counts)},
        "steps": steps,
        "won": sum(e.won for e in counts),
        "budget": 1024 * math.ceil(largest * (1 + margin) / 1024),
    }


def format_table(summary: dict[str, Any], *, unit: str, max_env_steps: int, margin: float) -> str:
    """The summary as Markdown: a per-step table, a per-episode table and the covering budget."""
    step = summary["per_step"]
    lines = [
        f"| per step ({unit}) | call | answer | call + answer |",
        "|---|---|---|---|",
        f"| mean | {step['call']:,.1f} | {step['answer']:,.1f} | {step['total']:,.1f} |",
        "",
        f"| per episode, calls + answers ({unit}) | episodes | median | p90 | max |",
        "|---|---|---|---|---|",
    ]
    labels = {"full_length": f"reaching {max_env_steps} steps", "all": "all"}
    for key, label in labels.items():
        spread = summary["per_episode"][key]
        if spread is None:
            lines.append(f"| {label} | 0 | - | - | - |")
        else:
            lines.append(
                f"| {label} | {spread['episodes']} | {spread['median']:,.0f} | {spread['p90']:,.0f} | "
                f"{spread['max']:,} |"
            )
    prompt = summary["first_prompt"]
    lines += [
        "",
        f"First prompt (not counted in the completion): mean {prompt['mean']:,.0f}, max {prompt['max']:,} {unit}.",
    ]
    covering = f"{summary['budget']:,} {unit} cover the largest episode with a {margin:.0%} margin"
    covering += " (a multiple of 1024)"
    if unit == "tokens":
        lines.append(f"max_completion_length={summary['budget']}: {covering}.")
    else:
        lines.append(f"{covering}; a token budget needs --tokenizer.")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Plays the games, counts them in the chosen unit and returns the figures (what ``--json`` writes)."""
    start = time.perf_counter()
    env_kwargs = _env_kwargs(args.split, args.max_env_steps, args.data_path)
    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else None  # a missing one fails before playing
    episodes = play_episodes(
        args.games, max_env_steps=args.max_env_steps, seed=args.seed, split=args.split, data_path=args.data_path
    )
    if tokenizer is None:
        unit, method, counts = "characters", "characters of the texts", [count_characters(e) for e in episodes]
    else:
        tool = environment_factory(ENV_ID, allow_generated_data=True, **env_kwargs)().act
        counter = TokenCounter(tokenizer, tool)
        unit, counts = "tokens", [counter.count(e) for e in episodes]
        method = (
            "tokens with the chat template"
            if counter.uses_template
            else f"the chat template of {args.tokenizer} cannot render tool calls and tool messages (TRL's "
            "supports_tool_calling): raw texts' tokens, without the template's wrapping"
        )
    summary = summarize(counts, max_env_steps=args.max_env_steps, margin=args.margin)
    if args.data_path is not None:
        data = f"games from {args.data_path}"
    else:
        data = "generated games" if generated_data_reason(ENV_ID, env_kwargs) else "games from $ALFWORLD_DATA"
    return {
        "env_id": ENV_ID,
        "data": data,
        "split": args.split,
        "games": args.games,
        "max_env_steps": args.max_env_steps,
        "seed": args.seed,
        "margin": args.margin,
        "tokenizer": args.tokenizer,
        "unit": unit,
        "method": method,
        **summary,
        "seconds": time.perf_counter() - start,
        "episodes": [
            {**asdict(c), "total": c.total, "steps": len(c.calls), "actions": e.actions}
            for c, e in zip(counts, episodes, strict=True)
        ],
    }


def _env_kwargs(split: str, max_env_steps: int, data_path: str | None) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"split": split, "max_env_steps": max_env_steps}
    return kwargs if data_path is None else {**kwargs, "data_path": data_path}


def make_parser() -> argparse.ArgumentParser:
    """The command line of ``scripts/trl_budget.py``."""
    parser = argparse.ArgumentParser(
        prog="trl_budget.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--games", type=int, default=100, help="ALFWorld games to play, distinct tasks (default 100)")
    parser.add_argument(
        "--max-env-steps", type=int, default=50, help="the env's episode cap, TRL's max_tool_calling_iterations (50)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the game draw and of the random agent (0)")
    parser.add_argument("--split", default="train", help="ALFWorld split: train, valid_seen or valid_unseen")
    parser.add_argument(
        "--data-path",
        default=None,
        help="folder holding json_2.1.1 (ALFWorld's data or gaca-alfworld-generate's); default: $ALFWORLD_DATA, "
        "else the generated games",
    )
    parser.add_argument(
        "--tokenizer",
        default=None,
        help="count tokens with this tokenizer: a local folder or a Hugging Face id already in the local cache "
        "(never downloaded); default: count characters",
    )
    parser.add_argument(
        "--margin", type=float, default=0.05, help="share added to the largest episode for the budget (0.05)"
    )
    parser.add_argument("--json", default=None, metavar="PATH", help="write the figures and every episode here")
    return parser


def main(argv: list[str] | None = None) -> None:
    """Parses the command line, measures, prints the table and writes ``--json``."""
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.margin < 0:
        parser.error(f"--margin must be >= 0, got {args.margin}")
    try:
        result = run(args)
    except ValueError as e:
        parser.exit(2, f"trl_budget.py: error: {e}\n")
    agent = f"a random agent over the admissible actions (seed {args.seed})"
    print(
        f"{ENV_ID} under plain TRL: {args.games} {result['data']} ({args.split}), {agent}, at most "
        f"{args.max_env_steps} steps; {result['steps']:,} steps played, {result['won']} solved. "
        f"Counted: {result['method']}."
    )
    print()
    print(format_table(result, unit=result["unit"], max_env_steps=args.max_env_steps, margin=args.margin))
    print()
    print(f"Took {result['seconds']:.1f} s.")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
