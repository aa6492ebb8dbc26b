"""Comparing what a user names: result files, run folders, run ids (or a run record in memory)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fibtui.core import locations, measures
from fibtui.core.errors import InputError
from fibtui.core.measurement import OFFICIAL_KIND as OFFICIAL_KIND
from fibtui.core.stats.aa import aa_key_label, aa_sessions
from fibtui.core.stats.comparison import Comparison, Look
from fibtui.core.stats.constants import CPU_INTERPRETER
from fibtui.core.stats.floor import AASession, StatsSettings, noise_floor
from fibtui.core.stats.leaderboard import LeaderboardEntry, leaderboard
from fibtui.core.stats.timing_keys import TimingKey, speed_blocker

if TYPE_CHECKING:
    from fibtui.core.results import ResultRow, RunTable


def timing_key_of_source(src: Source) -> TimingKey:
    """How a compared file's latencies were measured: fibtui runs say it (cupti or
    cpu-interpreter, and the GPU); every other result format is flashinfer-bench's timing (its
    traces, or the hand workflow's files written from it)."""
    kind = (
        src.table.meta.get("timing_kind")
        if src.table.source_format == "fibtui-run"
        else "flashinfer-bench"
    )
    kind = kind if isinstance(kind, str) and kind else "unknown"
    return TimingKey(kind, src.gpu if kind != CPU_INTERPRETER else None)


@dataclass
class Source:
    """One side of ``fibtui compare``: a result table, and what its file says about itself."""

    spec: str
    path: Path
    table: RunTable
    run_id: str | None = None
    selection: str | None = None
    hashes: dict[tuple[str, str], str] = field(default_factory=dict)  # (role, name) -> source hash
    gpu: str | None = None
    #: a fibtui run's adaptive plan (its header's ``settings.adaptive``), None for a fixed design
    adaptive: dict[str, Any] | None = None
    #: an adaptive run's workloads stopped as decided: uuid -> the word decided
    decided: dict[str, str] = field(default_factory=dict)
    #: a run timed with ``--timing official``: (uuid, solution, role, repeat) -> the job's
    #: official-equivalent (latency, reference latency) in ms (``timing.official``)
    official: dict[tuple[str, str | None, str | None, int | None], tuple[float, float | None]] = (
        field(default_factory=dict)
    )

    @property
    def label(self) -> str:
        return self.run_id or self.path.name


def _official_of(
    jobs: Any,
) -> dict[tuple[str, str | None, str | None, int | None], tuple[float, float | None]]:
    """A run record's official-equivalent latencies by job (``timing.official``), finite and
    positive ones only."""
    out: dict[tuple[str, str | None, str | None, int | None], tuple[float, float | None]] = {}
    for job in jobs if isinstance(jobs, list) else []:
        timing = job.get("timing") if isinstance(job, dict) else None
        off = timing.get("official") if isinstance(timing, dict) else None
        if not isinstance(off, dict):
            continue
        lat, ref = off.get("latency_ms"), off.get("reference_latency_ms")
        if (
            isinstance(lat, bool)
            or not isinstance(lat, (int, float))
            or not (math.isfinite(lat) and lat > 0)
        ):
            continue
        good_ref = (
            isinstance(ref, (int, float))
            and not isinstance(ref, bool)
            and math.isfinite(ref)
            and ref > 0
        )
        repeat = job.get("repeat")
        out[
            (
                str(job.get("uuid")),
                job.get("solution"),
                job.get("role"),
                repeat if isinstance(repeat, int) else None,
            )
        ] = (
            float(lat),
            float(ref) if good_ref and ref is not None else None,
        )
    return out


