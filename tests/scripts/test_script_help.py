"""Every script answers ``--help`` with its usage and runs nothing; every option it takes has a help text."""

from __future__ import annotations

from tests.script_probe import SCRIPTS, script_report


def test_every_script_prints_its_usage_on_help_and_documents_every_option():
    report = script_report()
    assert sorted(report) == SCRIPTS
    ran = [name for name, entry in report.items() if not (entry["stopped"] and entry["usage"])]
    undocumented = {name: entry["no_help"] for name, entry in report.items() if entry["no_help"]}
    assert ran == [], f"--help did not print the usage and stop: {ran}"
    assert undocumented == {}, f"options without help: {undocumented}"
    # Renamed options keep their old spelling for one release, each saying which option it stands for.
    aliases = {name: entry["aliases"] for name, entry in report.items() if entry["aliases"]}
    assert aliases == {
        "compare_estimators.py": {"--eval-episodes": "--eval-rollouts-per-task"},
        "evaluate.py": {
            "--num-episodes": "--max-tasks",
            "--repeats": "--rollouts-per-task",
            "--max-steps": "--max-env-steps",
        },
        "make_tiny_model.py": {"--max-steps": "--max-env-steps"},
        "quickstart_cpu.py": {"--eval-episodes": "--eval-rollouts-per-task"},
    }
    for name, renamed in aliases.items():
        assert set(renamed.values()) <= set(report[name]["options"]), name
