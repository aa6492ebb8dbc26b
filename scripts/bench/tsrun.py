"""Run a command and report when its stderr lines arrived: ``python3 scripts/bench/tsrun.py OUT.json -- CMD...``.

Used by the device scripts to split a sweep's wall time into start-up (until the first result
line ``[  1/N]``), the jobs, and the end. Writes {"wall_s", "first_result_s", "last_result_s",
"lines"} to OUT.json; the command's stdout goes to OUT.json's sibling ``.stdout``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    out = Path(sys.argv[1])
    cmd = sys.argv[sys.argv.index("--") + 1 :]
    t0 = time.monotonic()
    lines = []
    with open(out.with_suffix(".stdout"), "wb") as so:
        proc = subprocess.Popen(cmd, stdout=so, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append([round(time.monotonic() - t0, 3), line.rstrip("\n")])
        rc = proc.wait()
    wall = time.monotonic() - t0
    results = [t for t, text in lines if re.match(r"\[\s*\d+/\d+\]", text)]
    rec = {
        "cmd": cmd,
        "rc": rc,
        "wall_s": round(wall, 3),
        "first_result_s": results[0] if results else None,
        "last_result_s": results[-1] if results else None,
        "results": len(results),
        "lines": lines,
    }
    out.write_text(json.dumps(rec, indent=1))
    print(
        f"{out.stem}: wall {wall:.2f} s, first result {rec['first_result_s']} s, last result {rec['last_result_s']} s, "
        f"{len(results)} results, rc {rc}"
    )
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
