#!/usr/bin/env bash
# Fills .whl/ (git-ignored) with what the device machine lacks for scripts/gpu_session.sh: warpforge's
# dependencies that its image (python3 3.12 with torch 2.11, Triton 3.6, numpy, scipy, typer, rich, PyYAML,
# jinja2, tqdm: /work/.library/device/KINDS.md) does not hold, as cp312 manylinux wheels, and bubblewrap's .deb
# for the sandbox. Run here (with network), then carry .whl: it is a few MB of the 64 MiB a call may carry.
# pydantic and pydantic_core must be a matching pair: pydantic's METADATA pins the core it needs.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
PIP=(python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp
     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl)
"${PIP[@]}" pydantic==2.14.4
core=$(unzip -p .whl/pydantic-2.14.4-*.whl '*/METADATA' | sed -n 's/^Requires-Dist: pydantic-core==\([0-9.]*\).*/\1/p')
for p in optuna==5.0.0 colorlog alembic Mako SQLAlchemy "pydantic_core==$core" typing-inspection annotated-types \
         platformdirs "typing_extensions>=4.16"; do
  "${PIP[@]}" "$p"
done
if command -v apt-get >/dev/null 2>&1; then
  (cd .whl && apt-get download -q bubblewrap >/dev/null 2>&1) || echo "bubblewrap .deb: not downloaded (no apt here)"
fi
ls -la .whl
du -sh .whl
