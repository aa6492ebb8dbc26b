#!/usr/bin/env bash
# The demo's paired sweep with 20 repeats (2,000 jobs) on 1, 2 and 4 GPUs of one host (kind
# nvidia-h200-x4): does the one-runner fan-out keep scaling past two GPUs? Split by
# scripts/bench/tsrun.py into start-up and jobs. Carry .whl.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD FIBTUI_CACHE_DIR=/tmp/fibtui-cache GIT_PYTHON_REFRESH=quiet
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/x4
mkdir -p $R
nvidia-smi -L
rm -rf /tmp/ws && python3 -m fibtui demo /tmp/ws --no-tui --no-history >/dev/null
A="-m fibtui run --backend local --workloads all --baseline /tmp/ws/solution/triton --solution /tmp/ws/candidates/v2_smallb_splitv --workspace /tmp/ws --json"
python3 $A --workers 4 > /dev/null 2>&1   # caches warm
for n in 1 2 4; do python3 scripts/bench/tsrun.py $R/gpus$n.json -- python3 $A --repeats 20 --workers $n; done
python3 - $R <<'PY'
import json, sys
from pathlib import Path
R = Path(sys.argv[1])
base = None
for n in (1, 2, 4):
    t = json.loads((R / f"gpus{n}.json").read_text())
    rec = json.loads((R / f"gpus{n}.stdout").read_text())
    jobs = t["last_result_s"] - t["first_result_s"]
    base = base or (t["wall_s"], jobs)
    slots = {}
    for j in rec["jobs"]:
        slots.setdefault((j["uuid"], j["repeat"]), set()).add(j["timing"].get("slot"))
    print(f"{n} GPU(s): wall {t['wall_s']:.2f} s ({base[0] / t['wall_s']:.2f}x), start-up {t['first_result_s']:.2f} s, "
          f"jobs {jobs:.2f} s ({base[1] / jobs:.2f}x), {rec['summary']['passed']}/{rec['summary']['total']} PASSED, "
          f"pairs on one GPU {sum(len(v) == 1 for v in slots.values())}/{len(slots)}")
PY
gzip -f $R/*.stdout
