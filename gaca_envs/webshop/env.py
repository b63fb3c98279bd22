"""``GACA-WebShop-v0``: WebShop as a Gymnasium text environment (DESIGN.md contract 1).

Observation: the current page as text. ``observation_mode="text"`` is the original's visible
text joined by ``" [SEP] "``; ``"text_rich"`` marks buttons and clicked options; ``"html"`` is
the raw page.

Actions: ``search[<query>]`` on the start page and ``click[<button, product or option>]``
elsewhere; ``info["admissible_actions"]`` lists them (``search[<query>]`` stands for any query).
A query is 1-256 printable ASCII characters without ``<``, ``>``, ``[``, ``]``, ``{``, ``}``.
Anything else, or a click on something not on the page, is a step that changes nothing:
the observation stays the same page and ``info["action_valid"]`` is False.

Reward: ``reward_on_success`` (10) when the purchase scores 1.0, else 0 (``reward="success"``,
as verl-agent trains); with ``reward="score"``, ``reward_on_success`` times the purchase's graded
score. Either way the task score in [0, 1] is ``info["score"]`` and its breakdown
``info["score_breakdown"]``.

Episode end: terminated on "Buy Now"; truncated after ``max_env_steps`` (15) steps.

Backend: in-process by default (the Flask app through its test client: no sockets); with
``server_url=`` a running ``webshop-server`` over HTTP. Both read the same HTML, so they give the
same observations.

Tasks: ``reset(options={"task_id": n})`` (or ``"fixed_<n>"``) plays goal ``n`` of the shop's goal
list; without a task id a goal of ``split`` is drawn with the env's seeded generator.
``env.unwrapped.task_ids`` lists the env's split (``fixed_<n>``), ``task_ids("eval")`` another.

Snapshots: ``env.unwrapped.save_state()`` returns an :class:`~gaca_envs.task_env.EnvSnapshot`
(``env="webshop"``) whose ``state`` holds the shop's own snapshot of the session (``shop``: its
page path, which carries the query, results page, product, chosen options and sub-page, with the
session and goal; see :mod:`webshop_server.snapshots`), the instruction (``task``), the products
clicked so far (``visited``, which ``text_rich`` marks) and the expert's plan position
(``plan_at``). ``env.reset(options={"snapshot": s})`` asks the shop to restore it and shows its
page: in-process or over HTTP alike, on any server of the same catalog and goals (a fresh server
process included), in any observation mode.

Expert: with ``expert=True`` (in-process shop only) ``info["expert_action"]`` is the next action
of WebShop's oracle (``webshop_server.expert.oracle_actions``: search the target's title, page to
it, click it, its options, buy). After an action off that plan the expert goes back to search and
starts the plan again.

Versions: ``GACA-WebShop-v0`` (:class:`WebShopEnv`) plays the easy embedded shop by default (1,000
products whose titles carry every goal attribute); ``GACA-WebShop-v1`` (:class:`WebShopV1Env`) the
hard one (``catalog="embedded-v1"``, 10,000 products in product lines with near-duplicates,
goals worded off the title: :mod:`webshop_server.catalog_v1`). Observations, actions, rewards and
snapshots are the same; only the default shop differs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from gaca_envs.anchors import anchor_digest
from gaca_envs.spaces import TextSpace
from gaca_envs.task_env import EnvSnapshot, TaskEnv, resolve_max_env_steps, same_json
from gaca_envs.webshop.backends import HttpBackend, InProcessBackend, SnapshotRefused, WebShopServerError
from gaca_envs.webshop.pages import Clickable, Page, parse_page

OBSERVATION_MODES = ("text", "text_rich", "html")
SPLITS = ("train", "eval", "test", "all")
REWARD_MODES = ("success", "score")  # the env reward: reward_on_success on a win, or times the graded score
ACTION = re.compile(r"(search|click)\[(.+)\]", re.DOTALL)
QUERY = re.compile(r"[ -~]{1,256}")  # printable ASCII
QUERY_FORBIDDEN = re.compile(r"[<>\[\]{}]")
TASK_ID = re.compile(r"(?:fixed_)?(\d{1,9})")
SEARCH_PLACEHOLDER = "search[<query>]"
# The fewest steps from the start page to a page of each kind: a search, a product click, "buy now" or a
# sub-page (a restored snapshot that claims fewer is refused).
MIN_STEPS_TO = {"start": 0, "search_results": 1, "item_page": 2, "item_sub_page": 3, "done": 3}


@dataclass(frozen=True)
class Move:
    """What an accepted action does: ``verb`` (open/search/click) on ``target``, as a request."""

    verb: str
    target: str
    method: str
    url: str
    form: dict | None = None
    clickable: Clickable | None = None


def canonical_state(page: Page) -> list[str]:
    """The page state the anchor key digests: kind, query, results page, product, options, sub-page.

    Read from the page's URL, so two paths to the same page give the same parts. Options are
    sorted; the query is the lowercased keywords joined by single spaces.
    """
    parts = page.url.lstrip("/").split("/")
    kind = page.kind
    query = results_page = asin = options = sub_page = ""
    if kind == "search_results" and len(parts) == 4:
        query, results_page = _normalise_query(parts[2]), parts[3]
    elif kind in ("item_page", "item_sub_page") and len(parts) >= 6:
        asin, query, results_page = parts[2], _normalise_query(parts[3]), parts[4]
        sub_page = parts[5] if kind == "item_sub_page" else ""
        options = _normalise_options(parts[-1])
    elif kind == "done" and len(parts) == 4:
        asin, options = parts[2], _normalise_options(parts[3])
    return [kind, query, results_page, asin, options, sub_page]


def _normalise_query(text: str) -> str:
    words = re.findall(r"[^\s'\",\[\]+]+", text.lower())
    return " ".join(words)


def _normalise_options(text: str) -> str:
    pairs = re.findall(r"'([^']*)':\s*'([^']*)'", text)
    return ";".join(f"{k}={v}" for k, v in sorted(pairs))


class WebShopEnv(TaskEnv):
    """WebShop text environment. See the module docstring for observations, actions and rewards.

    Args:
        observation_mode: ``"text"``, ``"text_rich"`` or ``"html"``.
        split: goals drawn when reset has no task id: ``"train"``, ``"eval"``, ``"test"`` or ``"all"``.
        server_url: a running ``webshop-server``; ``None`` runs the shop in-process.
        app: an existing WebShop Flask app to use in-process (shares its catalog and index).
        shop_config: a ``webshop_server.ShopConfig`` (or dict of its fields) for the in-process shop.
        max_env_steps: steps before truncation (default 15); ``max_steps`` is its deprecated spelling.
        reward_on_success: reward when the purchase scores 1.0.
        reward: ``"success"`` (``reward_on_success`` on a score of 1.0, else 0) or ``"score"``
            (``reward_on_success`` times the purchase's score).
        session_prefix: prepended to ``fixed_<n>`` session ids (must end with ``_`` if given).
        request_timeout_s: HTTP request timeout.
        reconnect_s: how long the HTTP backend retries a lost connection before raising.
        expert: add ``info["expert_action"]`` (needs the in-process shop: not with ``server_url``).
    """

    prompt = (
        "You are an expert shopping agent on the WebShop website.",
        "Instruction: {task}\n{history}You are at step {step} (at most {max_env_steps}). Current page: {observation}\n"
        "Available actions: {admissible_actions}",
    )

    metadata = {"render_modes": ["ansi"]}
    splits = SPLITS
    snapshot_kind = "webshop"
    action_hint = " such as 'search[red shoes]' or 'click[buy now]'"

    def __init__(
        self,
        observation_mode: str = "text",
        split: str = "train",
        server_url: str | None = None,
        app: Any = None,
        shop_config: Any = None,
        max_env_steps: int | None = None,
        reward_on_success: float = 10.0,
        reward: str = "success",
        session_prefix: str = "",
        request_timeout_s: float = 10.0,
        reconnect_s: float = 5.0,
        render_mode: str | None = None,
        expert: bool = False,
        max_steps: int | None = None,
    ) -> None:
        max_env_steps = resolve_max_env_steps(max_env_steps, max_steps, default=15)
        if observation_mode not in OBSERVATION_MODES:
            raise ValueError(f"observation_mode must be one of {OBSERVATION_MODES}, got {observation_mode!r}")
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        if max_env_steps < 1:
            raise ValueError(f"max_env_steps must be >= 1, got {max_env_steps}")
        if reward not in REWARD_MODES:
            raise ValueError(f"reward must be one of {REWARD_MODES}, got {reward!r}")
        if session_prefix and not re.fullmatch(r"[A-Za-z0-9-]{1,40}_", session_prefix):
            raise ValueError(f"session_prefix must be letters, digits or '-' ending with '_', got {session_prefix!r}")
        if server_url is not None and (app is not None or shop_config is not None):
            raise ValueError("pass either server_url (HTTP backend) or app/shop_config (in-process), not both")
        if expert and server_url is not None:
            raise ValueError(
                "expert=True reads each goal's solution from the shop itself: use the in-process shop "
                "(app= or shop_config=), not server_url"
            )
        self.observation_mode = observation_mode
        self.split = split
        self.max_env_steps = max_env_steps
        self.reward_on_success = reward_on_success
        self.reward_mode = reward
        self.session_prefix = session_prefix
        self.render_mode = render_mode
        self.backend = self._make_backend(server_url, app, shop_config, request_timeout_s, reconnect_s)
        shop_info = self.backend.info()
        self.n_goals = int(shop_info["n_goals"])
        start, stop = shop_info["splits"][split]
        if start >= stop:
            raise ValueError(f"split {split!r} has no goals in this shop ({self.n_goals} goals); use split='all'")
        self.split_range = range(start, stop)
        self._split_ranges = {name: range(*bounds) for name, bounds in shop_info["splits"].items()}
        # Product pages hold any Unicode character; sampling draws printable ones.
        self.observation_space = TextSpace(2_000_000, min_length=0, any_unicode=True)
        self.action_space = TextSpace(4096, min_length=1, any_unicode=True)
        self._page: Page | None = None
        self._task: dict[str, Any] = {}
        self._steps = 0
        self._done = True
        self._visited: set[str] = set()
        self.expert = expert
        self._plan: list[str] = []  # the expert's actions for this episode's goal
        self._plan_at: int | None = None  # the next plan action's index; None: off the plan

    def _make_backend(
        self, server_url: str | None, app: Any, shop_config: Any, timeout_s: float, reconnect_s: float
    ) -> Any:
        """The backend pages come from: HTTP to ``server_url``, else the app in-process."""
        if server_url is not None:
            return HttpBackend(server_url, timeout_s, reconnect_s)
        if app is None:
            from webshop_server import create_app

            app = create_app(shop_config)
        return InProcessBackend(app)

    # ------------------------------------------------------------------ gym API

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        """Starts an episode on ``options["task_id"]`` (goal index or ``"fixed_<n>"``), else a goal of the split.

        ``options={"snapshot": snapshot}`` instead returns to a :meth:`save_state` snapshot.

        Raises:
            ValueError: for a task id that names no goal, or a snapshot the env or the shop refuses
                (:class:`~gaca_envs.webshop.backends.SnapshotRefused`, with the shop's reason).
            WebShopServerError: if the shop cannot be reached.
        """
        if (restored := self._reset_to_snapshot(seed, options)) is not None:
            return restored
        super().reset(seed=seed)
        task_id = (options or {}).get("task_id")
        if task_id is None:
            goal = int(self.split_range[int(self.np_random.integers(len(self.split_range)))])
        else:
            goal = self._goal_index(task_id)
        session_id = f"{self.session_prefix}fixed_{goal}"
        path, html = self._fetch(Move("open", session_id, "GET", f"/{session_id}"))
        page = parse_page(html, path)
        if page.instruction is None:
            raise WebShopServerError(
                f"start page of session {session_id} has no #instruction-text; is this a WebShop?"
            )
        self._task = {"task": page.instruction, "task_id": f"fixed_{goal}", "session_id": session_id}
        self._page = page
        self._start_episode()
        self._visited = set()
        if self.expert:
            from webshop_server.expert import oracle_actions

            self._plan, self._plan_at = oracle_actions(self.backend.app.extensions["webshop"], goal), 0
        return self._observation(), self._info(action_valid=True, score=0.0)

    def _task_ids_of(self, split: str) -> list[str]:
        """``fixed_<n>`` for the shop's goals ``n`` of ``split``."""
        return [f"fixed_{goal}" for goal in self._split_ranges[split]]

    def _goal_index(self, task_id: Any) -> int:
        m = (
            TASK_ID.fullmatch(str(task_id))
            if isinstance(task_id, (int, str)) and not isinstance(task_id, bool)
            else None
        )
        if m is None or int(m.group(1)) >= self.n_goals:
            raise ValueError(f"task_id must be a goal index 0..{self.n_goals - 1} or 'fixed_<n>', got {task_id!r}")
        return int(m.group(1))

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """Plays one action. See the module docstring.

        Raises:
            TypeError: if ``action`` is not a string.
            RuntimeError: if the episode has ended (call reset).
            WebShopServerError: if the shop is unreachable or no longer serves this episode's goal.
        """
        self._begin_step(action)
        expected = self._expert_action() if self.expert else None
        move = self._resolve(action)
        if move is not None:
            self._navigate(move)
        if self.expert and move is not None:  # a rejected action changes nothing, the plan position included
            on_plan = self._plan_at is not None and action.strip().lower() == (expected or "").lower()
            self._plan_at = self._plan_at + 1 if on_plan else (0 if self._page.kind == "start" else None)
        page = self._page
        terminated = page.kind == "done"
        score = float(page.reward) if terminated and page.reward is not None else 0.0
        won = terminated and score == 1.0  # as the original: success is a score of exactly 1
        truncated = self._end_step(terminated)
        if self.reward_mode == "score":
            reward = self.reward_on_success * score
        else:
            reward = self.reward_on_success if won else 0.0
        info = self._info(action_valid=move is not None, score=score, won=won)
        if terminated and page.reward_info is not None:
            info["score_breakdown"] = page.reward_info
        return self._observation(), reward, terminated, truncated, info

    def _resolve(self, action: str) -> Move | None:
        """What a well-formed, admissible action does; ``None`` for any other action."""
        if len(action) > 4096:
            return None
        m = ACTION.fullmatch(action.strip())
        if m is None:
            return None
        verb, arg = m.group(1), m.group(2)
        page = self._page
        if verb == "search":
            query = arg.strip()
            if page.search_url is None or not QUERY.fullmatch(query) or QUERY_FORBIDDEN.search(query):
                return None
            return Move("search", query, "POST", page.search_url, {"search_query": query})
        key = arg.strip().lower() if arg.strip().lower() in page.clickables else arg.strip()
        clickable = page.clickables.get(key)
        if clickable is None or key == "search":
            return None
        if clickable.kind == "link":
            self._visited.add(key.upper())
        return Move("click", key, clickable.method, clickable.url, None, clickable)

    def _fetch(self, move: Move) -> tuple[str, str]:
        """Performs a move; returns the path and HTML of the page it ends on."""
        return self.backend.request(move.method, move.url, move.form)

    def _navigate(self, move: Move) -> None:
        path, html = self._fetch(move)
        page = parse_page(html, path)
        if page.kind != "done" and page.instruction != self._task["task"]:
            raise WebShopServerError(
                f"the shop now shows another instruction for session {self._task['session_id']} "
                f"({page.instruction!r:.80} instead of {self._task['task']!r:.80}); was the server restarted "
                "with another catalog or goal file? Reset the env against a consistent server"
            )
        self._page = page

    # ------------------------------------------------------------------ snapshots (shared handling: TaskEnv)

    def _save_episode(self) -> tuple[str, str, dict[str, Any]]:
        """State: ``shop`` (the shop's session snapshot), ``task``, ``visited`` and ``plan_at``."""
        state = {
            "shop": self.backend.save_snapshot(self._page.url),
            "task": self._task["task"],
            "visited": sorted(self._visited),
            "plan_at": self._plan_at if self.expert else None,
        }
        return self._task["task_id"], self._observation(), state

    def _restore_episode(self, snapshot: EnvSnapshot) -> tuple[str, dict[str, Any]]:
        """Asks the shop to restore its session snapshot; checks the episode state against the page it shows.

        Checked: the shop's snapshot is of the task's goal; ``visited`` is a sorted list of distinct
        product ids (upper case), no longer than ``steps``, holding the product of a product or
        purchase page; ``plan_at`` is None or an int in ``[0, steps]``; ``steps`` reaches the page
        (a results page takes a search, a product page a click more, a purchase or sub-page one
        more); the instruction is the goal's; the observation is the page as some observation mode
        shows it (a snapshot restores in any mode).
        """
        state = snapshot.state
        keys = {"shop", "task", "visited", "plan_at"}
        if set(state) != keys:
            raise ValueError(f"WebShop snapshot state needs {', '.join(sorted(keys))}, got {sorted(state)!r:.200}")
        shop, plan_at, visited = state["shop"], state["plan_at"], state["visited"]
        if not isinstance(shop, dict) or not same_json(snapshot.task_id, f"fixed_{shop.get('goal')}"):
            raise ValueError(
                f"snapshot state shop must be the shop's session snapshot of goal {snapshot.task_id!r:.40}, "
                f"got {shop!r:.120}"
            )
        if (
            not isinstance(visited, list)
            or not all(isinstance(v, str) and v == v.upper() and 0 < len(v) <= 64 for v in visited)
            or visited != sorted(set(visited))
            or len(visited) > snapshot.steps
        ):
            raise ValueError(
                f"snapshot state visited must be the sorted, distinct, upper-case ids of the products clicked, at "
                f"most one per step ({snapshot.steps}), got {visited!r:.120}"
            )
        if plan_at is not None and (
            not isinstance(plan_at, int) or isinstance(plan_at, bool) or not 0 <= plan_at <= snapshot.steps
        ):
            raise ValueError(
                f"snapshot state plan_at must be None or an int in [0, steps={snapshot.steps}], got {plan_at!r:.40}"
            )
        if not isinstance(state["task"], str):
            raise ValueError(f"snapshot state task must be the instruction text, got {type(state['task']).__name__}")
        path, html = self._open_snapshot(shop)
        page = parse_page(html, path)
        least = MIN_STEPS_TO[page.kind]
        if snapshot.steps < least:
            raise ValueError(
                f"snapshot field steps={snapshot.steps} cannot reach a {page.kind} page (it takes at least {least}); "
                "restore the snapshot save_state() gave"
            )
        product = canonical_state(page)[3]
        if product and product.upper() not in visited:
            raise ValueError(
                f"snapshot state visited {visited!r:.80} lacks the product {product!r:.20} its {page.kind} page "
                "shows (a product page is reached by clicking it)"
            )
        instruction = page.instruction if page.kind != "done" else self._instruction_of(str(shop["session_id"]))
        if instruction != state["task"]:
            raise SnapshotRefused(
                f"the shop shows another instruction for the snapshot's session ({instruction!r:.80} instead "
                f"of {state['task']!r:.80})"
            )
        self._task = {"task": state["task"], "task_id": snapshot.task_id, "session_id": shop["session_id"]}
        self._page, self._visited = page, set(visited)
        self._check_observation(snapshot, (page.text(), page.text_rich(self._visited), page.html))
        if self.expert:
            from webshop_server.expert import oracle_actions

            self._plan = oracle_actions(self.backend.app.extensions["webshop"], shop["goal"])
            if plan_at is not None and plan_at > len(self._plan):
                raise ValueError(
                    f"snapshot state plan_at={plan_at} is past the expert's plan of {len(self._plan)} actions"
                )
            self._plan_at = plan_at
        score = float(page.reward) if page.kind == "done" and page.reward is not None else 0.0
        info = self._info(action_valid=True, score=score, won=page.kind == "done" and score == 1.0)
        if page.kind == "done" and page.reward_info is not None:
            info["score_breakdown"] = page.reward_info
        return self._observation(), info

    def _instruction_of(self, session_id: str) -> str | None:
        """The instruction the shop's start page of ``session_id`` shows (a purchase page shows none)."""
        path, html = self._fetch(Move("open", session_id, "GET", f"/{quote(session_id, safe='')}"))
        return parse_page(html, path).instruction

    def _terminal(self) -> bool:
        """A purchase (the done page) ends the episode."""
        return self._page.kind == "done"

    def _open_snapshot(self, shop_snapshot: dict) -> tuple[str, str]:
        """The shop restores its session snapshot; the path and HTML of the page it shows."""
        return self.backend.restore_snapshot(shop_snapshot)

    # ------------------------------------------------------------------ observations and info

    def _observation(self) -> str:
        page = self._page
        if self.observation_mode == "html":
            return page.html
        if self.observation_mode == "text_rich":
            return page.text_rich(self._visited)
        return page.text()

    def admissible_actions(self) -> list[str]:
        """The actions the current page accepts (``search[<query>]`` stands for any query)."""
        page = self._page
        if page is None or self._done:
            return []
        actions = [SEARCH_PLACEHOLDER] if page.search_url is not None else []
        actions += [f"click[{key}]" for key in page.clickables if key != "search"]
        return actions

    def _expert_action(self) -> str | None:
        """The oracle's next action; off its plan, back to search (where the plan starts again)."""
        if self._plan_at is not None and self._plan_at < len(self._plan):
            return self._plan[self._plan_at]
        if "back to search" in self._page.clickables:
            return "click[back to search]"
        return self._plan[0] if self._page.kind == "start" else None

    def _info(self, action_valid: bool, score: float, won: bool = False) -> dict:
        observation = self._observation()
        extra = {}
        if self.expert and not self._done:
            extra["expert_action"] = self._expert_action()
        return {
            "task": self._task["task"],
            "task_id": self._task["task_id"],
            "admissible_actions": self.admissible_actions(),
            "anchor_key": anchor_digest("webshop", canonical_state(self._page)),
            "anchor_text": observation,
            "action_valid": action_valid,
            "won": won,
            "score": score,
            "page": self._page.kind,
            "url": self._page.url,
            **extra,
        }

    def render(self) -> str | None:
        """Returns the current observation text (``render_mode="ansi"``)."""
        if self.render_mode == "ansi" and self._page is not None:
            return self._observation()
        return None

    def close(self) -> None:
        """Releases the backend's connections."""
        self.backend.close()
        super().close()


# The in-process shop each text env id plays by default (ShopConfig fields under the caller's).
DEFAULT_SHOPS: dict[str, dict[str, Any]] = {"GACA-WebShop-v0": {}, "GACA-WebShop-v1": {"catalog": "embedded-v1"}}


def shop_config_for(env_id: str, shop_config: Any = None) -> Any:
    """The in-process shop config of ``env_id``: a dict (or None) read over the id's defaults; else as given.

    A ``ShopConfig`` is used as given; anything else is left for the shop to refuse with its own error.
    """
    if shop_config is not None and not isinstance(shop_config, dict):
        return shop_config
    return {**DEFAULT_SHOPS.get(env_id, {}), **(shop_config or {})}


class HardShopDefault:
    """Mixin of the v1 ids: the in-process shop they build is read over ``GACA-WebShop-v1``'s defaults."""

    def _make_backend(
        self, server_url: str | None, app: Any, shop_config: Any, timeout_s: float, reconnect_s: float
    ) -> Any:
        if server_url is None and app is None:
            shop_config = shop_config_for("GACA-WebShop-v1", shop_config)
        return super()._make_backend(server_url, app, shop_config, timeout_s, reconnect_s)


class WebShopV1Env(HardShopDefault, WebShopEnv):
    """``GACA-WebShop-v1``: :class:`WebShopEnv` on the hard embedded shop by default.

    Without ``server_url`` or ``app``, the in-process shop is ``ShopConfig(catalog="embedded-v1")``
    (10,000 products); a ``shop_config`` dict is read over those defaults (``{"n_products": 100000}``
    keeps the hard catalog), and a ``ShopConfig`` is used as given. Over HTTP, start the server
    with ``webshop-server --catalog embedded-v1``.
    """
