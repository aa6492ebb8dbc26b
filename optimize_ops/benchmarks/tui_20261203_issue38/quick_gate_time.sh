#!/bin/bash
# the CPU quick gate's wall time on a demo: the workloads core.quick picks, paired (candidate vs the demo's solution)
set -e
demo=$1; cand=$2; out=$3
rm -rf $out; cp -r ${REPO:-$(git rev-parse --show-toplevel)}/kernels/$demo $out
cd ${REPO:-$(git rev-parse --show-toplevel)}
uuids=$(PYTHONPATH=$PWD ${PY:-.venv/bin/python} -c "
from fibtui.core.workspace import open_workspace
from fibtui.core import quick
g=quick.quick_gate_for(open_workspace('$out'))
import sys; print(g.summary(), file=sys.stderr); print(','.join(g.workloads))")
t0=$(date +%s.%N)
PYTHONPATH=$PWD ${PY:-.venv/bin/python} -m fibtui run --workspace $out --backend interpreter --workloads $uuids --solution $out/candidates/$cand --baseline $out --no-daemon --wide > $out.log 2>&1 || echo "exit $?"
t1=$(date +%s.%N)
python3 -c "print(\"$demo quick gate wall: %.1f s\" % ($t1 - $t0))"
tail -3 $out.log
PYTHONPATH=$PWD ${PY:-.venv/bin/python} -c "
from fibtui.core.workspace import open_workspace
from fibtui.core import quick
g=quick.quick_gate_for(open_workspace('$out'))
print('after one run:', g.summary(), '|', g.source)"
