#!/usr/bin/env bash
# Watch mode on the H200: scripts/bench_watch_gpu.py (prewarmed worker, paired representative
# gate; with and without the worker's CUPTI warm-up). Carry .whl.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD FIBTUI_CACHE_DIR=/tmp/fibtui-cache GIT_PYTHON_REFRESH=quiet
mkdir -p $OUT/watch
python3 scripts/bench_watch_gpu.py --rounds 3 2>&1 | grep -v Warning | tee $OUT/watch/bench_watch_gpu.txt
