#!/usr/bin/env bash
# Start-up costs of a GPU worker without a sampler: scripts/device/probe_cupti.py in fresh
# processes (the first torch.profiler session after the CUDA context, before it, in a thread).
set -uo pipefail
for v in after thread before after thread; do python3 scripts/device/probe_cupti.py $v 2>/dev/null; done
python3 -c "import time, statistics; t=time.perf_counter(); import torch; print('import torch', round(time.perf_counter()-t,2))"