def official_view(src: Source) -> Source:
    """``src`` with every job's official-equivalent latency and reference latency in place of
    fibtui's own (timing kind ``official-equivalent``): what ``--timing official`` decides on. A
    PASSED job that was not timed so has no latency there (the comparison is then incomplete)."""
    from dataclasses import replace

    if src.table.source_format != "fibtui-run" or not src.official:
        raise InputError(
            src.path,
            "holds no official-equivalent timings: time the run with `fibtui run --timing official`",
            field="jobs[].timing.official",
        )
    rows = []
    for r in src.table.rows:
        off = src.official.get((r.uuid, r.solution, r.role, r.repeat))
        lat, ref = off if off is not None else (None, None)
        rows.append(
            replace(
                r,
                latency_ms=lat,
                reference_latency_ms=ref,
                speedup=ref / lat if lat and ref else None,
                block_medians_ms=None,
            )
        )
    # the CPU interpreter's numbers stay the interpreter's, whichever method timed them
    kind = src.table.meta.get("timing_kind")
    kind = kind if kind == CPU_INTERPRETER else OFFICIAL_KIND
    table = replace(src.table, rows=rows, meta={**src.table.meta, "timing_kind": kind})
    return replace(src, table=table)


#: the reason of an adaptive run's stop line for a workload whose interval was decided (the stop
#: reasons are fibtui.core.sequential's; this one is read here too, and sequential imports stats)
STOP_DECIDED = "decided"


def decided_stops(record: Mapping[str, Any]) -> dict[str, str]:
    """An adaptive run's workloads its rule stopped as decided (run.json's ``adaptive.workloads``):
    uuid -> the word decided."""
    stops = (record.get("adaptive") or {}).get("workloads") or {}
    if not isinstance(stops, dict):
        return {}
    return {
        str(uuid): str(stop.get("word"))
        for uuid, stop in stops.items()
        if isinstance(stop, dict) and stop.get("reason") == STOP_DECIDED
    }


def load_source(spec: str, archive_root: Path | None = None, axes_lookup: Any = None) -> Source:
    """A result file ``load_results`` reads, a run folder, or a run id under ``<archive>/runs``.
    Each file is read once: a run record's table and its run facts come from the one document."""
    from fibtui.core.results import load_results_and_document
    from fibtui.core.runs import build_record

    p = Path(spec).expanduser()
    folder: Path | None = None
    if p.is_dir():
        folder = p
    elif (
        not p.exists()
        and archive_root is not None
        and (locations.run_folder(archive_root, spec) / "journal.jsonl").is_file()
    ):
        folder = locations.run_folder(archive_root, spec)
    if folder is not None:
        path = folder / "run.json"
        if path.is_file():
            table, document = load_results_and_document(path, axes_lookup)
        elif (folder / "journal.jsonl").is_file():  # no run.json yet: the record of the journal
            return source_of_record(spec, path, build_record(folder).to_json())
        else:
            raise InputError(folder, "folder is not a fibtui run (no run.json or journal.jsonl)")
    elif p.is_file():
        path = p
        table, document = load_results_and_document(p, axes_lookup)
    else:
        hint = ""
        if archive_root is not None and locations.runs_root(archive_root).is_dir():
            known = sorted(
                x.name
                for x in locations.runs_root(archive_root).iterdir()
                if (x / "journal.jsonl").is_file()
            )
            hint = f" (runs here: {', '.join(known[-5:])})" if known else ""
        raise InputError(
            spec, f"not a result file, a run folder, or a run id under optimize_ops/runs{hint}"
        )
    record = document if isinstance(document, dict) else {}
    return _source(spec, path, table, record)


def source_of_record(
    spec: str, path: Path, record: dict[str, Any], axes_lookup: Any = None
) -> Source:
    """One side of a comparison from a run record already in memory (``run.json``'s content, or
    :meth:`fibtui.core.runs.RunRecord.to_json`): nothing is read from disk. ``path`` is where
    the record is said to come from (its run.json)."""
    from fibtui.core.results import read_run_record

    table = read_run_record(path, record)
    if axes_lookup is not None:  # as load_results does
        for r in table.rows:
            if not r.axes:
                found = axes_lookup(r.definition, r.uuid)
                if found:
                    r.axes = dict(found)
    return _source(spec, path, table, record)


