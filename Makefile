# The two commands of the README: `make run` (a campaign on the embedded SQLite default) and `make test`.
.PHONY: run test test-export lint venv

venv:
	./scripts/bootstrap.sh

run: venv
	.venv/bin/warpforge doctor
	.venv/bin/warpforge run softmax --trials 20

# The default tier: no GPU, no network. PostgreSQL tests start a throwaway server when its binaries are
# installed (.ci/run installs them); GPU tests are skipped without CUDA.
test: venv
	.venv/bin/python -m pytest -q -m "not slow" $(PYTEST_ARGS)

# export's round trip (slow: a fresh venv with torch and triton runs an exported package's tests).
test-export: venv
	.venv/bin/python -m pytest -q -m slow tests/export $(PYTEST_ARGS)

lint: venv
	.venv/bin/ruff check src tests benchmarks
	.venv/bin/mypy
