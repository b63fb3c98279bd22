# The two README commands: `make demo` (main job on the embedded default) and `make test`.
.PHONY: demo demo-estimators test lint bench setup
PY := .venv/bin/python

setup:
	@scripts/setup.sh dev

demo: setup
	$(PY) scripts/quickstart_cpu.py --out outputs/quickstart

demo-estimators: setup
	$(PY) scripts/demo.py

test: setup
	$(PY) -m pytest -q -n 2 --dist loadscope

lint: setup
	$(PY) -m ruff check . && $(PY) -m ruff format --check .

bench: setup
	$(PY) scripts/bench_advantages.py
