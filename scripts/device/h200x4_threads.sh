#!/usr/bin/env bash
# Why a worker's job gets slower when more GPUs of the host are busy (4-GPU host, kind
# nvidia-h200-x4): the paired demo sweep, 10 repeats, on 1 GPU and on 4 GPUs with the default
# thread settings, OMP_NUM_THREADS=16 and OMP_NUM_THREADS=1; per-pair worker wall time. Carry .whl.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD FIBTUI_CACHE_DIR=/tmp/fibtui-cache GIT_PYTHON_REFRESH=quiet
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/threads
mkdir -p $R
rm -rf /tmp/ws && python3 -m fibtui demo /tmp/ws --no-tui --no-history >/dev/null
A="-m fibtui run --backend local --workloads all --baseline /tmp/ws/solution/triton --solution /tmp/ws/candidates/v2_smallb_splitv --workspace /tmp/ws --json --repeats 10"
python3 $A --repeats 1 --workers 4 > /dev/null 2>&1   # caches warm
python3 scripts/bench/tsrun.py $R/g1.json -- python3 $A --workers 1
python3 scripts/bench/tsrun.py $R/g4.json -- python3 $A --workers 4
OMP_NUM_THREADS=16 python3 scripts/bench/tsrun.py $R/g4_omp16.json -- python3 $A --workers 4
OMP_NUM_THREADS=1 python3 scripts/bench/tsrun.py $R/g4_omp1.json -- python3 $A --workers 4
python3 - $R <<'PY'
import json, statistics, sys
from pathlib import Path
R = Path(sys.argv[1])
for name in ("g1", "g4", "g4_omp16", "g4_omp1"):
    t = json.loads((R / f"{name}.json").read_text())
    rec = json.loads((R / f"{name}.stdout").read_text())
    walls = {(j["uuid"], j["repeat"]): j["wall_s"] for j in rec["jobs"]}
    print(f"{name:9s} wall {t['wall_s']:6.2f} s, jobs {t['last_result_s'] - t['first_result_s']:6.2f} s, "
          f"median pair wall {statistics.median(walls.values()) * 1000:.1f} ms, {rec['summary']['passed']}/{rec['summary']['total']} PASSED")
PY
gzip -f $R/*.stdout
