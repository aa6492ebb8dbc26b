#!/usr/bin/env bash
# The host view on the H200: `fibtui ncu host` for the demo's Triton kernel and its plain-PyTorch
# version at batch 1 and 64 (one kernel per call vs a dozen small launches). Carry .whl.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD FIBTUI_CACHE_DIR=/tmp/fibtui-cache GIT_PYTHON_REFRESH=quiet
R=$OUT/host
mkdir -p $R
rm -rf /tmp/ws && python3 -m fibtui demo /tmp/ws --no-tui --no-history >/dev/null
W=a8efeb8a,200a3ebd
python3 -m fibtui ncu host --workload $W --calls 20 --workspace /tmp/ws > $R/host_triton.txt 2>&1
python3 -m fibtui ncu host --workload $W --calls 20 --workspace /tmp/ws --json > $R/host_triton.json 2>&1
python3 -m fibtui ncu host --workload $W --calls 20 --solution /tmp/ws/candidates/torch_eager --workspace /tmp/ws > $R/host_torch_eager.txt 2>&1
python3 -m fibtui ncu host --workload $W --calls 20 --solution /tmp/ws/candidates/torch_eager --workspace /tmp/ws --json > $R/host_torch_eager.json 2>&1
cat $R/host_triton.txt $R/host_torch_eager.txt
