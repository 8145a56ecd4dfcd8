# The two commands of the README: `make run` (a campaign on the embedded SQLite default) and `make test`.
.PHONY: run test test-slow test-all lint venv

venv:
	./scripts/bootstrap.sh

# setup_sandbox.sh installs bubblewrap (root with apt, quietly) and never fails the run.
run: venv
	./scripts/setup_sandbox.sh
	.venv/bin/warpforge doctor
	.venv/bin/warpforge run softmax --trials 20

# The default tier: no GPU, no network. PostgreSQL tests start a throwaway server when its binaries are
# installed (.ci/run installs them); GPU tests are skipped without CUDA.
# Two pytest-xdist workers by default (CI has 2 cores); PYTEST_WORKERS=0 runs in one process. GPU tests are
# never split across workers on one GPU: `-m gpu` runs them alone.
PYTEST_WORKERS ?= 2

test: venv
	.venv/bin/python -m pytest -q -m "not slow" -n $(PYTEST_WORKERS) --dist worksteal --durations=25 $(PYTEST_ARGS)

# The slow tier (.ci/run runs it after `make test`): export's fresh-venv round trip (~10 min), the dashboard
# in headless chromium against real campaigns (~5 min), the planner's full validation and held-out folds.
test-slow: venv
	.venv/bin/python -m pytest -q -m slow -n $(PYTEST_WORKERS) --dist worksteal --durations=25 $(PYTEST_ARGS)

test-all: test test-slow

lint: venv
	.venv/bin/ruff check src tests benchmarks
	.venv/bin/ruff format --check src tests benchmarks
	.venv/bin/mypy
