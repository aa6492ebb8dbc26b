"""A FlashInfer-Trace folder for flashinfer-bench holding one definition, its workloads and two
solutions of a fibtui workspace, packed as ``fibtui parity`` packs a solution (so flashinfer-bench
times the very sources ``fibtui run`` timed).

    python3 scripts/device/fb_pair_dataset.py WORKSPACE OUT_DIR SOLUTION_DIR SOLUTION_DIR ...

Prints the solutions' names, one per line.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fibtui.core.workspace import open_workspace  # noqa: E402
from fibtui.runners.parity import prepare_dataset_dir, solution_json_for  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    ws = open_workspace(Path(argv[0]))
    out = Path(argv[1])
    cfg = ws.active
    dataset = ws.dataset()
    definition = dataset.definition(cfg.definition)
    uuids = list(dataset.workloads(definition.name).uuids)
    for folder in argv[2:]:
        solution = solution_json_for(ws, cfg, folder)
        solution["name"] = f"fibtui_{Path(folder).name}"
        prepare_dataset_dir(out, dataset, definition, uuids, solution)
        print(solution["name"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
