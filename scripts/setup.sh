#!/usr/bin/env bash
# Creates .venv and installs the project with the extras the README commands need.
# Idempotent: re-runs pip only when pyproject.toml or constraints.txt changed, apt only when a tool is missing.
# Prints one line per stage; apt's and pip's own output goes to build/setup.log, whose path and last lines
# are printed if a stage fails.
# Usage: scripts/setup.sh [EXTRAS]   (default: dev = every part + test tools)
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-dev}"
python="${PYTHON:-python3}"

log="build/setup.log"
mkdir -p build

logged=0
# Runs "$@" with its output appended to the log; one line says what it did and how long it took.
stage() {
  local what="$1"
  shift
  local start=$SECONDS
  ((logged++)) || : > "$log"  # the first stage of this run starts a new log
  printf 'setup: %s ... ' "$what"
  if "$@" >> "$log" 2>&1; then
    echo "done ($((SECONDS - start)) s)"
  else
    local status=$?
    echo "failed (exit $status); the last lines of $PWD/$log:"
    tail -n 20 "$log" | sed 's/^/  /'
    exit "$status"
  fi
}

# System packages: a C++ toolchain and cmake (fast-downward-textworld compiles at install
# time) and Debian's chromium + chromium-driver for the browser env. Installed only if absent.
need_apt=()
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
if [[ ",$extras," == *",dev,"* || ",$extras," == *",browser,"* || ",$extras," == *",all,"* ]]; then
  command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || need_apt+=(chromium-driver)
fi
apt_install() {
  local sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo apt-get update -qq &&
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@"
}
if ((${#need_apt[@]})); then
  stage "installing Debian packages (${need_apt[*]})" apt_install "${need_apt[@]}"
fi

[[ -x .venv/bin/python ]] || stage "creating .venv" "$python" -m venv .venv
stamp=".venv/.gaca-installed-$extras"
# The CPU extras install under constraints.txt (exact versions behind the reference figures).
constraints=(-c constraints.txt)
[[ ",$extras," == *",gpu,"* ]] && constraints=()
hash=$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$hash" ]]; then
  pip=(.venv/bin/python -m pip install --disable-pip-version-check --no-input)
  stage "upgrading pip" "${pip[@]}" --upgrade pip
  # torch first and pinned: the local CPU wheel, never a multi-GB CUDA build.
  stage "installing torch 2.13.0 (CPU)" "${pip[@]}" "torch==2.13.0"
  stage "installing gaca[$extras] and its dependencies (a few minutes)" \
    "${pip[@]}" "${constraints[@]}" -e ".[$extras]"
  echo "$hash" > "$stamp"
  echo "setup: .venv ready (apt's and pip's output: $log)"
fi
