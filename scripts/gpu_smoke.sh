#!/usr/bin/env bash
# GPU smoke run (docs/BENCHMARKS.md): installs the project with its GPU extra, then 2 GACA iterations of a
# Qwen2.5-1.5B-sized random model on generated ALFWorld. Needs one CUDA GPU; downloads no model or data.
# Target: under 8 minutes on one H200. Usage: bash scripts/gpu_smoke.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x .venv/bin/python ]] || python3 -m venv .venv
.venv/bin/python -m pip install -q "torch==2.13.0"
# vLLM when it installs here (a CUDA machine with the registry); HF generate otherwise.
.venv/bin/python -m pip install -q -e ".[gpu,alfworld]" || .venv/bin/python -m pip install -q -e ".[train,alfworld]"
time .venv/bin/python scripts/gpu_smoke.py --out "${1:-outputs/gpu_smoke}"
