#!/usr/bin/env bash
# Right after h200_final.sh on the same (warm) machine: `fibtui parity` runs flashinfer-bench
# 0.1.2 in the official shape on the 9 representative workloads of the demo and shows its results
# beside fibtui's gate. Carry .whl-fib (scripts from ../shared/tools/device-wheels.sh).
set -uo pipefail
export PYTHONUNBUFFERED=1
[ -d /tmp/site ] && [ -d /tmp/ws ] || { echo "the machine was not warm: run h200_final.sh first"; exit 3; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site2 .whl-fib/*.whl || exit 1
export PYTHONPATH=/tmp/site:/tmp/site2:$PWD FIBTUI_CACHE_DIR=/tmp/fibtui-cache GIT_PYTHON_REFRESH=quiet
R=$OUT/parity
mkdir -p $R
U=$(cat /tmp/parity_workloads)
python3 -m fibtui parity --print --workloads $U --workspace /tmp/ws > $R/command.txt 2>&1
python3 -m fibtui parity --workloads $U --workspace /tmp/ws > $R/parity.txt 2>&1; echo "parity rc=$?"
python3 -m fibtui parity --status --json --workspace /tmp/ws > $R/status.json 2>&1
tar czf $OUT/parity_ws.tgz -C /tmp/ws optimize_ops/parity
tail -30 $R/parity.txt
