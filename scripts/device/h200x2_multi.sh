#!/usr/bin/env bash
# Issue 11 on a 2-GPU machine (kind nvidia-h200-x2): a full paired sweep of the demo (50 workloads
# x 3 repeats, baseline + candidate) on one GPU, the same sweep on both GPUs (wall time, target
# >= 1.8x faster), the verdicts of both (per job and the round's), that each pair ran on one GPU,
# and a worker killed on GPU 1 in the middle of a third sweep (it must be replaced and the run
# complete).
# Carry .whl (polars, rich, platformdirs, tomlkit, gitpython).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD FIBTUI_CACHE_DIR=/tmp/fibtui-cache GIT_PYTHON_REFRESH=quiet
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/multi
mkdir -p $R
nvidia-smi -L | tee $R/gpus.txt
rm -rf /tmp/ws && python3 -m fibtui demo /tmp/ws --no-tui --no-history >/dev/null
SWEEP="python3 -m fibtui run --backend local --workloads all --repeats 3 --baseline /tmp/ws/solution/triton --solution /tmp/ws/candidates/v2_smallb_splitv --workspace /tmp/ws"
# warm the reference cache once so both timed sweeps see the same cache
$SWEEP --workers 2 --json > $R/warmup.json 2>/dev/null
for n in 1 2; do
  s=$(date +%s.%N); $SWEEP --workers $n --json > $R/sweep_${n}gpu.json 2> $R/sweep_${n}gpu.txt; e=$(date +%s.%N)
  python3 -c "print('gpus $n wall_s', round($e - $s, 2))" | tee -a $R/walls.txt
done
for n in 1 2; do
  id=$(python3 -c "import json;print(json.load(open('$R/sweep_${n}gpu.json'))['run_id'])")
  python3 -m fibtui compare $id --workspace /tmp/ws --json > $R/compare_${n}gpu.json
  python3 -c "import json;d=json.load(open('$R/compare_${n}gpu.json'));print('gpus $n', d['verdict'], round(d['geomean_ratio'],4), [round(x,4) for x in (d['ci_low'], d['ci_high'])])" | tee -a $R/walls.txt
done
python3 - "$R/sweep_1gpu.json" "$R/sweep_2gpu.json" <<'PY' | tee -a $R/walls.txt
import json, sys
one, two = (json.load(open(p)) for p in sys.argv[1:3])
key = lambda j: (j["uuid"], j["solution"], j["repeat"])
s1 = {key(j): j["status"] for j in one["jobs"]}
s2 = {key(j): j["status"] for j in two["jobs"]}
print("jobs", len(s1), len(s2), "same statuses:", s1 == s2, "statuses:", sorted(set(s2.values())))
slots = {}
for j in two["jobs"]:
    slots.setdefault((j["uuid"], j["repeat"]), set()).add(j["timing"].get("slot"))
print("2-GPU sweep: pairs on one GPU:", sum(len(v) == 1 for v in slots.values()), "of", len(slots),
      "; jobs per slot:", {s: sum(1 for j in two["jobs"] if j["timing"].get("slot") == s) for s in (0, 1)})
PY
# kill the worker on GPU 1 mid-sweep
( $SWEEP --workers 2 --json > $R/killed.json 2> $R/killed.txt ) &
RUNNER=$!
for i in $(seq 1 100); do
  sleep 0.2
  victim=$(for p in $(pgrep -f "fibtui.worker serve"); do tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "CUDA_VISIBLE_DEVICES=1" && echo $p; done | head -1)
  if [ -n "$victim" ] && grep -q "\[ *[2-9][0-9]*/" $R/killed.txt 2>/dev/null; then kill -9 $victim; echo "killed worker pid $victim on GPU 1" | tee -a $R/walls.txt; break; fi
done
wait $RUNNER
python3 -c "import json;d=json.load(open('$R/killed.json'));s=d['summary'];print('killed-run', d['state'], s['passed'], '/', s['total'], 'slots', sorted({j['timing'].get('slot') for j in d['jobs']}))" | tee -a $R/walls.txt
grep -c "restarted" $R/killed.txt | sed 's/^/worker restarts reported: /' | tee -a $R/walls.txt
tar czf $OUT/multi.tgz -C $OUT multi
cat $R/walls.txt
