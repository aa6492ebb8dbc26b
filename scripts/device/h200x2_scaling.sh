#!/usr/bin/env bash
# Where the 2-GPU sweep loses time (kind nvidia-h200-x2). The same paired demo sweep (50 workloads
# x 3 repeats) with: one GPU; two GPUs; two one-GPU sweeps at once in separate processes (is a
# job slower when another GPU is busy, whoever runs it?); two GPUs with OMP_NUM_THREADS=4.
# Each split into start-up / jobs / end (scripts/bench/tsrun.py), plus the worker's own per-job wall.
# Carry .whl.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD FIBTUI_CACHE_DIR=/tmp/fibtui-cache GIT_PYTHON_REFRESH=quiet
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/scaling
mkdir -p $R
nproc; lscpu | grep -E "Model name|^CPU\(s\)|Thread|NUMA node\(s\)"; nvidia-smi topo -m 2>/dev/null | head -4
for w in /tmp/ws /tmp/ws2; do rm -rf $w && python3 -m fibtui demo $w --no-tui --no-history >/dev/null; done
args() { echo "-m fibtui run --backend local --workloads all --repeats 3 --baseline $1/solution/triton --solution $1/candidates/v2_smallb_splitv --workspace $1 --json"; }
python3 $(args /tmp/ws) --workers 2 > /dev/null 2>&1   # reference and Triton caches warm
python3 -c "import time; t=time.time(); import torch, triton; torch.cuda.init(); print('import torch+triton+cuda init', round(time.time()-t, 2), 's')"
T="python3 scripts/bench/tsrun.py"
$T $R/one.json -- python3 $(args /tmp/ws) --workers 1
$T $R/two.json -- python3 $(args /tmp/ws) --workers 2
CUDA_VISIBLE_DEVICES=0 $T $R/apart0.json -- python3 $(args /tmp/ws) --workers 1 &
CUDA_VISIBLE_DEVICES=1 $T $R/apart1.json -- python3 $(args /tmp/ws2) --workers 1 &
wait
OMP_NUM_THREADS=4 $T $R/two_omp4.json -- python3 $(args /tmp/ws) --workers 2
$T $R/one_again.json -- python3 $(args /tmp/ws) --workers 1
$T $R/two_again.json -- python3 $(args /tmp/ws) --workers 2
python3 - $R <<'PY'
import json, sys, statistics
from pathlib import Path
R = Path(sys.argv[1])
for name in ("one", "two", "apart0", "apart1", "two_omp4", "one_again", "two_again"):
    t = json.loads((R / f"{name}.json").read_text())
    rec = json.loads((R / f"{name}.stdout").read_text())
    walls = {}
    for j in rec["jobs"]:
        walls[(j["uuid"], j["repeat"])] = j["wall_s"]
    slots = sorted({j["timing"].get("slot") for j in rec["jobs"]})
    print(f"{name:10s} wall {t['wall_s']:6.2f} s  start-up {t['first_result_s']:5.2f} s  jobs {t['last_result_s'] - t['first_result_s']:5.2f} s  "
          f"end {t['wall_s'] - t['last_result_s']:4.2f} s  | worker wall per pair: median {statistics.median(walls.values())*1000:.1f} ms, "
          f"sum {sum(walls.values()):.2f} s | slots {slots} | {rec['summary']['passed']}/{rec['summary']['total']} PASSED")
PY
tar czf $OUT/scaling.tgz -C $OUT scaling
