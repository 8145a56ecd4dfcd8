# The two commands of the README: `make run` (a campaign on the embedded SQLite default) and `make test`.
.PHONY: run test test-slow test-ci test-all lint venv

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

# The slow tier: every template compiled for sm_90, every adversarial fixture, export's fresh-venv round trips, the
# dashboard in headless chromium, the optimize flows, the planner's full validation (over an hour on 2 cores; run it
# before a release). .ci/run runs the default tier and `make test-ci`: the slow tests marked `ci` (the adversarial
# fixtures that run code, the browser, export's fresh-venv round trip; 16 min on 2 cores), within CI's budget.
test-slow: venv
	.venv/bin/python -m pytest -q -m slow -n $(PYTEST_WORKERS) --dist worksteal --durations=25 $(PYTEST_ARGS)

# One file per worker (--dist loadfile): their module fixtures (a fresh venv, seeded campaigns: 3-7 min each on
# 2 cores) are built once, not once per worker.
test-ci: venv
	.venv/bin/python -m pytest -q -m "slow and ci" -n $(PYTEST_WORKERS) --dist loadfile --durations=25 $(PYTEST_ARGS)

test-all: test test-slow

lint: venv
	.venv/bin/ruff check src tests benchmarks
	.venv/bin/ruff format --check src tests benchmarks
	.venv/bin/mypy
