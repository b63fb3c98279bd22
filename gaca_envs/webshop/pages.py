"""Reading WebShop pages: visible text, clickables, instruction and score, from the page HTML.

The env reads the same HTML whether it came from the in-process app or over HTTP, so both
backends give the same observations. The text modes follow the original text env:

- ``text``: the visible text pieces joined by ``" [SEP] "`` (empty pieces dropped);
- ``text_rich``: one piece per line, as the page has it (not stripped: ``"Instruction: "``, a
  bullet point's leading space), buttons as ``[button] x [button_]``, the chosen options and
  visited products as ``[clicked button] x [clicked button_]``, led by ``You have clicked x.``.
  Whitespace-only pieces are dropped in both modes.

Clickables are keyed as in the original: the lowercased text of ``btn`` buttons and
``product-link`` links, and the ``value`` of option radio buttons.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import unquote

INVISIBLE_TAGS = frozenset({"style", "script", "head", "title", "meta"})
VOID_TAGS = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"})


@dataclass(frozen=True)
class Clickable:
    """Something an agent can click: what to request when it does."""

    kind: str  # "button", "link" or "radio"
    method: str  # "GET" or "POST"
    url: str
    name: str = ""  # option name, for radios


@dataclass
class Page:
    """What the env needs from one page."""

    html: str
    url: str
    # (stripped text, role, text as on the page); role: text/button/label/link
    pieces: list[tuple[str, str, str]] = field(default_factory=list)
    checked_labels: set[str] = field(default_factory=set)
    clickables: dict[str, Clickable] = field(default_factory=dict)
    search_url: str | None = None
    instruction: str | None = None
    reward: float | None = None
    reward_info: dict | None = None

    @property
    def kind(self) -> str:
        """The page kind from its URL: ``start``, ``search_results``, ``item_page``, ``item_sub_page``, ``done``."""
        first = unquote(self.url).lstrip("/").split("/", 1)[0]
        return first if first in ("search_results", "item_page", "item_sub_page", "done") else "start"

    def text(self) -> str:
        """The ``text`` observation."""
        return " [SEP] ".join(t for t, _, _ in self.pieces)

    def text_rich(self, visited_asins: set[str]) -> str:
        """The ``text_rich`` observation; ``visited_asins`` are the products clicked this episode."""
        lines, clicked = [], []
        for stripped, role, t in self.pieces:
            if role == "button":
                lines.append(f"[button] {t} [button_]")
            elif role == "label" and stripped in self.checked_labels:
                lines.append(f"  [clicked button] {t} [clicked button_]")
                clicked.append(t)
            elif role == "label":
                lines.append(f"  [button] {t} [button_]")
            elif role == "link":
                mark = "clicked button" if stripped.upper() in visited_asins else "button"
                lines.append(f"\n[{mark}] {t} [{mark}_]")
            else:
                lines.append(t)
        head = "".join(f"You have clicked {t}.\n" for t in reversed(clicked))
        return head + "\n".join(lines) + "\n"


class _PageParser(HTMLParser):
    def __init__(self, page: Page) -> None:
        super().__init__(convert_charrefs=True)
        self.page = page
        self.stack: list[tuple[str, dict]] = []
        self.form: tuple[str, str] | None = None  # (method, action) of the enclosing form
        self.in_instruction = 0
        self.hidden_depth = 0  # stack depth of the outermost open element with a `hidden` attribute; 0: none
        self.instruction: list[str] = []
        self.radio_ids: dict[str, bool] = {}
        self.capture: str | None = None  # "reward" or "reward_info" while inside them
        self.captured: list[str] = []

    def handle_starttag(self, tag: str, attrs_list: list) -> None:
        attrs = {k: (v if v is not None else "") for k, v in attrs_list}
        if tag == "form":
            self.form = (attrs.get("method", "get").upper(), attrs.get("action", ""))
        elif tag == "input":
            self._input(attrs)
        if attrs.get("id") == "reward_info" or (tag == "pre" and self._inside_id("reward")):
            self.capture = "reward_info" if attrs.get("id") == "reward_info" else "reward"
            self.captured = []
        if tag not in VOID_TAGS:
            self.stack.append((tag, attrs))
            if attrs.get("id") == "instruction-text":
                self.in_instruction = len(self.stack)
            if "hidden" in attrs and not self.hidden_depth:
                self.hidden_depth = len(self.stack)

    def _input(self, attrs: dict) -> None:
        if attrs.get("id") == "search_input" and self.form is not None:
            self.page.search_url = self.form[1]
        elif attrs.get("type") == "radio":
            self.page.clickables[attrs.get("value", "")] = Clickable(
                "radio", "GET", attrs.get("data-url", ""), attrs.get("name", "")
            )
            self.radio_ids[attrs.get("id", "")] = "checked" in attrs

    def _inside_id(self, element_id: str) -> bool:
        return any(a.get("id") == element_id for _, a in self.stack)

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.form = None
        if self.capture and (tag == "script" or tag == "pre"):
            self._finish_capture()
        while self.stack:
            open_tag, _ = self.stack.pop()
            if len(self.stack) < self.in_instruction:
                self.in_instruction = 0
            if len(self.stack) < self.hidden_depth:
                self.hidden_depth = 0
            if open_tag == tag:
                break

    def _finish_capture(self) -> None:
        text = "".join(self.captured).strip()
        try:
            if self.capture == "reward":
                self.page.reward = float(text)
            else:
                self.page.reward_info = json.loads(text)
        except ValueError:
            pass
        self.capture = None

    def handle_data(self, data: str) -> None:
        if self.capture:
            self.captured.append(data)
        if not self.stack or self.stack[-1][0] in INVISIBLE_TAGS:
            return
        if self.hidden_depth:
            return
        text = data.strip()
        if not text:
            return
        tag, attrs = self.stack[-1]
        if self.in_instruction and tag == "h4" and text != "Instruction:":
            self.instruction.append(text)
        role = "text"
        if tag == "button":
            role = "button"
            if "btn" in attrs.get("class", "").split() and self.form is not None:
                self.page.clickables[text.lower()] = Clickable("button", self.form[0], self.form[1])
        elif tag == "label":
            role = "label"
            if self.radio_ids.get(attrs.get("for", "")):
                self.page.checked_labels.add(text)
        elif tag == "a" and "product-link" in attrs.get("class", "").split():
            role = "link"
            self.page.clickables[text.lower()] = Clickable("link", "GET", attrs.get("href", ""))
        self.page.pieces.append((text, role, data))


def parse_page(html: str, url: str) -> Page:
    """Parses one WebShop page (``url`` is its path, used for the page kind)."""
    page = Page(html=html, url=url)
    parser = _PageParser(page)
    # The head holds no visible text and nothing to click: parse from <body> on (a tenth of the tags).
    body = html.find("<body")
    parser.feed(html[body:] if body > 0 else html)
    parser.close()
    if parser.instruction:
        page.instruction = " ".join(parser.instruction)
    return page
