"""Every script's ``--help``, run once per test process in one interpreter: what the script tests read.

The scripts import TRL and transformers (seconds each on a slow VM): one interpreter runs them all as
``__main__`` in turn, so those imports load once, not once per script.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.name for p in (ROOT / "scripts").glob("*.py"))

# Runs each script as __main__ with --help in one interpreter (the heavy imports load once), records the
# parser that handled it, and reports options without help and scripts that did not stop at --help.
_PROBE = r"""
import argparse, contextlib, io, json, runpy, sys
seen, report = [], {}
original = argparse.ArgumentParser.parse_known_args
def recording(self, *args, **kwargs):
    seen.append(self)
    return original(self, *args, **kwargs)
argparse.ArgumentParser.parse_known_args = recording
for name in sys.argv[1:]:
    seen.clear()
    sys.argv = [name, "--help"]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path("scripts/" + name, run_name="__main__")
        stopped = False
    except SystemExit as e:
        stopped = e.code in (0, None)
    parser = seen[0] if seen else None
    missing = [] if parser is None else [
        a.option_strings[0] for a in parser._actions if a.option_strings and a.dest != "help" and not a.help
    ]
    options = [] if parser is None else [o for a in parser._actions for o in a.option_strings]
    aliases = {} if parser is None else {
        a.option_strings[0]: a.help.split("deprecated alias of ", 1)[1] for a in parser._actions
        if a.option_strings and (a.help or "").startswith("deprecated alias of ")
    }
    report[name] = {"stopped": stopped, "usage": out.getvalue().startswith("usage:"), "no_help": missing,
                    "options": options, "aliases": aliases, "help": out.getvalue()}
print("REPORT" + json.dumps(report))
"""


@cache
def script_report() -> dict[str, dict]:
    """Per script: whether ``--help`` printed the usage and stopped, its options, aliases and help text."""
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, *SCRIPTS], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.split("REPORT", 1)[1])
    assert sorted(report) == SCRIPTS
    return report
