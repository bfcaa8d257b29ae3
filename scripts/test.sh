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
# the package byte-compiled once: the suite starts many `python -m tools` processes, and where the environment sets
# PYTHONDONTWRITEBYTECODE (this machine's does) each one compiled every module it imports again (0.4 s a process)
python -m compileall -q -j 0 tools experiments >/dev/null
# one worker per core: two per core ran the suite in 427-454 s against 476 s, but at that load the runner read one
# hack's step lines so late that their bounds could not tell its replay from a real run (the `replay` case of
# tests/integrity escaped `clock-replay` once in five runs): the suite's own load must not let a hack through
python -m pytest -q -n auto "$@"
