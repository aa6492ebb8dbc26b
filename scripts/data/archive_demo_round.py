"""Archive a measured round of the bundled demo into optimize_ops/ and decide it.

    PYTHONPATH=. python scripts/data/archive_demo_round.py RUN_FOLDER [RUN_FOLDER ...] [--root DIR]
        [--topic TOPIC] [--aa RUN_A.json RUN_B.json]... [--note TEXT]...

The bundled round was archived with (run folders from the H200 session of 2026-11-29)::

    H=optimize_ops/benchmarks/h200_20261129/runs
    PYTHONPATH=. python scripts/data/archive_demo_round.py ROUND/20261129-093928_demo_local \
        ROUND/20261129-093940_demo_local \
        --aa $H/noise_cold_run1.run.json $H/noise_cold_run2.run.json \
        --aa $H/noise_warm_run1.run.json $H/noise_warm_run2.run.json \
        --note "timed with fibtui's first L2 flush (writing a buffer); both arms share it"

RUN_FOLDER: fibtui run folders (journal.jsonl, run.json, snapshots/, worker logs) of one paired
round: the representative gate and the full sweep of the same baseline and candidate. Each is
copied into ``<root>/optimize_ops/runs/`` (``work/`` left out; never overwriting). ``--aa`` records
an A/A session (two runs of the same code) into ``optimize_ops/benchmarks/aa.jsonl`` first (paths
relative to the archive root are recorded when they are inside it).

Then, through fibtui.core.archive, fibtui.services.archive and fibtui.core.stats: the verdict on the full sweep; PROMOTE
-> the candidate snapshot under v<major>/, the best snapshot under best_solution_<language>/, the
round record in docs/rounds.jsonl and the round summary docs/round_<date>_<topic>.md (+ .json);
any other verdict -> the candidate archived (decision "archived"). The bundled demo keeps its
baseline as the checked-in kernel (the round stays replayable in every ``fibtui demo`` workspace),
so no solution folder or config.toml is changed here.

``--root`` defaults to the repository root (its optimize_ops/ is the bundled demo history). Running
it again on the same run folders only regenerates the summary.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from fibtui.core import archive, stats  # noqa: E402
from fibtui.core.dataset import Dataset  # noqa: E402
from fibtui.core.results import load_results  # noqa: E402
from fibtui.core.runs import read_journal  # noqa: E402
from fibtui.services import archive as archive_ops  # noqa: E402

DEMO_DATASET = REPO / "kernels" / "gdn_decode_demo" / "dataset"


def _copy_runs(archive_root: Path, folders: list[Path]) -> list[str]:
    ids = []
    for folder in folders:
        header = read_journal(folder / "journal.jsonl").header
        existing = archive_root / "runs" / header.run_id
        if (existing / "journal.jsonl").is_file() and (existing / "journal.jsonl").read_bytes() == (
            folder / "journal.jsonl"
        ).read_bytes():
            print(
                f"run {header.run_id}: already archived at {existing.relative_to(archive_root.parent)}"
            )
            ids.append(existing.name)
            continue
        dest = archive_ops.archive_run(archive_root, folder)
        print(f"run {header.run_id}: archived to {dest.relative_to(archive_root.parent)}")
        ids.append(dest.name)
    return ids


def _record_aa(archive_root: Path, a: Path, b: Path) -> None:
    def label(p: Path) -> str:
        try:
            return p.resolve().relative_to(archive_root.resolve()).as_posix()
        except ValueError:
            return p.name

    source = f"{label(a)} vs {label(b)}"
    known = {s.source for s in stats.load_aa_file(archive_root / stats.AA_FILE)}
    if source in known:
        print(f"A/A session {source}: already recorded")
        return
    ta, tb = load_results(a), load_results(b)
    comp = stats.paired_verdict(ta.rows, tb.rows, baseline_name=label(a), candidate_name=label(b))
    gpu = (ta.meta.get("environment") or {}).get("gpu")
    session = stats.aa_session_from(comp, source, "compare --aa", ta.definition, gpu)
    stats.record_aa_session(archive_root, session)
    print(
        f"A/A session {source}: log G {session.log_g:+.5f}, sigma {session.sigma}, {session.workloads} workloads"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN_FOLDER")
    p.add_argument(
        "--root",
        type=Path,
        default=REPO,
        help="workspace root holding optimize_ops/ (default: the repo)",
    )
    p.add_argument("--topic", default=None, help="round topic (default: the candidate id)")
    p.add_argument(
        "--aa", nargs=2, action="append", type=Path, default=[], metavar=("RUN_A", "RUN_B")
    )
    p.add_argument("--dataset", type=Path, default=DEMO_DATASET)
    p.add_argument(
        "--note",
        action="append",
        default=[],
        metavar="TEXT",
        help="a note for the round record (repeatable)",
    )
    args = p.parse_args(argv)

    archive_root = archive.archive_root_of(args.root)
    for a, b in args.aa:
        _record_aa(archive_root, a, b)
    run_ids = _copy_runs(archive_root, args.runs)

    ds = Dataset(args.dataset)
    first = json.loads((archive_root / "runs" / run_ids[0] / "run.json").read_text())
    definition = ds.definition(first["definition"])
    workloads = ds.workloads(definition.name)

    existing = [
        r
        for r in archive.load_rounds(archive_root)
        if sorted(x["run_id"] for x in r.runs) == sorted(run_ids)
    ]
    if existing:
        paths = archive.write_round_summary(archive_root, existing[-1], definition, workloads)
        print(
            f"round {existing[-1].round} already decided ({existing[-1].decision}); summary regenerated: "
            + ", ".join(str(x.relative_to(args.root)) for x in paths)
        )
        rec = existing[-1]
    else:
        inputs = archive_ops.gather_round(
            archive_root, run_ids=run_ids, definition_obj=definition, workloads=workloads
        )
        notes = [
            "recorded by scripts/data/archive_demo_round.py from runs measured with fibtui on an H200; the bundled demo "
            "keeps the baseline as its checked-in kernel so the round can be replayed in a `fibtui demo` workspace",
            *args.note,
        ]
        if inputs.comparison.verdict == stats.PROMOTE and inputs.deciding_kind == "sweep":
            result = archive_ops.promote(
                inputs,
                topic=args.topic,
                definition_obj=definition,
                workloads=workloads,
                notes=notes,
            )
        else:
            result = archive_ops.archive_only(
                inputs,
                topic=args.topic,
                definition_obj=definition,
                workloads=workloads,
                notes=notes,
            )
        for path in result.written:
            print(
                f"wrote {path.relative_to(args.root) if path.is_relative_to(args.root) else path}"
            )
        for w in result.warnings:
            print(f"warning: {w}")
        rec = result.record

    _md, report = archive.render_round(archive_root, rec, definition, workloads)
    c = report["comparison"]
    print()
    print(
        f"decision: {report['decision']['decision']}  verdict {c['verdict']} on {report['deciding_run']}"
    )
    print(
        f"G = {c['geomean_ratio']:.4f}  {c['confidence']:.0%} interval [{c['ci_low']:.4f}, {c['ci_high']:.4f}]  "
        f"({c['interval_method']})"
    )
    print(f"tau = {report['noise_floor']['tau'] * 100:.2f}%  ({report['noise_floor']['source']})")
    print(
        f"{'band':<16}{'n':>3}{'base us':>10}{'cand us':>10}{'change':>9}{'ratio':>8}  interval           W/T/L"
    )
    for b in report["bands"]:
        print(
            f"{b['band']:<16}{b['workloads']:>3}{b['base_mean_ms'] * 1000:>10.3f}{b['cand_mean_ms'] * 1000:>10.3f}"
            f"{b['change_pct']:>+8.2f}%{b['geomean_ratio']:>8.4f}  [{b['ci_low']:.4f}, {b['ci_high']:.4f}]  "
            f"{b['wins']}/{b['ties']}/{b['losses']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
