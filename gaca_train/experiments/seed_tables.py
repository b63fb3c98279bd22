"""The quickstart's reference seed tables: a sweep over seeds, and where a single run stands against it.

A run's digits depend on the machine's float kernels as much as on its seed: torch picks its CPU
kernels by the instruction set it finds (``torch.backends.cpu.get_cpu_capability()``: ``AVX512`` or
``AVX2`` on the x86 VMs of this project), and the thread count changes how sums are split. Two CPUs
of one model name may report different capabilities. So every table and every run records its
:func:`machine`, and a run is said to repeat a table's row only when that row's seed and the whole
machine fingerprint match and the digits are in fact the same.

The shipped tables are ``docs/quickstart_seeds/<capability>.json``, one per CPU capability they were
built on (``ATEN_CPU_CAPABILITY=avx2`` lowers an AVX-512 machine's kernels to AVX2; it cannot raise them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gaca_envs.machine import cpu_model
from gaca_train.evaluation.report import t975

# The repository checkout this module runs from (docs/ lives there, not in the wheel).
ROOT = Path(__file__).resolve().parents[2]
REFERENCE_DIR = ROOT / "docs" / "quickstart_seeds"


def machine() -> dict[str, Any]:
    """What a run's digits depend on besides its settings: CPU model and capability, torch threads, versions."""
    from importlib.metadata import version

    import torch

    return {
        "cpu": cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "versions": {name: version(name) for name in ("torch", "transformers", "trl", "accelerate")},
    }


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% Student t-interval (0 for one value)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    sd = (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5
    return mean, t975(n - 1) * sd / n**0.5


def seed_table(runs: list[dict], settings: dict, episodes: int, fingerprint: dict) -> dict:
    """The table of a sweep: its runs (seed, before, after, seconds), their settings and machine, and summaries."""
    table = {"seeds": [r["seed"] for r in runs], "runs": runs, "settings": settings, "episodes": episodes,
             "machine": fingerprint}  # fmt: skip
    for key in ("before", "after", "gain"):
        values = [r["after"] - r["before"] if key == "gain" else r[key] for r in runs]
        mean, half = mean_ci(values)
        table[key] = {"mean": mean, "ci95": half, "min": min(values), "max": max(values)}
    return table


def seeds_markdown(table: dict) -> str:
    """The sweep as Markdown: one row per seed, then mean ± 95% t-interval of before, after and the gain."""
    split = "valid_seen" if table.get("settings", {}).get("env", "alfworld") == "alfworld" else "train"
    lines = [f"| seed | {split} success before RL | after RL | gain (after - before) | seconds |",
             "|---|---|---|---|---|"]  # fmt: skip
    lines += [f"| {r['seed']} | {r['before']:.3f} | {r['after']:.3f} | {r['after'] - r['before']:+.3f} | "
              f"{r['seconds']:.0f} |" for r in table["runs"]]  # fmt: skip
    cells = [f"{table[k]['mean']:+.3f} ± {table[k]['ci95']:.3f}" if k == "gain" else
             f"{table[k]['mean']:.3f} ± {table[k]['ci95']:.3f}" for k in ("before", "after", "gain")]  # fmt: skip
    lines.append(f"| mean ± 95% CI ({len(table['runs'])} seeds) | {' | '.join(cells)} | |")
    lines.append(f"| range | {table['before']['min']:.3f} - {table['before']['max']:.3f} | "
                 f"{table['after']['min']:.3f} - {table['after']['max']:.3f} | "
                 f"{table['gain']['min']:+.3f} - {table['gain']['max']:+.3f} | |")  # fmt: skip
    m = table.get("machine") or {}
    where = f"; CPU {m.get('cpu')}, capability {m.get('cpu_capability')}, {m.get('threads')} threads" if m else ""
    return "\n".join(lines) + f"\n\n({table['episodes']} {split} episodes per measurement{where}.)\n"


def _comparable(settings: dict) -> dict:
    return {k: v for k, v in settings.items() if k != "warm_start"}


def reference_tables(directory: Path | None = None) -> list[dict]:
    """The shipped tables (``docs/quickstart_seeds/*.json``), by file name."""
    directory = REFERENCE_DIR if directory is None else directory
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]


def compare_with_reference(summary: dict, tables: list[dict] | None = None) -> str:
    """Lines placing a run's held-out gain in the reference table of its settings and, if any, of its machine.

    Args:
        summary: the run's ``summary.json`` content (``before``, ``after``, ``settings``, ``seed``,
            ``machine``).
        tables: the reference tables (default: :func:`reference_tables`).

    Returns:
        The comparison in words: the range of the table whose settings match (that of the same
        CPU capability where there is one), and whether this run repeats its seed's row, which is
        said only where the machine fingerprint matches and the digits are the same.
    """
    tables = reference_tables() if tables is None else tables
    if not tables:
        return f"no reference seed table ({REFERENCE_DIR.relative_to(ROOT)}/) to compare with"
    matching = [t for t in tables if _comparable(t["settings"]) == _comparable(summary["settings"])]
    if not matching:
        return f"settings differ from every reference seed table ({REFERENCE_DIR.relative_to(ROOT)}/): no comparison"
    here = summary.get("machine") or {}
    same_kernels = [t for t in matching if t.get("machine", {}).get("cpu_capability") == here.get("cpu_capability")]
    table = (same_kernels or matching)[0]
    there = table.get("machine", {})
    gain = summary["after"]["success_rate"] - summary["before"]["success_rate"]
    g = table["gain"]
    where = "within" if g["min"] - 1e-9 <= gain <= g["max"] + 1e-9 else "outside"
    line = (
        f"reference ({there.get('cpu_capability', 'unknown')} kernels), seeds {table['seeds'][0]}-"
        f"{table['seeds'][-1]} (docs/BENCHMARKS.md): gain {g['mean']:+.3f} ± {g['ci95']:.3f} (95% CI), range "
        f"{g['min']:+.3f} to {g['max']:+.3f}; this run's {gain:+.3f} is {where} that range"
    )
    return line + "\n" + _repeat_note(summary, table, same_kernels)


def _repeat_note(summary: dict, table: dict, same_kernels: list[dict]) -> str:
    """Whether this run's machine matches the table's, and if so whether its seed's row came out the same."""
    here, there = summary.get("machine") or {}, table.get("machine", {})
    differ = [k for k in ("cpu_capability", "threads", "versions") if here.get(k) != there.get(k)]
    if not same_kernels:
        return (
            f"(this machine's CPU capability is {here.get('cpu_capability')}, and no table was built with it: its "
            "kernels give another warm start and another path, as another seed would; expect a gain of +0.10 or "
            "more, not a table's digits)"
        )
    if differ:
        return f"(the table's {', '.join(differ)} differ from this run's: expect the table's spread, not its digits)"
    row = next((r for r in table["runs"] if r["seed"] == summary.get("seed")), None)
    if row is None:
        return "(same CPU capability, threads and versions as the table; this seed is not in it)"
    same = row["before"] == summary["before"]["success_rate"] and row["after"] == summary["after"]["success_rate"]
    verdict = "the same digits" if same else "other digits: this CPU's kernels round differently"
    return (
        f"(same CPU capability, threads and versions as the table; its seed {row['seed']} row "
        f"{row['before']:.3f} -> {row['after']:.3f}, this run {summary['before']['success_rate']:.3f} -> "
        f"{summary['after']['success_rate']:.3f}: {verdict})"
    )
