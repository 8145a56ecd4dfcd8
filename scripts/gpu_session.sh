#!/usr/bin/env bash
# Every GPU check in one call on a lent GPU machine whose image has torch and Triton but not warpforge's
# other dependencies, and no network (see benchmarks/results/gpu_session_H200_2026-11-29.md).
#
# Here, once, before the call (wheels for the image's Python 3.12; .whl/ is git-ignored via .git/info/exclude):
#   mkdir -p .whl && for p in optuna==5.0.0 colorlog alembic Mako SQLAlchemy pydantic pydantic_core \
#       typing-inspection annotated-types platformdirs typing_extensions; do
#     python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl $p; done
# (pydantic and pydantic_core must be a matching pair: pin both to what `pip download pydantic` asks for.)
# The call: carry .whl, run `bash scripts/gpu_session.sh`. Each stage streams into $OUT, so a stage
# stopped at its limit keeps what finished. Stage limits (s) are arguments: CHECK TESTS RECORD.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu_session}
mkdir -p "$OUT"
check_s=${1:-300}
tests_s=${2:-150}
record_s=${3:-0}
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile .whl/*.whl || exit 3
# The evaluator's children run `python -I` (PYTHONPATH ignored), so point site-packages at src/.
echo "$PWD/src" > "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/warpforge-dev.pth"
nvidia-smi -L
python3 -c 'import torch, triton, warpforge; print(torch.__version__, triton.__version__, torch.cuda.get_device_name(0))'
timeout "$check_s" python3 benchmarks/gpu_check.py --budget-s $((check_s / 2)) 2>&1 | grep -v "A new study created"
echo "gpu_check ended after $(( $(date +%s) - t0 )) s"
# -s: each test's output as it happens; junit XML keeps the verdicts of the tests that finished.
# The manifest already ran in gpu_check (streamed); here the rest of the GPU tests.
timeout "$tests_s" python3 -m pytest -m gpu tests/kernels tests/evaluator/test_adversarial.py -k "not every_fixture" -q -s -rA \
  -p no:cacheprovider --timeout "$tests_s" --durations=10 --junitxml="$OUT/gpu_tests.xml" > "$OUT/pytest_gpu.log" 2>&1
tail -40 "$OUT/pytest_gpu.log"
echo "tests ended after $(( $(date +%s) - t0 )) s"
if [ "$record_s" -gt 0 ]; then
  timeout "$record_s" python3 benchmarks/record_spaces.py --budget-s $((record_s - 30)) --out "$OUT/recordings" \
    && tar czf "$OUT/recordings.tar.gz" -C "$OUT" recordings && rm -rf "$OUT/recordings"
fi
echo "all ended after $(( $(date +%s) - t0 )) s"
