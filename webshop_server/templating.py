"""Template loading: whitespace between tags is dropped when a template is compiled.

The templates are indented for people. Rendered as written, every indentation run between two
tags is a text node that each reader of the page (the env's parser, a browser) walks and drops;
removing them when a template is compiled costs nothing per page and leaves every visible text,
attribute and text observation as it was (whitespace inside text, as in ``"Instruction: "`` or
a bullet point's leading space, is kept).
"""

from __future__ import annotations

import re

from jinja2.ext import Extension

_BETWEEN = re.compile(r"(>|%\}|#\})\s+(?=<|\{%|\{#)")


class CompactHtml(Extension):
    """Drops whitespace-only runs between tags and ``{% %}``/``{# #}`` blocks from template sources."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        return _BETWEEN.sub(r"\1", source)
