# Two commands do all the set-up: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY_STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
# uv installs the venv from uv.lock; pip fetches this pinned uv into the venv first, so nothing
# beyond Python is assumed. After editing pyproject.toml, run `.venv/bin/uv lock`; commit uv.lock.
UV_VERSION := 0.13.9
UV := $(BIN)/uv
UV_SYNC := UV_PROJECT_ENVIRONMENT=$(VENV) UV_PYTHON_DOWNLOADS=never $(UV) sync --locked

.PHONY: venv demo demo-restore test test-e2e lint bench soak mutation mutation-file function-zip policy-pack dist adoption clean
.DEFAULT_GOAL := venv

venv: $(PY_STAMP)

# --locked: a uv.lock that no longer matches pyproject.toml stops here instead of re-resolving.
$(PY_STAMP): pyproject.toml uv.lock
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required; set PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(UV_SYNC) --quiet --extra dev
	@touch $@

$(NODE_STAMP): package.json package-lock.json
	@command -v node >/dev/null || { echo "Node.js 20+ is required for the Azurite emulator"; exit 1; }
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

demo: $(PY_STAMP) $(NODE_STAMP)
	$(BIN)/safetynet demo

demo-restore: $(PY_STAMP) $(NODE_STAMP)
	$(BIN)/safetynet demo --scenario restore

lint: $(PY_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The suite without its long end-to-end runs (marked e2e); .ci/run runs both targets. Two
# workers (pytest-xdist), each test file whole on one of them: most of the suite waits on
# Azurite, PostgreSQL and child processes, so two workers take 315 s where one took 712 s on this
# 2-core machine (docs/development.md). PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= 2
test: lint $(NODE_STAMP)
	$(BIN)/pytest -m "not e2e" -n $(PYTEST_WORKERS) --dist loadfile

test-e2e: $(PY_STAMP) $(NODE_STAMP)
	$(BIN)/pytest -m e2e

bench: $(PY_STAMP) $(NODE_STAMP)
	$(BIN)/python -m benchmarks

# The CrossGuard pack's own virtualenv (PulumiPolicy.yaml: virtualenv: venv), with this working
# copy as the library its requirements name.
policy-pack: policies/venv/.installed

# The pack's dependencies are held to uv.lock's versions too (exported as constraints).
policies/venv/.installed: $(PY_STAMP) policies/requirements.txt
	$(PYTHON) -m venv policies/venv
	mkdir -p policies/wheels  # requirements.txt's --find-links: uv wants the folder to exist
	$(UV) export --frozen --quiet --no-hashes --no-emit-project --extra infra \
		--output-file policies/venv/lock-constraints.txt
	$(UV) pip install --quiet --python policies/venv/bin/python \
		--constraints policies/venv/lock-constraints.txt -e . -r policies/requirements.txt
	@touch $@

# Long runs of the proofs: 2,000 interleavings, the fault tests five times; figures go to
# docs/reliability.md.
soak: $(PY_STAMP) $(NODE_STAMP)
	$(BIN)/python -m tests.soak_run

# mutmut over blob_safetynet/policies/rules and the sweeper's core ([tool.mutmut] in pyproject.toml);
# CPU-heavy: about 20-40 minutes on 2 cores. Score and survivors go to docs/reliability.md.
mutation: $(PY_STAMP) $(NODE_STAMP)
	$(UV_SYNC) --quiet --extra dev --extra mutation
	$(BIN)/python -m tests.mutation_run

# One file alone with a short timeout, its timeouts judged again one by one (the run above
# does not finish sweep.py on 2 cores): `make mutation-file MUTATE=blob_safetynet/sweeper/sweep.py`.
MUTATE ?= blob_safetynet/sweeper/sweep.py
mutation-file: $(PY_STAMP) $(NODE_STAMP)
	$(UV_SYNC) --quiet --extra dev --extra mutation
	$(BIN)/python -m tests.mutation_file $(MUTATE)

# The release artifacts: sdist and wheel in dist/ (the version is pyproject.toml's, read back at
# run time through importlib.metadata).
dist: $(PY_STAMP)
	rm -rf dist
	$(UV) build --out-dir dist

# The wheel as a platform team uses it, outside this checkout (tests/adoption_run.py): a fresh
# venv with the wheel and [infra], a user project with its own infra/ and policies/.
adoption: $(PY_STAMP) $(NODE_STAMP)
	$(BIN)/python -m tests.adoption_run

function-zip: $(PY_STAMP)
	$(BIN)/safetynet build-function --output build/sweeper-function.zip

clean:
	rm -rf $(VENV) node_modules build dist policies/venv mutants *.egg-info .hypothesis .pytest_cache .mypy_cache .ruff_cache
