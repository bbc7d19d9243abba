#!/usr/bin/env bash
# Lint, then run the test suite (after scripts/install.sh) on one pytest-xdist worker per CPU, a test file per
# worker at a time (module fixtures are built once); CLINRAG_TEST_WORKERS=0 runs in this process. `--fast`
# (first) runs the unit tier alone: no server, model or subprocess (tiers: tests/conftest.py). Extra arguments
# go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${CLINRAG_VENV:-.venv}
tier=()
if [[ ${1:-} == --fast ]]; then
  shift
  tier=(-m "not integration and not slow")
fi
"$VENV/bin/ruff" check src tests benchmarks
exec "$VENV/bin/python" -m pytest -n "${CLINRAG_TEST_WORKERS:-auto}" --dist loadfile "${tier[@]}" "$@"