def _source(spec: str, path: Path, table: RunTable, record: Mapping[str, Any]) -> Source:
    """The source of a table and, for a fibtui run, what its record says about the run."""
    from fibtui.core.results import has_workload_latencies

    src = Source(spec=spec, path=path, table=table)
    if table.source_format == "fibtui-run":
        src.run_id = table.meta.get("run_id")
        src.selection = record.get("workload_selection")
        src.official = _official_of(record.get("jobs"))
        adaptive = (record.get("settings") or {}).get("adaptive")
        src.adaptive = adaptive if isinstance(adaptive, dict) else None
        if src.adaptive is not None:
            src.decided = decided_stops(record)
        for s in record.get("solutions") or []:
            if isinstance(s, dict) and s.get("source_hash"):
                src.hashes[(str(s.get("role")), str(s.get("name")))] = str(s["source_hash"])
    env = table.meta.get("environment")
    if isinstance(env, dict):
        src.gpu = env.get("gpu") or env.get("hardware")
    if not has_workload_latencies(table.source_format):
        raise InputError(
            path,
            f"a {table.source_format} file has no per-workload latencies to pair; give a result file with them",
        )
    return src


def _arm_name(src: Source, solution: str | None) -> str:
    return solution or src.path.stem


def _group(rows: Sequence[ResultRow]) -> dict[str, list[ResultRow]]:
    out: dict[str, list[ResultRow]] = {}
    for r in rows:
        out.setdefault(r.solution or "", []).append(r)
    return out


def select_arms(
    base: Source,
    cand: Source | None,
    solution_base: str | None = None,
    solution_cand: str | None = None,
) -> tuple[str, list[ResultRow], dict[str, list[ResultRow]]]:
    """(baseline name, baseline rows, {candidate name: rows}) from the two sources (see
    ``fibtui compare --help``)."""

    def pick(src: Source, role: str, name: str | None, flag: str) -> dict[str, list[ResultRow]]:
        rows = list(src.table.rows)
        if name is not None:
            mine = [r for r in rows if r.solution == name]
            if not mine:
                names = ", ".join(sorted({str(r.solution) for r in rows})) or "none"
                raise InputError(
                    src.path, f"no rows for solution {name!r}; solutions here: {names}", field=flag
                )
            roled = [r for r in mine if r.role == role]
            return {name: roled or mine}
        roled = [r for r in rows if r.role == role]
        if roled:
            return _group(roled)
        if any(r.role for r in rows) and role == "baseline":
            return {}
        return _group(rows)

    base_groups = pick(base, "baseline", solution_base, "--solution-base")
    if not base_groups:
        raise InputError(
            base.path,
            "has no baseline rows: name the baseline solution with --solution-base",
            field="BASE",
        )
    if len(base_groups) > 1:
        raise InputError(
            base.path,
            f"holds {len(base_groups)} solutions ({', '.join(n or '(unnamed)' for n in base_groups)}); "
            "pick the baseline with --solution-base",
            field="--solution-base",
        )
    base_name, base_rows = next(iter(base_groups.items()))
    other = cand if cand is not None else base
    if cand is None:
        taken = {id(r) for r in base_rows}
        rest = [r for r in base.table.rows if id(r) not in taken]
        if solution_cand is not None:
            rest = [r for r in rest if r.solution == solution_cand]
            if not rest:
                raise InputError(
                    base.path,
                    f"no candidate rows for solution {solution_cand!r}",
                    field="--solution-cand",
                )
        groups = _group([r for r in rest if r.role in (None, "candidate")])
        if not groups:
            raise InputError(
                base.path,
                "holds only one solution: give CAND too (another result file or run id)",
                field="CAND",
            )
    else:
        groups = pick(other, "candidate", solution_cand, "--solution-cand")
        if (
            other.path.resolve() == base.path.resolve()
            and solution_cand is None
            and len(groups) > 1
        ):
            groups = {n: rows for n, rows in groups.items() if n != base_name}
        if not groups:
            raise InputError(other.path, "has no candidate rows", field="CAND")
    cands = {
        (_arm_name(other, n) if n else _arm_name(other, None)): rows for n, rows in groups.items()
    }
    return _arm_name(base, base_name or None), base_rows, cands


