# Gatehouse. `make run` works on a fresh clone with nothing set (SQLite + embedded Redis);
# DATABASE_URL / REDIS_URL from the environment are used when present.
SHELL := /bin/bash
# The venv's interpreter: Debian's /usr/bin/python3.11 when it can build a venv (python3.11-venv),
# else the first python3.11 on the PATH. Debian's executable has libpython linked in; a default
# pyenv build loads it as a shared library and has no profile-guided optimisation, and ran the
# stack on about a sixth more CPU (README, "Performance"). Any 3.11 works: PYTHON=... overrides;
# a .venv already built is kept (remove it to rebuild from the faster interpreter).
PYTHON ?= $(shell /usr/bin/python3.11 -c "import ensurepip" 2>/dev/null && echo /usr/bin/python3.11 || echo python3.11)
VENV := .venv
PY := $(VENV)/bin/python
MANAGE := $(PY) manage.py
STAMP := $(VENV)/.requirements-stamp
PYTEST_ARGS ?=

.PHONY: venv run migrate test test-postgres test-embedded check lint fmt bench screenshots

venv: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstall only when a requirements file is newer than the last install.
$(STAMP): requirements.txt requirements-dev.txt requirements-nodeps.txt | $(PY)
	$(PY) -m pip install -r requirements-dev.txt
	$(PY) -m pip install --no-deps -r requirements-nodeps.txt
	touch $@

run: venv
	$(MANAGE) migrate --noinput
	$(MANAGE) collectstatic --noinput -v0
	$(MANAGE) seed_demo
	$(MANAGE) serve

migrate: venv
	$(MANAGE) migrate --noinput

# The suite twice: on PostgreSQL + Redis, then on SQLite + the embedded Redis.
test: venv
	$(MAKE) --no-print-directory test-postgres
	$(MAKE) --no-print-directory test-embedded

# Defaults for a local Postgres and Redis; tests use Redis db 15 (flushed) so db 0 is left alone.
test-postgres: export DATABASE_URL ?= postgres://root@127.0.0.1:5432/gatehouse
test-postgres: export REDIS_URL ?= redis://127.0.0.1:6379/15
test-postgres: venv
	@if command -v createdb >/dev/null; then createdb -h 127.0.0.1 -U root gatehouse 2>/dev/null || true; fi
	$(PY) -m pytest $(PYTEST_ARGS)

test-embedded: venv
	env -u DATABASE_URL -u REDIS_URL EMBEDDED_REDIS_PORT=6391 $(PY) -m pytest -m "not postgres_only" $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .

check: lint test

fmt: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# Benchmarks print JSON with figures as ratios to this machine's limits (see the README).
bench: venv
	$(MANAGE) migrate --noinput -v0
	$(MANAGE) bench_checkpoints --turns 50 --json
	$(MANAGE) bench_checkpoints --turns 200 --json
	$(MANAGE) bench_checkpoints --turns 200 --threads 16 --writers 4 --history-size 0 --json
	$(MANAGE) bench_checkpoints --turns 200 --threads 32 --writers 32 --history-size 0 --json
	$(MANAGE) bench_threads --threads 100000 --json
	$(MANAGE) bench_policies --policies 100 --json
	$(MANAGE) bench_langgraph --json
	$(MANAGE) bench_load --threads 1000 --model-delay-ms 2000 --json
	$(MANAGE) bench_load --threads 500 --model-delay-ms 0 --json
	$(MANAGE) bench_push --sockets 1 50 --gates 20 --json

# README screenshots, taken against live services (tests/screenshots.py is not part of `make test`).
screenshots: export DATABASE_URL ?= postgres://root@127.0.0.1:5432/gatehouse
screenshots: export REDIS_URL ?= redis://127.0.0.1:6379/15
screenshots: venv
	$(PY) -m pytest tests/screenshots.py -p no:cacheprovider -q
