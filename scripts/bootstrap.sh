#!/usr/bin/env bash
# Create .venv and install warpforge with its dev tools. Idempotent: re-running after a pyproject change
# reinstalls; otherwise it returns at once.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
stamp=.venv/.installed
if [ -f "$stamp" ] && [ "$stamp" -nt pyproject.toml ]; then exit 0; fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  # No CUDA: install torch's CPU build first so that the dependency resolver never pulls the
  # multi-GB CUDA build from PyPI. A local wheel (pip find-links) is preferred; else PyTorch's CPU index.
  # torch's own dependencies (filelock, sympy, ...) then come from PyPI with the project's.
  if ! .venv/bin/pip show torch >/dev/null 2>&1; then
    .venv/bin/pip install -q --no-index --no-deps torch==2.13.0 2>/dev/null \
      || .venv/bin/pip install -q --timeout 20 --retries 1 torch==2.13.0 \
           --index-url https://download.pytorch.org/whl/cpu --extra-index-url https://pypi.org/simple
  fi
fi
.venv/bin/pip install -q -e '.[dev]'
touch "$stamp"
