"""The GPU smoke chain (scripts/gpu_wheelhouse.sh -> scripts/gpu_smoke.sh -> scripts/gpu_smoke.py) on the CPU.

The GPU machine is offline and its image holds Python 3.12, torch, transformers, accelerate and peft (and,
as last read, pyarrow and pandas). These tests stand in for it with an "image" interpreter: a virtual
environment whose site-packages link to exactly those distributions and their requirements from this
project's .venv, nothing else. The smoke run must then pass from the wheelhouse alone, in a fresh
install folder: a wheel the builder failed to carry breaks its imports.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import venv
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import canonicalize_name, parse_wheel_filename

ROOT = Path(__file__).resolve().parents[2]
# What the GPU image is taken to hold (scripts/gpu_wheelhouse.sh, skip list): pip to install with.
IMAGE_ROOTS = ("torch", "transformers", "accelerate", "peft", "pyarrow", "pandas", "pip")
LOCAL = f"{sys.version_info.major}.{sys.version_info.minor}"
REPORT_KEYS = {"rollout_tokens_per_s", "update_tokens_per_s", "peak_gpu_memory_gb", "memory_plan_gb",
               "changed_parameter_fraction", "largest_micro_batch_tokens", "micro_batch_tokens"}  # fmt: skip


def _build_wheelhouse(out: Path, python_version: str) -> subprocess.CompletedProcess:
    command = ["bash", "scripts/gpu_wheelhouse.sh", "--python-version", python_version, "--out", str(out)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    """The wheelhouse for this interpreter, under the git-ignored .whl/ (its .stamp keeps it between runs)."""
    out = ROOT / ".whl" / f"gpu-test-py{LOCAL}"
    _build_wheelhouse(out, LOCAL)
    return out


def _closure(roots: tuple[str, ...]) -> set[str]:
    """Installed distributions that ``roots`` need (base requirements, markers evaluated here)."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for line in metadata.requires(name) or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def _image_python(path: Path, roots: tuple[str, ...]) -> Path:
    """A venv (no pip of its own) whose site-packages link to ``roots`` and their requirements in this .venv."""
    venv.create(path, with_pip=False, symlinks=True)
    site = next(path.glob("lib/python*/site-packages"))
    for name in sorted(_closure(roots)):
        for file in metadata.distribution(name).files or []:
            top = file.parts[0]
            source = Path(file.locate()).parents[len(file.parts) - 1] / top
            if top != ".." and source.exists() and not (site / top).exists():
                (site / top).symlink_to(source)
    return path / "bin" / "python"


def _smoke(python: Path, wheelhouse: Path, tmp_path: Path, timeout: int) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OUT", "VIRTUAL_ENV")}
    command = ["bash", "scripts/gpu_smoke.sh", "--tiny", "--wheelhouse", str(wheelhouse), "--site",
               str(tmp_path / "site"), "--out", str(tmp_path / "out")]  # fmt: skip
    return subprocess.run(command, cwd=ROOT, env={**env, "PYTHON": str(python)}, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


@pytest.mark.slow
def test_the_smoke_run_passes_from_the_wheelhouse_over_an_image_of_torch_transformers_accelerate_peft(
    wheelhouse, tmp_path
):
    python = _image_python(tmp_path / "image", IMAGE_ROOTS)
    probe = subprocess.run([python, "-c", "import trl"], capture_output=True, text=True, timeout=60)
    assert "No module named 'trl'" in probe.stderr  # the image alone cannot train
    result = _smoke(python, wheelhouse, tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert "the image has what the wheels need" in result.stdout
    report = json.loads((tmp_path / "out" / "gpu_smoke.json").read_text())
    assert set(report) >= REPORT_KEYS
    assert Path(report["gaca_from"]) == tmp_path / "site" / "site-packages"  # its wheel's, not the checkout's
    assert report["rows_per_iteration"] == [80.0, 80.0]  # 4 tasks x 4 rollouts x 5 steps
    assert all(t > 0 for t in report["rollout_tokens_per_s"] + report["update_tokens_per_s"])
    # Packed first: a micro-batch's rows hold at most the 1,024-token budget in full, laid out as one sequence of
    # prefix trees that computes less (shared prompts once); the padded layout's fill it to within one row.
    assert report["update_layout"] == "packed" and set(report["layouts"]) == {"packed", "padded"}
    packed, padded = report["layouts"]["packed"], report["layouts"]["padded"]
    assert 1024 - 512 < packed["largest_micro_batch_tokens"] <= 1024
    longest_row = report["prompt_tokens"][1] + 16
    assert 1024 - longest_row < padded["largest_micro_batch_tokens"] <= 1024
    assert report["packed_over_padded"] > 0 and all(t > 0 for t in packed["update_row_tokens_per_s"])
    assert report["peak_gpu_memory_gb"] is None and report["memory_plan_gb"] > 0
    # The random model's responses are all malformed, so every group gets zero advantage (docs/method.md
    # section 6) and no weight may move; a run with any advantage must move nearly every float32 weight.
    if max(report["advantage_abs_mean"]) > 0:
        assert report["changed_parameter_fraction"] > 0.9
    else:
        assert report["changed_parameter_fraction"] == 0.0
    assert report["nonempty_response_fraction"] > 0.9 and re.search(r"[a-z]+ [a-z]+", report["sample_response"])


@pytest.mark.slow
def test_the_smoke_run_stops_before_training_when_the_image_lacks_pyarrow_and_pandas(wheelhouse, tmp_path):
    python = _image_python(tmp_path / "image", ("torch", "transformers", "accelerate", "peft", "pip"))
    result = _smoke(python, wheelhouse, tmp_path, timeout=120)
    assert result.returncode != 0
    assert "gpu_smoke: this Python lacks what the carried wheels need" in result.stderr
    assert "pyarrow>=" in result.stderr and "pandas" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out" / "games").exists()  # stopped before anything was generated


@pytest.mark.slow
def test_the_wheelhouse_for_the_gpu_image_holds_python_3_12_wheels_under_the_carry_limit(tmp_path):
    result = _build_wheelhouse(tmp_path / "gpu", "3.12")
    wheels = sorted((tmp_path / "gpu").glob("*.whl"))
    platforms = [f"manylinux_2_{n}_x86_64" for n in range(5, 40)] + ["manylinux2014_x86_64", "manylinux1_x86_64"]
    accepted: set[Tag] = set(cpython_tags((3, 12), platforms=platforms))
    accepted |= set(compatible_tags((3, 12), "cp312", platforms=platforms))
    for wheel in wheels:
        assert parse_wheel_filename(wheel.name)[3] & accepted, f"{wheel.name} does not install on CPython 3.12"
    names = {canonicalize_name(parse_wheel_filename(w.name)[0]) for w in wheels}
    assert {"gaca", "trl", "datasets", "gymnasium"} <= names
    assert not names & {"torch", "transformers", "accelerate", "peft", "pyarrow", "numpy"}  # the image's
    assert sum(w.stat().st_size for w in wheels) < 16 * 2**20, "the wheelhouse leaves little of the 64 MiB carry"
    needed = (tmp_path / "gpu" / "image-requirements.txt").read_text()
    assert re.search(r"^pyarrow>=[\d.]+  # datasets-", needed, re.M) and "transformers" in needed
    assert "KiB in all" in result.stdout
    with zipfile.ZipFile(next(w for w in wheels if w.name.startswith("gaca-"))) as archive:
        assert "gaca_train/training/trainer.py" in archive.namelist()
