"""FlashInfer-Trace folders for flashinfer-bench, each holding the workspace's definition, one
solution packed as ``fibtui parity`` packs it, and a share of the workloads (interleaved, so every
folder spans the batch sizes): flashinfer-bench saves a definition's traces when that definition
ends, so a run cut short by a deadline keeps the folders it finished.

    python3 scripts/device/fb_groups.py WORKSPACE OUT_PREFIX GROUPS SOLUTION_DIR [EVERY]

Writes OUT_PREFIX0 .. OUT_PREFIX<GROUPS-1>; EVERY (default 1) keeps every EVERY-th workload only.
Prints the solution's name.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fibtui.core.workspace import open_workspace  # noqa: E402
from fibtui.runners.parity import prepare_dataset_dir, solution_json_for  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        return 2
    ws = open_workspace(Path(argv[0]))
    prefix, groups, folder = argv[1], int(argv[2]), argv[3]
    every = int(argv[4]) if len(argv) == 5 else 1
    cfg = ws.active
    dataset = ws.dataset()
    definition = dataset.definition(cfg.definition)
    uuids = list(dataset.workloads(definition.name).uuids)[::every]
    solution = solution_json_for(ws, cfg, folder)
    solution["name"] = f"fibtui_{Path(folder).name}"
    for g in range(groups):
        prepare_dataset_dir(Path(f"{prefix}{g}"), dataset, definition, uuids[g::groups], solution)
    print(solution["name"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
