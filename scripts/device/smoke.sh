#!/usr/bin/env bash
# First look at a lent H200: versions, tools, one gate of fibtui on the demo (unpaired and paired),
# and the text page of the shared ncu report. Run on the device machine from the repo root.
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
export FIBTUI_CACHE_DIR=/tmp/fibtui-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
python3 -c "import torch, triton, sys; print(sys.version.split()[0], torch.__version__, triton.__version__, torch.cuda.get_device_name())"
ncu --version | tail -1
python3 -c "import pynvml; pynvml.nvmlInit(); print('nvml ok')" || true
rm -rf /tmp/ws && python3 -m fibtui demo /tmp/ws --no-tui --no-history
time python3 -m fibtui run --backend local --workloads rep --workspace /tmp/ws
time python3 -m fibtui run --backend local --workloads rep --workspace /tmp/ws \
  --baseline /tmp/ws/solution/triton --solution /tmp/ws/candidates/v2_smallb_splitv
tar czf $OUT/smoke_runs.tgz -C /tmp/ws optimize_ops
ncu --import .device/gdn_b64.ncu-rep --page details > $OUT/gdn_b64_details.txt 2>&1; head -5 $OUT/gdn_b64_details.txt
tail -5 /tmp/ws/optimize_ops/runs/*/worker-0.log
python3 -c "import torch; print('gpus', torch.cuda.device_count())"
time python3 -m fibtui run --backend local --workloads rep --workers 2 --workspace /tmp/ws \
  --baseline /tmp/ws/solution/triton --solution /tmp/ws/candidates/v2_smallb_splitv
tar czf $OUT/smoke_runs.tgz -C /tmp/ws optimize_ops