@dataclass
class CompareOutcome:
    baseline: str
    base: Source
    cand: Source
    scope: str
    entries: list[LeaderboardEntry]
    notes: list[str] = field(default_factory=list)
    #: the same comparison on the official-equivalent latencies, when the runs carry them and
    #: fibtui's own timing decided (shown beside it, deciding nothing)
    official: CompareOutcome | None = None

    @property
    def single(self) -> Comparison | None:
        return self.entries[0].comparison if len(self.entries) == 1 else None

    def official_lines(self) -> list[str]:
        """One line per candidate with its official-equivalent latency, beside fibtui's own."""
        if self.official is None:
            return []
        out = []
        for e in self.official.entries:
            c = e.comparison
            if c is None or c.mean_latency is None:
                continue
            score = f"; {c.score.phrase()}" if c.score is not None else ""
            who = f"{c.candidate.name}: " if len(self.official.entries) > 1 else ""
            out.append(
                f"official-equivalent timing ({who}flashinfer-bench main's method, deciding "
                f"nothing here): {c.verdict}; {c.latency_line()}{score}"
            )
        return out

    def to_json(self) -> dict[str, Any]:
        common: dict[str, Any] = {
            "base": self.base.spec,
            "cand": self.cand.spec,
            "scope": self.scope,
            "compare_notes": list(self.notes),
        }
        if self.official is not None:
            common["official"] = self.official.to_json()
        if self.single is not None:
            return {**self.single.to_json(), **common}
        return {
            "baseline": self.baseline,
            **common,
            "leaderboard": [e.to_json() for e in self.entries],
            "comparisons": [
                e.comparison.to_json() for e in self.entries if e.comparison is not None
            ],
        }


def compare_sources(
    base: Source,
    cand: Source | None,
    *,
    solution_base: str | None = None,
    solution_cand: str | None = None,
    settings: StatsSettings | None = None,
    archive_root: Path | None = None,
    band_of: Mapping[str, str] | None = None,
    total_workloads: int | None = None,
    band_shares: Mapping[str, float] | None = None,
    share_source: str | None = None,
    look: Look | None = None,
    score_numerators: Sequence[measures.Numerators] = (),
    floors_ms: Mapping[str, float] | None = None,
) -> CompareOutcome:
    """Pair the baseline with every candidate of the two sources, each with its own verdict
    (``band_shares``, ``share_source`` and ``look``: see :func:`paired_verdict`; an adaptive
    run's decided stops come with its source when ``look`` is given)."""
    settings = settings or StatsSettings()
    base_name, base_rows, cands = select_arms(base, cand, solution_base, solution_cand)
    other = cand if cand is not None else base
    key_base, key_cand = timing_key_of_source(base), timing_key_of_source(other)
    definition = base.table.definition or other.table.definition
    runs = [x for x in (base.run_id, other.run_id) if x]
    sessions: list[AASession] = []
    key_label = aa_key_label(definition, key_base)
    if archive_root is not None and speed_blocker(key_base, key_cand) is None:
        sessions = aa_sessions(
            archive_root,
            key_base.device,
            exclude_runs=runs,
            definition=definition,
            timing_kind=key_base.kind,
        )
    floor = noise_floor(settings, sessions, key_label)
    uuids = {str(r.uuid) for r in base_rows}
    if total_workloads is not None:
        scope = "full" if len(uuids) >= total_workloads else "sample"
    elif other.selection or base.selection:
        scope = "full" if (other.selection or base.selection) == "all" else "sample"
    else:
        scope = "full"
    hashes: dict[str, str] = {}
    for src in (base, other):
        for (_role, name), h in src.hashes.items():
            hashes.setdefault(name, h)
    entries = leaderboard(
        base_rows,
        cands,
        baseline_name=base_name,
        hashes=hashes,
        band_of=band_of,
        settings=settings,
        floor=floor,
        scope=scope,
        timing=(key_base, key_cand),
        band_shares=band_shares,
        share_source=share_source,
        look=look,
        decided=base.decided if look is not None else None,
        score_numerators=score_numerators,
        floors_ms=floors_ms,
    )
    notes = []
    if scope == "sample":
        notes.append(
            f"{len(uuids)} workloads stand in for the whole set (a gate or a selection): promotion needs the full set"
        )
    return CompareOutcome(base_name, base, other, scope, entries, notes)
