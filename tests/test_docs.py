"""The documentation holds together: BENCHMARKS.md's commands run as written, and every relative link resolves.

docs/BENCHMARKS.md promises a command for every figure. These tests check what can be checked without
rerunning the figures: no command keeps a placeholder (``<dir>``, ``--data DIR``, ``[--flag]``, ``...``),
every ``scripts/`` file it names exists, every ``--flag`` of its Python commands is one that script's
``--help`` lists, and the file speaks of the project, not of how it was made. The link test covers
README.md and docs/*.md: each relative link and image points at an existing file, and each ``#anchor`` at a
heading of the target file (GitHub's slugs).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from tests.script_probe import script_report

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "docs" / "BENCHMARKS.md"
LINKED_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$", re.M)
SCRIPT = re.compile(r"(?<![\w./-])scripts/([\w./-]+\.(?:py|sh))\b")
# A command's end: a shell separator, a comment or the end of its line (a trailing backslash continues it).
COMMAND_END = re.compile(r"&&|\|\||[;|#\n]")


def code_pieces(text: str) -> list[str]:
    """The fenced blocks and inline code spans of a Markdown text, fences first."""
    blocks = [m.group(0) for m in FENCE.finditer(text)]
    rest = FENCE.sub("", text)
    return blocks + [m.group(2) for m in CODE_SPAN.finditer(rest)]


def prose(text: str) -> str:
    """The text without its fenced blocks and code spans (links inside code are not links)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def script_commands(text: str) -> list[tuple[str, list[str]]]:
    """Every ``scripts/NAME.py`` invocation in the text's code, with its argument tokens."""
    commands = []
    for piece in code_pieces(text):
        piece = piece.replace("\\\n", " ")
        for match in SCRIPT.finditer(piece):
            tail = piece[match.end() :]
            end = COMMAND_END.search(tail)
            commands.append((match.group(1), tail[: end.start() if end else len(tail)].split()))
    return commands


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text lowercased, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """The heading anchors of a Markdown file, duplicates numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    result = set()
    for match in HEADING.finditer(FENCE.sub("", path.read_text(encoding="utf-8"))):
        slug = github_slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(result)


@cache
def test_github_slug_matches_the_anchors_the_readme_uses():
    assert (
        github_slug("CPU quickstart on ALFWorld (the default, `make demo`): what RL changes")
        == "cpu-quickstart-on-alfworld-the-default-make-demo-what-rl-changes"
    )
    assert github_slug("First use without `ALFWORLD_DATA`") == "first-use-without-alfworld_data"
    assert github_slug("Credit-assignment study: ALFWorld") == "credit-assignment-study-alfworld"


def placeholders(code: str) -> list[str]:
    """Placeholder-looking pieces of a command: ``<word>``, ``--flag METAVAR``, ``[--optional]``, ``...``."""
    found = re.findall(r"<[A-Za-z][^<>\n]*>", code)
    found += re.findall(r"--[\w-]+[ =]([A-Z][A-Z_]*)(?=[\s`]|$)", code)
    found += re.findall(r"\[--[\w-]+[^\]]*\]", code)
    found += re.findall(r"\.\.\.", code)
    return found


def test_the_command_checks_catch_placeholders_and_continued_lines():
    sample = (
        "Run `python scripts/a.py --out <dir>` or\n"
        "```bash\npython scripts/b.py --data DIR \\\n  --seed 1 # a comment\n```\n"
        "and `python scripts/c.py [--warm-start W] ...`; `python scripts/d.py --seed 0 --out runs/d`.\n"
    )
    commands = script_commands(sample)
    assert ("b.py", ["--data", "DIR", "--seed", "1"]) in commands
    assert ("a.py", ["--out", "<dir>"]) in commands
    found = {piece: placeholders(piece) for piece in code_pieces(sample)}
    assert [found[p] for p in found if "a.py" in p] == [["<dir>"]]
    assert [found[p] for p in found if "b.py" in p] == [["DIR"]]
    assert [found[p] for p in found if "c.py" in p] == [["[--warm-start W]", "..."]]
    assert [found[p] for p in found if "d.py" in p] == [[]]


def test_benchmarks_commands_have_no_placeholders():
    bad = {piece: placeholders(piece) for piece in code_pieces(BENCHMARKS.read_text(encoding="utf-8"))}
    assert {piece: found for piece, found in bad.items() if found} == {}


def test_benchmarks_speaks_of_the_project_not_of_how_it_was_made():
    lines = BENCHMARKS.read_text(encoding="utf-8").splitlines()
    assert [line for line in lines if re.search(r"\bsessions?\b", line, re.I)] == []
    assert [line for line in lines if re.search(r"ad-hoc script|not in the repository", line, re.I)] == []


def test_benchmarks_scripts_exist():
    named = set(SCRIPT.findall(BENCHMARKS.read_text(encoding="utf-8")))
    assert named, "BENCHMARKS.md names no script: the pattern is broken"
    assert sorted(name for name in named if not (ROOT / "scripts" / name).is_file()) == []


def test_benchmarks_commands_use_flags_their_scripts_accept():
    commands = script_commands(BENCHMARKS.read_text(encoding="utf-8"))
    scripts = sorted({script for script, _ in commands if script.endswith(".py")})
    assert len(scripts) >= 5, scripts
    report = script_report()
    assert not [s for s in scripts if s in report and not report[s]["stopped"]]  # each --help printed and stopped
    helps = {script: report[script]["help"] for script in scripts if script in report}
    unknown = []
    for script, args in commands:
        if script not in helps:
            continue
        for flag in (a.split("=")[0] for a in args if a.startswith("--")):
            if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", helps[script]):
                unknown.append(f"scripts/{script} {flag}")
    assert unknown == []


def broken_links(doc: Path) -> list[str]:
    """The relative links and images of a Markdown file whose file or ``#anchor`` does not exist."""
    broken = []
    for target in LINK.findall(prose(doc.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto: ...
            continue
        path_part, _, anchor = target.partition("#")
        path = (doc.parent / path_part).resolve() if path_part else doc
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no heading with anchor #{anchor} in {path.name}")
    return broken


def test_broken_links_are_found(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n## A `code` heading: yes\n## Twice\n## Twice\n", encoding="utf-8")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "# Doc\n[ok](other.md#a-code-heading-yes) [ok](other.md#twice-1) [ok](#doc) ![ok](other.md)\n"
        "[web](https://example.com/x#y) `[in code](missing.md)`\n"
        "[bad](missing.md) [bad](other.md#nope) [bad](#nowhere)\n",
        encoding="utf-8",
    )
    assert broken_links(doc) == [
        "missing.md: no such file",
        "other.md#nope: no heading with anchor #nope in other.md",
        "#nowhere: no heading with anchor #nowhere in doc.md",
    ]


@pytest.mark.parametrize("doc", LINKED_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve_to_files_and_anchors(doc):
    assert broken_links(doc) == []
