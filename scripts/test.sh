#!/usr/bin/env bash
# Install what the tests need (Python packages, Debian chromium for browser tests) and run them.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e '.[test]'
# Debian packages: chromium for the browser tests, a one-node Slurm for the template runner's real test.
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v slurmctld >/dev/null 2>&1 || need+=(slurmctld slurmd slurm-client munge)
if ((${#need[@]})); then
  apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
fi
export NO_MKDOCS_2_WARNING=1 TF_CPP_MIN_LOG_LEVEL=3
# two workers per core: many tests wait on processes they started (JAX runs, browsers, a Ray head, Slurm), and a
# second worker fills that time (2 cores, one run each on 2026-12-06: 427 s against 476 s with one per core)
# --dist loadgroup: a module with a module-scoped fixture runs on one worker (tests/conftest.py)
python -m pytest -q -n "$(( 2 * $(nproc) ))" --dist loadgroup "$@"
