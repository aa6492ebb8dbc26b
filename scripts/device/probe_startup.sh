#!/usr/bin/env bash
# Where a sweep's ~10 s before its first result go, on the H200: py-spy samples the runner and its
# worker (--subprocesses) during a representative gate; collapsed stacks are written to $OUT.
# Carry .whl and .probe-whl (py-spy).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .probe-whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD FIBTUI_CACHE_DIR=/tmp/fibtui-cache GIT_PYTHON_REFRESH=quiet
R=$OUT/probe
mkdir -p $R
rm -rf /tmp/ws && python3 -m fibtui demo /tmp/ws --no-tui --no-history >/dev/null
G="-m fibtui run --backend local --workloads rep --baseline /tmp/ws/solution/triton --solution /tmp/ws/candidates/v2_smallb_splitv --workspace /tmp/ws"
python3 $G > /dev/null 2>&1   # caches warm, as in the timed sweeps
python3 scripts/bench/tsrun.py $R/plain.json -- python3 $G
/tmp/site/bin/py-spy record --subprocesses --idle --rate 250 --format raw -o $R/startup.txt -- python3 $G > $R/pyspy.log 2>&1 || tail -5 $R/pyspy.log
ls -la $R
