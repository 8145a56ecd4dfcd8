#!/usr/bin/env bash
# One prepared GPU session (issue 27): every stage under its own time limit, every line streamed as it happens
# (python -u, stdbuf, tee), and a report that is written even when a stage fails or the call is cut short.
#
#   scripts/gpu_session.sh [--dry-run] [--budget-s 480]
#
# On the device machine (torch 2.11 and Triton 3.6 in its python3; no network): carry .whl, made here first by
# scripts/fetch_gpu_wheels.sh (warpforge's missing dependencies as cp312 wheels, and a bubblewrap .deb), e.g.
#   run(command="bash scripts/gpu_session.sh", carry=[".whl"], timeout_s=560)
# --dry-run runs every stage on this machine's CPU (CI does, .ci/run): the interpret backend stands in for
# cuda, and the GPU-only steps (ceilings, torch.compile, recordings, GPU tests) say they were skipped, so that
# nothing but the GPU itself is untested when one is at hand.
#
# Stages and their limits (seconds; they sum to the budget's 8 minutes, 480 s, and scale with --budget-s; each
# streams, so a stage cut at its limit keeps what finished, in the order a short lease must not lose):
#   install   20  carried wheels into the image's site-packages (the children run `python -I`: no PYTHONPATH),
#                 a .pth pointing at src/, bubblewrap unpacked from its .deb onto PATH
#   env       40  versions, GPU, the sandbox children get (isolation.probe)
#   manifest 200  the adversarial manifest, each verdict streamed (benchmarks/gpu_check.py --stages manifest)
#   campaign 150  a short live campaign per task: best, speedup vs eager and vs torch.compile(max-autotune)
#   record    45  recordings of whole feasible spaces (benchmarks/record_spaces.py), softmax first
#   tests     25  pytest -m gpu of the evaluator
# Reports: benchmarks/results/gpu_session_<gpu>_<date>.md (+ the log, gpu_check's report and recordings),
# copied into $OUT when it is set (at most 8 files come back from there).
set -uo pipefail
cd "$(dirname "$0")/.."
DRY=0
BUDGET=480
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --budget-s) BUDGET=$2; shift ;;
    *) echo "usage: scripts/gpu_session.sh [--dry-run] [--budget-s SECONDS]" >&2; exit 2 ;;
  esac
  shift
done
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && [ "$DRY" = 1 ] && PY=.venv/bin/python
STAMP=$(date -u +%Y-%m-%d_%H%M)
if [ "$DRY" = 1 ]; then
  RESULTS=${OUT:-$(mktemp -d /tmp/gpu_session_dry.XXXXXX)}  # a dry run never writes into the repo's results
  NAME=gpu_session_dry_run_$STAMP
else
  RESULTS=benchmarks/results
  NAME=gpu_session_$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr -c 'A-Za-z0-9\n' _)_$STAMP
fi
mkdir -p "$RESULTS"
LOG=$RESULTS/$NAME.log
REPORT=$RESULTS/$NAME.md
: >"$LOG"
touch "$LOG.start"  # a marker: files newer than it were written by this session
T0=$(date +%s)
STATUS=()
FAILED=0
# Scale every stage's limit to the budget (the defaults above are for 480 s).
lim() { echo $(( $1 * BUDGET / 480 )); }

finish() {
  {
    echo "# GPU session $NAME ($([ "$DRY" = 1 ] && echo 'dry run on the CPU' || echo 'device'))"
    echo
    echo "| stage | exit | seconds | limit |"
    echo "|---|---|---|---|"
    for row in "${STATUS[@]}"; do echo "$row"; done
    echo
    echo "total $(( $(date +%s) - T0 )) s of a $BUDGET s budget. Full log: $(basename "$LOG")."
    # this session's gpu_check reports only (benchmarks/results holds earlier sessions' too)
    find "$RESULTS" -maxdepth 1 -name 'gpu_check_*.md' -newer "$LOG.start" | sort | while read -r f; do
      echo; echo "---"; cat "$f"
    done
  } >"$REPORT"
  if [ -n "${OUT:-}" ] && [ "$RESULTS" != "$OUT" ]; then
    mkdir -p "$OUT" && cp "$REPORT" "$LOG" "$OUT"/ 2>/dev/null
    [ -f "$RESULTS/recordings.tar.gz" ] && cp "$RESULTS/recordings.tar.gz" "$OUT"/
  fi
  rm -f "$LOG.start"
  echo "report: $REPORT"
  exit "$FAILED"  # nonzero when a stage failed (CI runs the dry run); the report is written either way
}
trap finish EXIT

