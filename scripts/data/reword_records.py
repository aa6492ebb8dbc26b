"""The gate words of saved ``fibtui run --json`` outputs under the current rules (fibtui.core.stats'
``measure``): each record's per-band intervals and tau as measured, and, for an adaptive run,
its rule's decided stops (run.json's ``adaptive.workloads``). No timing is redone: the same
measurements, read by today's words.

    python3 scripts/data/reword_records.py RECORD.json ...

Prints one line per record: its name, the word it was printed with, and the word now.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fibtui.core import stats  # noqa: E402


def reword(
    record: dict, axes_band: dict[str, str] | None = None
) -> tuple[str | None, str | None, str | None]:
    """(word then, word now, text now) of one record's comparison; Nones when it has no bands."""
    comp = record.get("comparison") or {}
    entries = comp.get("entries") or comp.get("leaderboard") or [comp]
    c = entries[0] if entries else {}
    c = c.get("comparison", c)
    measured = c.get("measured") or {}
    bands = [
        stats.BandResult(**{k: b[k] for k in stats.BandResult.__dataclass_fields__ if k in b})
        for b in c.get("per_band") or []
        if b.get("ci_low") is not None and b.get("ci_high") is not None
    ]
    if not bands or not measured:
        return measured.get("word"), None, None
    decided = stats.decided_stops(record)
    # a workload's band from its axes (the demo's bands are single batch sizes: "batch_size=64")
    names = {b.band for b in bands}
    pairs = [
        SimpleNamespace(uuid=j["uuid"], band=(axes_band or {}).get(j["uuid"]))
        for j in record.get("jobs") or []
        if (axes_band or {}).get(j.get("uuid")) in names
    ]
    settled = stats.settled_bands(pairs, decided)
    shares = {b["band"]: b["share"] for b in measured.get("bands") or [] if b.get("share")}
    now = stats.measure(bands, float(measured.get("tau") or 0.01), shares or None, settled=settled)
    return measured.get("word"), now.word if now else None, now.text if now else None


def demo_bands() -> dict[str, str]:
    """uuid -> ``batch_size=N`` for the demo's workloads (a fresh copy of the demo workspace)."""
    import tempfile

    from fibtui.core.demo import create_demo_workspace
    from fibtui.core.workspace import open_workspace

    root = Path(tempfile.mkdtemp(prefix="fibtui-reword-")) / "demo"
    create_demo_workspace(root)
    ws = open_workspace(root)
    out = {}
    for w in ws.dataset().workloads(ws.active.definition):
        if "batch_size" in w.axes:
            out[w.uuid] = f"batch_size={w.axes['batch_size']}"
    return out


def main(paths: list[str]) -> int:
    axes_band = demo_bands()
    for path in paths:
        try:
            record = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            print(f"{path}: unreadable ({exc})")
            continue
        then, now, text = reword(record, axes_band)
        if now is None:
            verdict = ((record.get("comparison") or {}).get("entries") or [{}])[0]
            print(
                f"{Path(path).stem}: no band words (a full sweep: {then or verdict.get('verdict')})"
            )
            continue
        print(f"{Path(path).stem}: then {then}, now {now}: {text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
