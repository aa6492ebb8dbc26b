#!/usr/bin/env bash
# Issue 11, supplementary (kind nvidia-h200-x2): the demo's paired sweep with 20 repeats (2,000
# jobs) on one GPU and on two, so the ~10 s of per-worker start-up (torch import + the first CUPTI
# session, measured by probe_cupti.py) is amortized. Split by scripts/bench/tsrun.py. Carry .whl.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD FIBTUI_CACHE_DIR=/tmp/fibtui-cache GIT_PYTHON_REFRESH=quiet
R=$OUT/long
mkdir -p $R
rm -rf /tmp/ws && python3 -m fibtui demo /tmp/ws --no-tui --no-history >/dev/null
A="-m fibtui run --backend local --workloads all --baseline /tmp/ws/solution/triton --solution /tmp/ws/candidates/v2_smallb_splitv --workspace /tmp/ws --json"
python3 $A --workers 2 > /dev/null 2>&1   # caches warm
python3 scripts/bench/tsrun.py $R/one.json -- python3 $A --repeats 20 --workers 1
python3 scripts/bench/tsrun.py $R/two.json -- python3 $A --repeats 20 --workers 2
for n in one two; do
  id=$(python3 -c "import json;print(json.load(open('$R/$n.stdout'))['run_id'])")
  python3 -m fibtui compare $id --workspace /tmp/ws --json > $R/compare_$n.json
  python3 -c "import json;d=json.load(open('$R/compare_$n.json'));print('$n', d['verdict'], round(d['geomean_ratio'],4), [round(x,4) for x in (d['ci_low'], d['ci_high'])])"
done
python3 - $R <<'PY'
import json, sys
from pathlib import Path
R = Path(sys.argv[1])
t = {n: json.loads((R / f"{n}.json").read_text()) for n in ("one", "two")}
for n, x in t.items():
    print(f"{n}: wall {x['wall_s']:.2f} s, start-up {x['first_result_s']:.2f} s, jobs {x['last_result_s'] - x['first_result_s']:.2f} s, {x['results']} results")
print(f"speed-up: wall {t['one']['wall_s'] / t['two']['wall_s']:.2f}x, job phase "
      f"{(t['one']['last_result_s'] - t['one']['first_result_s']) / (t['two']['last_result_s'] - t['two']['first_result_s']):.2f}x")
PY
rm -f $R/*.stdout.gz; gzip -f $R/one.stdout $R/two.stdout