# stage NAME LIMIT COMMAND...: run under `timeout`, stream through tee into the log, record exit and time.
stage() {
  local name=$1 limit=$2
  shift 2
  local t=$(date +%s)
  echo "=== $name (limit ${limit} s) at +$(( t - T0 )) s" | tee -a "$LOG"
  timeout --kill-after=10 "$limit" stdbuf -oL -eL "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 124 ] && echo "=== $name: stopped at its ${limit} s limit" | tee -a "$LOG"
  [ "$rc" != 0 ] && FAILED=1
  STATUS+=("| $name | $rc | $(( $(date +%s) - t )) | $limit |")
  return 0
}
skip() { echo "=== $1: skipped ($2)" | tee -a "$LOG"; STATUS+=("| $1 | skipped: $2 | 0 | - |"); }

install_wheels() {
  if [ ! -d .whl ]; then
    echo "no .whl folder: run scripts/fetch_gpu_wheels.sh here, then carry .whl"
    [ "$DRY" = 1 ] && return 0 || return 3
  fi
  if [ "$DRY" = 1 ]; then  # resolve the carried wheels against the device's Python 3.12, install nothing
    "$PY" -m pip install -q --dry-run --ignore-installed --no-index --no-deps --only-binary=:all: \
      --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --target /tmp/gpu_session_site .whl/*.whl && echo "wheels resolve for cp312"
    return
  fi
  "$PY" -m pip install -q --no-index --no-deps --no-compile .whl/*.whl || return 3
  echo "$PWD/src" >"$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/warpforge-dev.pth"
  for deb in .whl/bubblewrap_*.deb; do
    [ -f "$deb" ] && dpkg -x "$deb" /tmp/bwrap && echo "bubblewrap unpacked: /tmp/bwrap/usr/bin/bwrap"
  done
  "$PY" -c 'import warpforge, optuna, pydantic, sqlalchemy; print("imports ok:", warpforge.__file__)'
}

environment() {
  "$PY" -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__,
"triton", triton.__version__, "cuda", torch.cuda.is_available(),
torch.cuda.get_device_name(0) if torch.cuda.is_available() else "(no GPU)")'
  nvidia-smi -L 2>/dev/null || echo "nvidia-smi: none here"
  "$PY" -c 'from warpforge.evaluator.sandbox.isolation import probe; print("sandbox:", probe().summary())'
}

export PATH=/tmp/bwrap/usr/bin:$PATH DRY PY
export -f install_wheels environment  # `timeout` runs programs: the two shell stages run through bash -c
stage install "$(lim 20)" bash -c install_wheels
stage env "$(lim 40)" bash -c environment
if [ "$DRY" = 1 ]; then
  stage manifest "$(lim 150)" "$PY" -u benchmarks/gpu_check.py --dry-run --stages ceilings,manifest \
    --fixtures control_double,io_report_flood --results "$RESULTS"
  stage campaign "$(lim 160)" "$PY" -u benchmarks/gpu_check.py --dry-run --stages campaigns --tasks softmax \
    --trials 2 --budget-s "$(lim 60)" --results "$RESULTS"
  skip record "GPU only: record_spaces.py times every configuration on the device"
  skip tests "GPU only: pytest -m gpu skips everything without CUDA"
else
  stage manifest "$(lim 200)" "$PY" -u benchmarks/gpu_check.py --stages ceilings,manifest --results "$RESULTS"
  stage campaign "$(lim 150)" "$PY" -u benchmarks/gpu_check.py --stages campaigns --budget-s "$(lim 100)" \
    --trials 8 --compile-mode max-autotune --results "$RESULTS"
  stage record "$(lim 45)" "$PY" -u benchmarks/record_spaces.py --tasks softmax,rmsnorm,matmul \
    --budget-s "$(lim 35)" --out "$RESULTS/recordings"
  [ -d "$RESULTS/recordings" ] && tar czf "$RESULTS/recordings.tar.gz" -C "$RESULTS" recordings
  stage tests "$(lim 25)" "$PY" -m pytest -m gpu tests/evaluator -k "not every_fixture" -q -x -p no:cacheprovider \
    -rA --junitxml="$RESULTS/gpu_tests.xml"
fi
