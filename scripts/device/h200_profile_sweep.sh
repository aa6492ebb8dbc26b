#!/usr/bin/env bash
# Issue 20, item 2: where the wall time of a paired sweep goes on the H200. The shared
# gdn_decode_qk4_v8_d128_k_last definition (54 workloads) in a copy of the demo workspace, the demo
# baseline against v2_smallb_splitv, 3 repeats (324 jobs): timed twice (reference cache cold, then
# warm), then once more under py-spy sampling the runner and its worker (--subprocesses --idle,
# collapsed stacks), so the per-job overhead can be read off by function.
#
#   bash scripts/device/h200_profile_sweep.sh        # carry .whl, .probe-whl (py-spy), .devdata
#
# .devdata/flashinfer-trace: a copy of ../shared/datasets/flashinfer-trace. Everything comes back
# as $OUT/profile.tar.gz plus $OUT/profile_summary.txt.
set -uo pipefail
export PYTHONUNBUFFERED=1
source scripts/device/_site.sh
install_site || exit 1
install_spy || exit 1
export FIBTUI_CACHE_DIR=/tmp/fibtui-cache-prof GIT_PYTHON_REFRESH=quiet
begin_results profile
WS=/tmp/ws54
shared_sweep_workspace $WS || exit 2
G="run --backend local --workloads all --repeats ${REPEATS:-3} --baseline $WS/solution/triton --solution $WS/candidates/v2_smallb_splitv --workspace $WS --json"
for pass in cold warm; do
  /usr/bin/time -f "%e s wall" -o $R/sweep_$pass.time python3 -m fibtui $G > $R/sweep_$pass.json 2> $R/sweep_$pass.err
  echo "sweep $pass: rc=$? $(cat $R/sweep_$pass.time)"
done
/tmp/spy/bin/py-spy record --subprocesses --idle --rate ${RATE:-200} --format raw -o $R/sweep_pyspy.stacks -- \
  python3 -m fibtui $G > $R/sweep_pyspy.json 2> $R/sweep_pyspy.err
echo "py-spy sweep: rc=$?"
python3 - $R <<'PY' | tee $OUT/profile_summary.txt
import json, sys, pathlib, statistics
r = pathlib.Path(sys.argv[1])
for p in ["cold", "warm", "pyspy"]:
    f = r / f"sweep_{p}.json"
    try:
        d = json.loads(f.read_text())
    except Exception as exc:
        print(p, "unreadable", exc); continue
    jobs = d.get("jobs", [])
    walls = [j.get("wall_s") for j in jobs if j.get("wall_s") is not None]
    t = (r / f"sweep_{p}.time").read_text().strip() if (r / f"sweep_{p}.time").exists() else "?"
    print(p, d.get("state"), d["summary"]["passed"], "/", d["summary"]["total"], "wall", t,
          "job wall_s median", round(statistics.median(walls), 4) if walls else None,
          "sum", round(sum(walls), 2) if walls else None)
PY
gzip $R/sweep_pyspy.stacks; tar -czf $OUT/profile.tar.gz -C $OUT profile && rm -rf $R
