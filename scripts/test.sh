#!/usr/bin/env bash
# Lint, then run the test suite (after scripts/install.sh). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${CLINRAG_VENV:-.venv}
"$VENV/bin/ruff" check src tests benchmarks
exec "$VENV/bin/python" -m pytest "$@"
