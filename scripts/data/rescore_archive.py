"""Every paired fibtui run record in optimize_ops/ (run.json files and those inside the benchmark
archives' .tgz files), judged by today's rule (the mean latency's interval decides) beside the rule
before issue 33 (G's interval decided): which verdicts the change of rule changes.

    PYTHONPATH=. python scripts/data/rescore_archive.py [ROOT]   # ROOT: a checkout (default: this one)

The noise floor is the archive's A/A history (optimize_ops/benchmarks/aa.jsonl) of the record's
GPU, as `fibtui compare` of a bare file would have it; the scope is full for a record of every
workload (`workload_selection` all), else sample. Prints one line per candidate; records whose
verdict changes end in `<-- differs`.
"""

from __future__ import annotations

import json
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fibtui.core import stats  # noqa: E402


def records(root: Path) -> Iterator[tuple[str, dict]]:
    """(where, record) of every JSON object with jobs under optimize_ops/, .tgz members too."""
    base = root / "optimize_ops"
    for path in sorted(base.rglob("*")):
        if path.suffix == ".json":
            try:
                yield str(path.relative_to(root)), json.loads(path.read_text())
            except (OSError, ValueError, UnicodeDecodeError):
                continue
        elif path.name.endswith((".tgz", ".tar.gz")):
            with tarfile.open(path) as tar:
                for member in tar.getmembers():
                    if not member.isfile() or not member.name.endswith(".json"):
                        continue
                    fh = tar.extractfile(member)
                    try:
                        yield f"{path.relative_to(root)}:{member.name}", json.load(fh)
                    except (OSError, ValueError, UnicodeDecodeError):
                        continue


def old_verdict(c: stats.Comparison) -> str:
    """The verdict G's interval gave before issue 33 (paired_verdict's order of rules then)."""
    if c.verdict in (stats.NOT_JUDGED, stats.INCOMPLETE, stats.NO_SPEED_VERDICT):
        return c.verdict
    judged = c.noise is not None and c.noise.estimated
    if c.guard and c.interval_verdict != stats.REJECT:
        return stats.BLOCKED
    if c.interval_verdict == stats.PROMOTE and (not judged or c.scope == "sample"):
        return stats.INCONCLUSIVE
    return c.interval_verdict


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(__file__).resolve().parents[2]
    sessions = stats.load_aa_file(root / "optimize_ops" / stats.AA_FILE)
    changed = total = 0
    for where, record in records(root):
        jobs = record.get("jobs") if isinstance(record, dict) else None
        if not isinstance(jobs, list) or not all(isinstance(j, dict) for j in jobs):
            continue
        if not {"baseline", "candidate"} <= {j.get("role") for j in jobs}:
            continue
        kind = record.get("timing_kind")
        gpu = (record.get("environment") or {}).get("gpu")
        mine = [s for s in sessions if s.gpu in (None, gpu)] if kind != "cpu-interpreter" else []
        floor = stats.noise_floor(stats.StatsSettings(), mine, "the archive's A/A history")
        scope = "full" if record.get("workload_selection") == "all" else "sample"
        base = [j for j in jobs if j.get("role") == "baseline"]
        for name in sorted({str(j.get("solution")) for j in jobs if j.get("role") == "candidate"}):
            cand = [j for j in jobs if j.get("role") == "candidate" and j.get("solution") == name]
            c = stats.paired_verdict(base, cand, floor=floor, scope=scope)
            old = old_verdict(c)
            total += 1
            changed += old != c.verdict
            m = c.mean_latency
            detail = (
                f" (G {c.geomean_ratio:.4f}, mean latency {m.change:+.2%} [{m.low:+.2%}, {m.high:+.2%}])"
                if m is not None and c.geomean_ratio is not None
                else ""
            )
            print(
                f"{where} [{name}] {scope} n={c.workloads}: before {old}, now {c.verdict}{detail}"
                + ("  <-- differs" if old != c.verdict else "")
            )
    print(f"{total} comparisons, {changed} verdict(s) changed by the rule")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
