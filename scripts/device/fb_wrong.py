"""A FlashInfer-Trace folder on which flashinfer-bench judges two wrong kernels: the workspace's
own solution, changed to write an infinity (``fibtui_spoiled_inf``) or a NaN
(``fibtui_spoiled_nan``) into its first output, on the first N workloads. flashinfer-bench's traces of it (INCORRECT_NUMERICAL, its errors written as the
strings "Infinity" and "NaN") are what tests/fixtures/flashinfer_bench_main/ keeps (issue 31).

    python3 scripts/device/fb_wrong.py WORKSPACE OUT_DIR [N]

Prints the solutions' names.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fibtui.core.workspace import open_workspace  # noqa: E402
from fibtui.runners.parity import prepare_dataset_dir, solution_json_for  # noqa: E402

# appended to the entry file: the entry point runs the real kernel, then spoils its outputs
SPOIL = """

_fibtui_real_entry = {entry}


def {entry}(*args):
    out = _fibtui_real_entry(*args)
    args[-{outputs}].view(-1)[0] = float("{value}")
    return out
"""


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    ws = open_workspace(Path(argv[0]))
    n = int(argv[2]) if len(argv) == 3 else 2
    cfg = ws.active
    dataset = ws.dataset()
    definition = dataset.definition(cfg.definition)
    uuids = list(dataset.workloads(definition.name).uuids)[:n]
    outputs = len(definition.raw["outputs"])
    for value in ("inf", "nan"):
        solution = solution_json_for(ws, cfg, None)
        file, entry = solution["spec"]["entry_point"].split("::")
        for source in solution["sources"]:
            if source["path"] == file:
                source["content"] += SPOIL.format(entry=entry, outputs=outputs, value=value)
        solution["name"] = f"fibtui_spoiled_{value}"
        prepare_dataset_dir(Path(argv[1]), dataset, definition, uuids, solution)
        print(solution["name"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
