"""Official parity: flashinfer-bench's own CLI in the contest's shape, beside fibtui's gate.

The command (:func:`parity_command`)::

    flashinfer-bench run --local DIR --definitions NAME --solutions NAME \\
        --use-isolated-runner --save-results --resume --timeout 300 [per-definition flags]

with the per-definition flags of :func:`fibtui.core.presets.preset_for` (GDN prefill: warmup 1,
iterations 5, trials 3; MoE: atol 1, rtol 0.3, matched ratio 0.9; others: none). ``DIR`` is a
FlashInfer-Trace folder made for the run: the definition, the selected workloads (``rep`` | ``all``
| uuids, as ``fibtui run``), the packed solution (:func:`fibtui.core.submission.pack_solution`) and
links to the safetensors blobs the workloads read. ``flashinfer-bench`` is taken from PATH, else run
as ``python -c '...cli()'`` with this Python (flashinfer-bench 0.1.2 has no ``python -m`` entry).

The traces it saves are imported (:func:`fibtui.core.results.load_results`) and set beside fibtui's
own record of the same workloads (the newest run of the definition holding the same solution
name, GPU-timed runs first), with warnings when the verdicts differ (PASSED vs a failure) or the
latencies disagree by more than tau (fibtui's noise floor from :mod:`fibtui.core.stats`: ``[stats]
min_gain`` in fibtui.toml, default 1%, raised by the workspace's A/A history; a log ratio): e.g. "flashinfer-bench reports 13.6x fibtui's latency", a harness timing launch overhead.

Every parity run or import is archived under ``optimize_ops/parity/<id>/``: ``command.json``,
``console.log``, ``traces.jsonl``, ``comparison.json``, ``parity.json`` (the record), and for a run
``solution.json`` and the ``dataset/`` folder flashinfer-bench read. "Submission-ready" needs one:
:func:`parity_status` returns the newest record of a definition (or None).
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fibtui.core.dataset import Dataset, Definition
from fibtui.core.errors import InputError, UsageError
from fibtui.core.fsio import (
    atomic_copy_file,
    atomic_write_json,
    atomic_write_text,
    read_input_text,
    reserve_unique_path,
)
from fibtui.core.plan import select_workloads
from fibtui.core.presets import EVALUATOR_CLASSES, EvalPreset, preset_for
from fibtui.core.results import ResultRow, detect_format, load_results
from fibtui.core.runs import build_record, list_runs, now_iso, read_journal, run_dir
from fibtui.core.status import PASSED
from fibtui.core.toolchain import bench_version
from fibtui.core.workspace import SolutionConfig, Workspace, archive_root_of

PARITY_DIR = "parity"
RECORD_FORMAT = "fibtui-parity"
RECORD_VERSION = 1
#: The official shape, common to every definition.
OFFICIAL_FLAGS = ("--use-isolated-runner", "--save-results", "--resume", "--timeout", "300")
LAUNCHER_CODE = 'import sys; from flashinfer_bench.cli.main import cli; sys.argv[0]="flashinfer-bench"; sys.exit(cli())'

LineSink = Callable[[str], None]


def parity_root(workspace: Any) -> Path:
    """``<workspace>/optimize_ops/parity`` (a Workspace, or a workspace folder)."""
    archive = getattr(workspace, "archive_root", None)
    return Path(archive if archive is not None else archive_root_of(workspace)) / PARITY_DIR


# --------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------


def flashinfer_bench_launcher() -> tuple[list[str], str]:
    """(argv prefix, how it was found): ``flashinfer-bench`` on PATH, else this Python."""
    exe = shutil.which("flashinfer-bench")
    if exe:
        return [exe], "PATH"
    return [sys.executable, "-c", LAUNCHER_CODE], "python -c"


def parity_command(
    dataset_dir: str | Path,
    definition: str,
    solution: str,
    preset: EvalPreset,
    launcher: list[str] | None = None,
) -> list[str]:
    """The official-shape argv for one definition and one solution."""
    prefix = list(launcher) if launcher is not None else flashinfer_bench_launcher()[0]
    return [
        *prefix,
        "run",
        "--local",
        str(dataset_dir),
        "--definitions",
        definition,
        "--solutions",
        solution,
        *OFFICIAL_FLAGS,
        *preset.parity_flags,
    ]


_RESOLVE_CODE = (
    "import json, sys\n"
    "from flashinfer_bench.bench.evaluators.registry import resolve_evaluator\n"
    "from flashinfer_bench.data import Definition\n"
    "d = Definition.model_validate(json.load(open(sys.argv[1])))\n"
    "print(resolve_evaluator(d).__name__)\n"
)


def official_evaluator(
    definition_json: str | Path, python: str | None = None, timeout_s: float = 120.0
) -> str | None:
    """The evaluator the installed flashinfer-bench picks for this definition (fibtui's name for it,
    or its class name when fibtui has none), asked in a subprocess of the Python that runs it; None
    when that cannot be told (not installed, an error)."""
    from fibtui.runners.local import scrubbed_environment

    try:
        proc = subprocess.run(
            [python or sys.executable, "-c", _RESOLVE_CODE, str(definition_json)],  # noqa: S603
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=scrubbed_environment(dict(os.environ)),
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    name = (
        proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 and proc.stdout.strip() else ""
    )
    return EVALUATOR_CLASSES.get(name, name) or None


#: asked of the Python that runs flashinfer-bench: its version and commit, cupti-python's and
#: flashinfer's versions, whether cupti imports, and its eval_config resolved for the definition
_FACTS_CODE = """
import json, sys
import importlib.metadata as m
def version(name):
    try:
        return m.version(name)
    except Exception:
        return None
out = {"version": version("flashinfer-bench"), "cupti_python": version("cupti-python"),
       "flashinfer": version("flashinfer-python"), "commit": None}
try:
    url = m.distribution("flashinfer-bench").read_text("direct_url.json")
    out["commit"] = (json.loads(url).get("vcs_info") or {}).get("commit_id") if url else None
except Exception:
    pass
try:
    from cupti import cupti
    out["cupti_importable"] = True
except Exception as exc:
    out["cupti_importable"] = False
    out["cupti_error"] = (type(exc).__name__ + ": " + str(exc))[:200]
if len(sys.argv) > 1:
    try:
        from flashinfer_bench.bench.config import BenchmarkConfig
        from flashinfer_bench.data import Definition
        d = Definition.model_validate(json.load(open(sys.argv[1])))
        cfg = BenchmarkConfig.default().resolve_eval_config(d)
        keys = ("atol", "rtol", "required_matched_ratio", "warmup_runs", "iterations", "num_trials")
        out["eval_config"] = {k: getattr(cfg, k, None) for k in keys}
        out["eval_config"]["extra"] = dict(getattr(cfg, "extra", {}) or {})
    except Exception as exc:
        out["eval_config_error"] = (type(exc).__name__ + ": " + str(exc))[:300]
print(json.dumps(out))
"""


def bench_facts(
    python: str | None, definition_json: str | Path | None, timeout_s: float = 120.0
) -> dict[str, Any]:
    """What the Python that runs flashinfer-bench says of it (:data:`_FACTS_CODE`); ``asked``
    False with ``error`` when it could not be asked."""
    from fibtui.runners.local import scrubbed_environment

    argv = [python or sys.executable, "-c", _FACTS_CODE]
    if definition_json is not None:
        argv.append(str(definition_json))
    try:
        proc = subprocess.run(  # noqa: S603
            argv,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=scrubbed_environment(dict(os.environ)),
        )
        lines = proc.stdout.strip().splitlines()
        facts = json.loads(lines[-1]) if proc.returncode == 0 and lines else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        facts = None
    if not isinstance(facts, dict):
        return {"asked": False, "error": "the Python that runs flashinfer-bench could not be asked"}
    facts["asked"] = True
    return facts


def _provenance(
    record: ParityRecord, facts: dict[str, Any], traces: Path | None, preset: EvalPreset | None
) -> None:
    """The record's ``bench`` (version, commit, cupti-python, fallback) and ``eval_config``, and
    their warnings (fibtui.core.provenance)."""
    from fibtui.core import provenance

    texts = []
    for path in (record.path / "console.log", traces):
        if path is not None and path.is_file():
            texts.append(read_input_text(path))
    record.bench = provenance.provenance(facts, texts)
    record.eval_config = (
        facts.get("eval_config") if isinstance(facts.get("eval_config"), dict) else None
    )
    warnings = provenance.provenance_warnings(record.bench)
    if preset is not None:
        warnings += provenance.eval_config_warnings(record.eval_config, preset)
    record.provenance_warnings = warnings


def _bench_installed() -> bool:
    return shutil.which("flashinfer-bench") is not None or bench_version() is not None


@dataclass
class ParityPlan:
    definition: str
    solution: str
    selection: str
    workloads: list[str]
    archive: Path  # optimize_ops/parity/<id> (reserved when the run starts)
    dataset_dir: Path  # <archive>/dataset
    argv: list[str]
    launcher: str  # PATH | python -c
    flags: list[str]
    preset_source: str
    bench_installed: bool
    #: ``--solution``: a candidate folder (contest-style or bare) or a solution.json; None: config.toml's
    solution_path: str | None = None

    @property
    def command_line(self) -> str:
        return shlex.join(self.argv)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["archive"] = str(self.archive)
        out["dataset_dir"] = str(self.dataset_dir)
        out["command_line"] = self.command_line
        return out


def _new_id(definition: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}_{definition.split('_')[0] or 'parity'}"


def plan_parity(
    ws: Workspace,
    selection: str = "rep",
    definition: str | None = None,
    representatives: list[str] | None = None,
    solution: str | None = None,
) -> ParityPlan:
    """What ``fibtui parity`` would run (nothing is written). ``solution``: a candidate folder or
    solution.json to run instead of the workspace's own solution."""
    cfg = ws.config_for(definition)
    dataset = ws.dataset()
    defn = dataset.definition(cfg.definition)
    uuids = select_workloads(selection, defn, dataset, representatives)
    preset = preset_for(defn)
    archive = parity_root(ws) / _new_id(defn.name)
    dataset_dir = archive / "dataset"
    launcher, how = flashinfer_bench_launcher()
    name = cfg.name
    if solution is not None:
        name = str(solution_json_for(ws, cfg, solution)["name"])
    argv = parity_command(dataset_dir, defn.name, name, preset, launcher)
    return ParityPlan(
        defn.name,
        name,
        selection,
        uuids,
        archive,
        dataset_dir,
        argv,
        how,
        [*OFFICIAL_FLAGS, *preset.parity_flags],
        preset.source,
        _bench_installed(),
        solution,
    )


def solution_json_for(ws: Workspace, cfg: SolutionConfig, solution: str | None) -> dict[str, Any]:
    """The solution.json flashinfer-bench runs: config.toml's solution packed as ``fibtui pack``
    packs it, or ``--solution``'s (a contest-style folder packed from its own config.toml, a bare
    folder with the workspace's language and entry point, or a solution.json as it is)."""
    from fibtui.core.plan import solution_from_path
    from fibtui.core.submission import pack_solution
    from fibtui.core.workspace import CONFIG_NAME

    if solution is None:
        return pack_solution(ws.root, cfg.definition).solution
    path = Path(solution).expanduser()
    if not path.is_absolute() and not path.exists() and (ws.root / path).exists():
        path = ws.root / path
    if path.is_dir() and (path / CONFIG_NAME).is_file():
        packed = pack_solution(path).solution
    else:
        src = solution_from_path(path, cfg)
        packed = src.to_solution_json()
        packed["spec"]["target_hardware"] = ["cuda"]
        if packed["spec"]["language"] in ("cuda", "cpp"):
            packed["spec"].setdefault("binding", "tvm-ffi")
    if packed.get("definition") != cfg.definition:
        raise InputError(
            path,
            f"is a solution for {packed.get('definition')!r}, not {cfg.definition!r}",
            field="--solution",
        )
    return packed


# --------------------------------------------------------------------------------------------
# The FlashInfer-Trace folder flashinfer-bench reads
# --------------------------------------------------------------------------------------------


def prepare_dataset_dir(
    target: Path,
    dataset: Dataset,
    definition: Definition,
    uuids: list[str],
    solution: dict[str, Any],
) -> list[str]:
    """Write the definition, the selected workloads and the solution; link the blobs the workloads
    read. Returns the blob paths linked (relative to the dataset root)."""
    op = definition.op_type or "misc"
    (target / "definitions" / op).mkdir(parents=True, exist_ok=True)
    if definition.path is not None and definition.path.is_file():
        shutil.copyfile(definition.path, target / "definitions" / op / f"{definition.name}.json")
    else:
        atomic_write_json(target / "definitions" / op / f"{definition.name}.json", definition.raw)
    workloads = dataset.workloads(definition.name)
    lines = []
    blobs: list[str] = []
    for u in uuids:
        w = workloads.get(u)
        lines.append(
            json.dumps(
                {
                    "definition": definition.name,
                    "solution": None,
                    "workload": w.to_json(),
                    "evaluation": None,
                }
            )
        )
        for spec in w.inputs.values():
            if spec.type == "safetensors" and spec.path and spec.path not in blobs:
                blobs.append(spec.path)
    atomic_write_text(
        target / "workloads" / op / f"{definition.name}.jsonl", "\n".join(lines) + "\n"
    )
    atomic_write_json(
        target / "solutions" / op / definition.name / f"{_safe(solution['name'])}.json", solution
    )
    root = dataset.root.resolve()
    for rel in blobs:
        src = (root / rel).resolve()
        if root not in src.parents or not src.is_file():
            raise InputError(
                root / rel,
                "safetensors file of a selected workload is missing or outside the dataset",
            )
        dst = target / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if not dst.exists():
            try:
                dst.symlink_to(src)
            except OSError:
                shutil.copyfile(src, dst)
    return blobs


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:120] or "solution"


# --------------------------------------------------------------------------------------------
# Comparing with fibtui's own record
# --------------------------------------------------------------------------------------------


def parity_tau(workspace_root: str | Path, definition: str | None = None) -> tuple[float, str]:
    """tau for "the two disagree": fibtui's noise floor (:func:`fibtui.core.stats.noise_floor`:
    ``[stats] min_gain`` in fibtui.toml, default 1%, raised by the workspace's A/A history of this
    definition on a GPU; interpreter sessions never count)."""
    from fibtui.core import stats

    sessions = [
        s
        for s in stats.aa_sessions(archive_root_of(workspace_root))
        if definition is None or s.definition == definition
    ]
    floor = stats.noise_floor(
        stats.StatsSettings.from_workspace(workspace_root),
        sessions,
        f"{definition}, GPU timings" if definition else None,
    )
    return floor.tau, floor.source


@dataclass
class FibtuiRecord:
    """fibtui's rows for one solution, per workload (repeats combined)."""

    label: str
    run_id: str | None
    timing_kind: str | None
    hardware: str | None
    by_uuid: dict[str, tuple[str, float | None]]  # uuid -> (status, mean latency of PASSED repeats)
    #: uuid -> the mean official-equivalent latency of its PASSED repeats (a run timed with
    #: ``--timing official``: flashinfer-bench main's method in fibtui's worker), else empty
    official_by_uuid: dict[str, float] = field(default_factory=dict)


def _combine(rows: list[ResultRow]) -> dict[str, tuple[str, float | None]]:
    grouped: dict[str, list[ResultRow]] = {}
    for r in rows:
        grouped.setdefault(r.uuid, []).append(r)
    out = {}
    for uuid, rs in grouped.items():
        failed = next((r.status for r in rs if r.status != PASSED), None)
        lat = [r.latency_ms for r in rs if r.status == PASSED and r.latency_ms]
        out[uuid] = (failed or PASSED, sum(lat) / len(lat) if lat and failed is None else None)
    return out


def _record_of(folder: Path) -> dict[str, Any] | None:
    path = folder / "run.json"
    try:
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
        return build_record(folder, read_journal(folder / "journal.jsonl")).to_json()
    except (OSError, ValueError, InputError):
        return None


def _rows_from_record(record: dict[str, Any], path: Path) -> list[ResultRow]:
    rows = []
    for j in record.get("jobs") or []:
        if (
            not isinstance(j, dict)
            or not isinstance(j.get("uuid"), str)
            or not isinstance(j.get("status"), str)
        ):
            continue
        lat = j.get("latency_ms")
        rows.append(
            ResultRow(
                definition=str(record.get("definition")),
                solution=j.get("solution"),
                uuid=j["uuid"],
                axes=dict(j.get("axes") or {}),
                status=j["status"],
                latency_ms=float(lat) if isinstance(lat, (int, float)) else None,
                source=str(path),
                role=j.get("role"),
                repeat=j.get("repeat"),
            )
        )
    return rows


def _fibtui_from(
    record: dict[str, Any], path: Path, solution: str, uuids: set[str], fallback_first: bool
) -> FibtuiRecord | None:
    rows = _rows_from_record(record, path)
    mine = [r for r in rows if r.solution == solution and r.uuid in uuids]
    label_solution = solution
    if not mine and fallback_first:
        cands = [r for r in rows if r.role == "candidate" and r.uuid in uuids] or [
            r for r in rows if r.uuid in uuids
        ]
        if cands:
            label_solution = cands[0].solution or "?"
            mine = [r for r in cands if r.solution == label_solution]
    if not mine:
        return None
    kind = record.get("timing_kind")
    hw = (record.get("environment") or {}).get("gpu")
    label = f"fibtui run {record.get('run_id')} ({label_solution}, {kind})"
    return FibtuiRecord(
        label,
        record.get("run_id"),
        kind,
        hw,
        _combine(mine),
        _official_means(record, label_solution, {r.uuid for r in mine}),
    )


def _official_means(record: dict[str, Any], solution: str, uuids: set[str]) -> dict[str, float]:
    """uuid -> the mean of the PASSED jobs' ``timing.official.latency_ms`` of ``solution``."""
    got: dict[str, list[float]] = {}
    for j in record.get("jobs") or []:
        if not isinstance(j, dict) or j.get("solution") != solution or j.get("status") != PASSED:
            continue
        off = (j.get("timing") or {}).get("official") if isinstance(j.get("timing"), dict) else None
        lat = off.get("latency_ms") if isinstance(off, dict) else None
        if (
            j.get("uuid") in uuids
            and isinstance(lat, (int, float))
            and math.isfinite(lat)
            and lat > 0
        ):
            got.setdefault(j["uuid"], []).append(float(lat))
    return {u: sum(v) / len(v) for u, v in got.items()}


def fibtui_record(
    archive_root: Path,
    definition: str,
    solution: str,
    uuids: list[str],
    against: str | Path | None = None,
) -> FibtuiRecord | None:
    """fibtui's record to set beside the parity traces: ``against`` (a run id or a run.json), else
    the newest run of ``definition`` holding ``solution`` on these workloads, GPU-timed runs first."""
    wanted = set(uuids)
    if against is not None:
        p = Path(against)
        if p.is_file():
            try:
                record = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise InputError(p, f"not a fibtui run record: {exc}") from None
            if not isinstance(record, dict) or record.get("format") != "fibtui-run":
                raise InputError(p, "not a fibtui run record (run.json)", field="format")
        else:
            folder = run_dir(archive_root, str(against))
            record = _record_of(folder) or {}
            p = folder / "run.json"
        found = _fibtui_from(record, p, solution, wanted, fallback_first=True)
        if found is None:
            raise UsageError(f"{against} holds no result for these workloads")
        return found
    listings = [
        r for r in reversed(list_runs(archive_root)) if r.definition == definition and r.jobs_done
    ]
    records = [(lst.path, _record_of(lst.path)) for lst in listings]
    for gpu_only in (True, False):
        for folder, record in records:
            if not record or (gpu_only and record.get("timing_kind") == "cpu-interpreter"):
                continue
            found = _fibtui_from(
                record, folder / "run.json", solution, wanted, fallback_first=False
            )
            if found is not None:
                return found
    return None


@dataclass
class ParityRow:
    uuid: str
    axes: dict[str, int]
    bench_status: str
    bench_latency_ms: float | None
    fibtui_status: str | None
    fibtui_latency_ms: float | None
    ratio: float | None  # flashinfer-bench latency / fibtui latency
    flag: str | None = None  # verdict | latency | None
    #: where flashinfer-bench's status comes from: its saved trace, or only its console log (it
    #: saves a definition's traces when the definition ends; a run stopped before has only the log)
    bench_from: str = "trace"
    #: fibtui's official-equivalent latency (``--timing official``) and flashinfer-bench's over it
    official_latency_ms: float | None = None
    official_ratio: float | None = None


#: flashinfer-bench's line for each workload it finished ("Solution 'S' for workload U: STATUS ...")
_LOG_STATUS = re.compile(
    r"Solution '(?P<solution>[^']+)' for workload (?P<uuid>[0-9A-Za-z-]+): (?P<status>[A-Z][A-Z_]+)"
)


def log_statuses(path: Path | None) -> dict[str, dict[str, str]]:
    """solution -> {workload uuid: status} from a flashinfer-bench console log (the last line of a
    workload wins); empty when there is no log."""
    out: dict[str, dict[str, str]] = {}
    if path is None or not path.is_file():
        return out
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            m = _LOG_STATUS.search(line)
            if m:
                out.setdefault(m["solution"], {})[m["uuid"]] = m["status"]
    return out


@dataclass
class Comparison:
    solution: str
    fibtui: str | None  # label of fibtui's record, None when there is none
    fibtui_timing_kind: str | None
    bench_hardware: str | None
    fibtui_hardware: str | None
    tau: float
    tau_source: str
    rows: list[ParityRow] = field(default_factory=list)
    compared: int = 0
    geomean_ratio: float | None = None
    min_ratio: float | None = None
    max_ratio: float | None = None
    #: flashinfer-bench's latency over fibtui's official-equivalent one (the like-for-like
    #: check of the official twin): geometric mean, range, workloads
    official_geomean_ratio: float | None = None
    official_min_ratio: float | None = None
    official_max_ratio: float | None = None
    official_compared: int = 0
    verdict_mismatches: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(1 for r in self.rows if r.bench_status == PASSED)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["passed"] = self.passed
        out["total"] = len(self.rows)
        return out


def compare(
    bench_rows: list[ResultRow],
    solution: str,
    fib: FibtuiRecord | None,
    tau: float,
    tau_source: str = "default 1%",
    bench_hardware: str | None = None,
    logged: dict[str, str] | None = None,
    axes_of: dict[str, dict[str, int]] | None = None,
) -> Comparison:
    """flashinfer-bench's rows of ``solution`` beside fibtui's record, with the warnings.
    ``logged`` (uuid -> status from its console log) fills in the workloads that have no trace:
    their verdicts are compared, their latencies are not (the log has none)."""
    latest: dict[str, ResultRow] = {}
    for r in bench_rows:
        if r.solution == solution:
            latest[r.uuid] = r  # the last line of a workload wins (a rerun after --resume)
    from_log = {u: st for u, st in (logged or {}).items() if u not in latest}
    for u, st in from_log.items():
        latest[u] = ResultRow(
            definition="",
            solution=solution,
            uuid=u,
            axes=dict((axes_of or {}).get(u, {})),
            status=st,
            latency_ms=None,
        )
    comp = Comparison(
        solution,
        fib.label if fib else None,
        fib.timing_kind if fib else None,
        bench_hardware,
        fib.hardware if fib else None,
        tau,
        tau_source,
    )
    interpreter = fib is not None and fib.timing_kind == "cpu-interpreter"
    ratios: list[float] = []
    official: list[float] = []
    for uuid, r in latest.items():
        fs, fl = (fib.by_uuid.get(uuid) if fib else None) or (None, None)
        row = ParityRow(
            uuid,
            dict(r.axes),
            r.status,
            r.latency_ms,
            fs,
            fl,
            None,
            bench_from="log" if uuid in from_log else "trace",
        )
        if fs is not None and (r.status == PASSED) != (fs == PASSED):
            row.flag = "verdict"
            comp.verdict_mismatches.append(uuid)
        elif fs is not None and fs != r.status:
            comp.notes.append(f"{uuid[:8]}: both failed, flashinfer-bench {r.status}, fibtui {fs}")
        if r.status == PASSED and fs == PASSED and r.latency_ms and fl and not interpreter:
            row.ratio = r.latency_ms / fl
            ratios.append(row.ratio)
            if abs(math.log(row.ratio)) > tau and row.flag is None:
                row.flag = "latency"
        twin = fib.official_by_uuid.get(uuid) if fib is not None and not interpreter else None
        if r.status == PASSED and fs == PASSED and r.latency_ms and twin:
            row.official_latency_ms = twin
            row.official_ratio = r.latency_ms / twin
            official.append(row.official_ratio)
        comp.rows.append(row)
    comp.compared = len(ratios)
    if from_log:
        comp.notes.append(
            f"{len(from_log)} workload(s) judged from flashinfer-bench's console log only: it saves a "
            "definition's traces when the definition ends and was stopped before; verdicts compared, "
            "latencies not"
        )
    if fib is None:
        comp.notes.append(
            "no fibtui run of this definition holds this solution on these workloads: "
            "run `fibtui run --workloads ...` to set one beside it"
        )
    elif not any(r.fibtui_status for r in comp.rows):
        comp.notes.append(f"{fib.label} holds none of these workloads")
    if interpreter:
        comp.notes.append(
            f"{fib.label if fib else 'fibtui'} was timed by the CPU interpreter: verdicts compared, latencies not"
        )
    if bench_hardware and fib and fib.hardware and bench_hardware != fib.hardware:
        comp.notes.append(
            f"flashinfer-bench ran on {bench_hardware}, fibtui's record on {fib.hardware}: latencies are "
            "from different GPUs"
        )
    if comp.verdict_mismatches:
        pairs = ", ".join(
            f"{u[:8]} (flashinfer-bench {latest[u].status}, fibtui {fib.by_uuid[u][0]})"
            for u in comp.verdict_mismatches[:6]
            if fib
        )
        more = (
            f" and {len(comp.verdict_mismatches) - 6} more"
            if len(comp.verdict_mismatches) > 6
            else ""
        )
        comp.warnings.append(
            f"verdicts differ on {len(comp.verdict_mismatches)} workload(s): {pairs}{more}"
        )
    if ratios:
        g = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        comp.geomean_ratio, comp.min_ratio, comp.max_ratio = g, min(ratios), max(ratios)
        if abs(math.log(g)) > tau:
            text = (
                f"flashinfer-bench reports {g:.2f}x fibtui's latency (geometric mean over {len(ratios)} workload(s), "
                f"{min(ratios):.2f}-{max(ratios):.2f}x; tau {tau:.1%}, {tau_source})"
            )
            if g >= 2:
                text += ": a harness reporting several times the kernel's device time is timing launch overhead, not the kernel"
            comp.warnings.append(text)
    if official:
        g = math.exp(sum(math.log(x) for x in official) / len(official))
        comp.official_geomean_ratio, comp.official_compared = g, len(official)
        comp.official_min_ratio, comp.official_max_ratio = min(official), max(official)
        comp.notes.append(
            f"against fibtui's official-equivalent timing (flashinfer-bench main's method in "
            f"fibtui's worker): {g:.3f}x (geometric mean over {len(official)} workload(s), "
            f"{min(official):.3f}-{max(official):.3f}x)"
        )
        if abs(math.log(g)) > OFFICIAL_AGREEMENT:
            comp.warnings.append(
                f"flashinfer-bench and fibtui's official-equivalent timing differ by {g:.3f}x "
                f"(geometric mean; they should agree within {OFFICIAL_AGREEMENT:.0%}): one of them "
                "does not time as the other"
            )
    return comp


#: how far flashinfer-bench main and fibtui's official twin may differ (geometric mean, in log
#: terms) before a parity record warns: the target issue 33 set, checked on the H200
OFFICIAL_AGREEMENT = 0.03


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


@dataclass
class ParityRecord:
    id: str
    definition: str
    solution: str
    source: str  # run | import
    started: str
    finished: str | None
    path: Path
    selection: str = ""
    workloads: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    returncode: int | None = None
    imported_from: str | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    passed: int = 0
    total: int = 0
    comparisons: list[Comparison] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the evaluator fibtui judges this definition with (fibtui.core.presets), and the one the
    #: flashinfer-bench that ran picked (None for an import, or when it could not be asked)
    evaluator: str | None = None
    bench_evaluator: str | None = None
    #: the flashinfer-bench that ran (fibtui.core.provenance.provenance): version, commit,
    #: release, cupti_python, flashinfer, cuda_event_fallback; and its eval_config resolved for
    #: the definition (None: not asked, or a flashinfer-bench without one)
    bench: dict[str, Any] = field(default_factory=dict)
    eval_config: dict[str, Any] | None = None
    provenance_warnings: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """N/N PASSED for the solution (and, for a run, every selected workload has a trace)."""
        expected = len(self.workloads) if self.source == "run" else self.total
        traced = all(r.bench_from == "trace" for c in self.comparisons[:1] for r in c.rows)
        return (
            self.total > 0
            and self.passed == self.total == expected
            and self.returncode in (None, 0)
            and traced
        )

    @property
    def warnings(self) -> list[str]:
        return [*self.provenance_warnings, *(w for c in self.comparisons for w in c.warnings)]

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["format"] = RECORD_FORMAT
        out["version"] = RECORD_VERSION
        out["path"] = str(self.path)
        out["complete"] = self.complete
        out["warnings"] = self.warnings
        out["command_line"] = shlex.join(self.command) if self.command else None
        out["comparisons"] = [c.to_json() for c in self.comparisons]
        return out


@dataclass
class ParityStatus:
    """The newest parity record of a definition, for pack/tag and the TUI."""

    id: str
    definition: str
    solution: str
    source: str
    finished: str | None
    passed: int
    total: int
    complete: bool
    warnings: int
    path: Path

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["path"] = str(self.path)
        return out


def parity_status(workspace: Any, definition: str) -> ParityStatus | None:
    """The latest parity run (or import) of ``definition`` in this workspace, or None."""
    root = parity_root(workspace)
    if not root.is_dir():
        return None
    best: tuple[str, ParityStatus] | None = None
    for p in root.glob("*/parity.json"):
        try:
            obj = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if (
            not isinstance(obj, dict)
            or obj.get("format") != RECORD_FORMAT
            or obj.get("definition") != definition
        ):
            continue
        stamp = str(obj.get("finished") or obj.get("started") or "")
        st = ParityStatus(
            id=str(obj.get("id")),
            definition=definition,
            solution=str(obj.get("solution")),
            source=str(obj.get("source")),
            finished=obj.get("finished"),
            passed=int(obj.get("passed") or 0),
            total=int(obj.get("total") or 0),
            complete=bool(obj.get("complete")),
            warnings=len(obj.get("warnings") or []),
            path=p.parent,
        )
        key = f"{stamp}|{p.parent.name}"
        if best is None or key > best[0]:
            best = (key, st)
    return best[1] if best else None


def _finish_record(
    record: ParityRecord, traces: Path | None, ws: Workspace, against: str | Path | None
) -> ParityRecord:
    """Import the traces, compare, write comparison.json and parity.json."""
    tau, tau_source = parity_tau(ws.root, record.definition)
    rows: list[ResultRow] = []
    if traces is not None and traces.is_file() and traces.stat().st_size:
        table = load_results(traces)
        rows = [r for r in table.rows if r.definition == record.definition]
        others = sorted({r.definition for r in table.rows} - {record.definition})
        if others:
            record.notes.append(f"traces of other definitions left aside: {', '.join(others)}")
        record.environment = dict(table.meta.get("environment") or {})
        if record.source == "import" and not rows:
            raise InputError(
                traces, f"no traces for {record.definition} (found: {', '.join(others) or 'none'})"
            )
    solutions = list(dict.fromkeys(r.solution for r in rows if r.solution))
    if record.source == "import" and record.solution not in solutions and solutions:
        record.notes.append(
            f"the traces hold no {record.solution}; comparing {', '.join(solutions)}"
        )
        record.solution = solutions[0]
    if record.solution not in solutions:
        solutions.insert(0, record.solution)
    else:
        solutions.remove(record.solution)
        solutions.insert(0, record.solution)
    hardware = record.environment.get("hardware")
    logged = log_statuses(record.path / "console.log")
    if record.source == "run":
        logged = {
            sol: {u: st for u, st in by.items() if u in set(record.workloads)}
            for sol, by in logged.items()
        }
    if record.solution in logged and record.solution not in solutions:
        solutions.insert(0, record.solution)
    axes_of = _workload_axes(record.path / "dataset")
    for sol in solutions:
        sol_rows = [r for r in rows if r.solution == sol]
        sol_logged = logged.get(sol, {})
        uuids = list(dict.fromkeys([r.uuid for r in sol_rows] + list(sol_logged))) or list(
            record.workloads
        )
        fib = fibtui_record(
            ws.archive_root,
            record.definition,
            sol,
            uuids,
            against if sol == record.solution else None,
        )
        record.comparisons.append(
            compare(sol_rows, sol, fib, tau, tau_source, hardware, sol_logged, axes_of)
        )
    if record.bench_evaluator and record.evaluator and record.bench_evaluator != record.evaluator:
        version = bench_version() or "this"
        for c in record.comparisons:
            c.warnings.append(
                f"flashinfer-bench {version} judged with its {record.bench_evaluator} evaluator; the contest's "
                f"(flashinfer-bench's main branch, and fibtui) is {record.evaluator}: where they disagree, "
                "fibtui's verdict is the contest's"
            )
    main = record.comparisons[0]
    record.passed, record.total = main.passed, len(main.rows)
    if record.source == "run":
        missing = [u for u in record.workloads if u not in {r.uuid for r in main.rows}]
        if missing:
            record.notes.append(
                f"{len(missing)} selected workload(s) have no trace (e.g. {missing[0]})"
            )
        if not record.workloads:
            record.workloads = [r.uuid for r in main.rows]
    else:
        record.workloads = [r.uuid for r in main.rows]
    record.finished = now_iso()
    atomic_write_json(
        record.path / "comparison.json", {"comparisons": [c.to_json() for c in record.comparisons]}
    )
    atomic_write_json(record.path / "parity.json", record.to_json())
    return record


def _workload_axes(dataset_dir: Path) -> dict[str, dict[str, int]]:
    """uuid -> axes of the workloads in the folder fibtui prepared for flashinfer-bench (none for
    an import)."""
    out: dict[str, dict[str, int]] = {}
    folder = dataset_dir / "workloads"
    if not folder.is_dir():
        return out
    for path in folder.rglob("*.jsonl"):
        for line in read_input_text(path).splitlines():
            try:
                w = json.loads(line).get("workload") or {}
            except (ValueError, AttributeError):
                continue
            if (
                isinstance(w, dict)
                and isinstance(w.get("uuid"), str)
                and isinstance(w.get("axes"), dict)
            ):
                out[w["uuid"]] = w["axes"]
    return out


def _collect_traces(folder: Path) -> list[Path]:
    """Trace files under a folder: ``traces/**/*.jsonl`` of a FlashInfer-Trace folder, else any
    JSONL whose content is flashinfer-bench traces."""
    if (folder / "traces").is_dir():
        found = sorted(
            p
            for p in (folder / "traces").rglob("*.jsonl")
            if p.is_file() and not p.name.endswith("_workloads.jsonl")
        )
        if found:
            return found
    out = []
    for p in _jsonl_under(folder):
        if not p.is_file():
            continue
        try:
            if detect_format(p) == "fib-traces" and _has_evaluation(p):
                out.append(p)
        except InputError:
            continue
    return out


#: how deep and how many entries the search for trace files under an imported folder looks at:
#: a flashinfer-bench output folder, never a walk of a whole tree (``--import /``)
IMPORT_MAX_DEPTH = 4
IMPORT_MAX_ENTRIES = 20_000


def _jsonl_under(folder: Path) -> list[Path]:
    """The ``.jsonl`` files under ``folder``, at most :data:`IMPORT_MAX_DEPTH` folders down, links
    not followed; more than :data:`IMPORT_MAX_ENTRIES` entries is one line, not a walk."""
    found: list[Path] = []
    seen = 0
    top = len(folder.parts)
    for dirpath, dirnames, filenames in os.walk(folder):
        seen += len(dirnames) + len(filenames)
        if seen > IMPORT_MAX_ENTRIES:
            raise InputError(
                folder,
                f"holds more than {IMPORT_MAX_ENTRIES} entries: not a flashinfer-bench output "
                "folder (give the folder with its traces/, or a traces file)",
                field="--import",
            )
        here = Path(dirpath)
        if len(here.parts) - top >= IMPORT_MAX_DEPTH:
            dirnames[:] = []
        dirnames.sort()
        found += [here / f for f in sorted(filenames) if f.endswith(".jsonl")]
    return sorted(found)


def _has_evaluation(path: Path) -> bool:
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.strip()
            if line:
                try:
                    obj = json.loads(line)
                except ValueError:
                    return False
                return isinstance(obj, dict) and isinstance(obj.get("evaluation"), dict)
    return False


def _concat(files: list[Path], target: Path) -> None:
    parts = []
    for f in files:
        text = read_input_text(f)  # a byte-order mark is dropped, not pasted into the middle
        if text.strip():
            parts.append(text if text.endswith("\n") else text + "\n")
    atomic_write_text(target, "".join(parts))


def import_parity(
    ws: Workspace,
    path: str | Path,
    definition: str | None = None,
    against: str | Path | None = None,
) -> ParityRecord:
    """Archive an existing parity result (a traces JSONL, or a folder holding traces) and set it
    beside fibtui's record."""
    src = Path(path).expanduser()
    if src.is_dir():
        files = _collect_traces(src)
        if not files:
            raise InputError(
                src, "no flashinfer-bench traces here (expected traces/**/*.jsonl with evaluations)"
            )
    elif src.is_file():
        if detect_format(src) != "fib-traces":
            raise InputError(src, "not flashinfer-bench traces (one JSON trace a line)")
        files = [src]
    else:
        raise InputError(src, "no such file or folder")
    cfg = ws.config_for(definition)
    # every file is read before anything is archived: a bad line is named in the user's own file,
    # and a refused import leaves no folder in the archive
    found: set[str] = set()
    for f in files:
        found |= {r.definition for r in load_results(f).rows}
    if cfg.definition not in found:
        raise InputError(
            src, f"no traces for {cfg.definition} (found: {', '.join(sorted(found)) or 'none'})"
        )
    archive = reserve_unique_path(parity_root(ws) / _new_id(cfg.definition), directory=True)
    try:
        traces = archive / "traces.jsonl"
        _concat(files, traces)
        atomic_write_json(
            archive / "command.json",
            {"imported_from": str(src.resolve()), "files": [str(f) for f in files]},
        )
        record = ParityRecord(
            id=archive.name,
            definition=cfg.definition,
            solution=cfg.name,
            source="import",
            started=now_iso(),
            finished=None,
            path=archive,
            imported_from=str(src.resolve()),
        )
        console = src.parent / "console.log" if src.is_file() else src / "console.log"
        if console.is_file():
            atomic_copy_file(console, archive / "console.log")
        # the flashinfer-bench that made the traces is not this machine's: only its logs tell
        _provenance(record, {"asked": False}, traces, None)
        return _finish_record(record, traces, ws, against)
    except BaseException:
        shutil.rmtree(archive, ignore_errors=True)
        raise


def run_parity(
    ws: Workspace,
    plan: ParityPlan,
    on_line: LineSink | None = None,
    cancel: threading.Event | None = None,
    wall_timeout_s: float | None = None,
    against: str | Path | None = None,
    stopped_by: Callable[[], str | None] | None = None,
) -> ParityRecord:
    """Prepare the folder, run flashinfer-bench (list args, its own process group), import and
    compare. Output lines go to ``console.log`` and to ``on_line`` as they come."""
    cancel = cancel or threading.Event()
    dataset = ws.dataset()
    defn = dataset.definition(plan.definition)
    packed_solution = solution_json_for(ws, ws.config_for(plan.definition), plan.solution_path)
    if packed_solution["name"] != plan.solution:
        plan.solution = packed_solution["name"]
    archive = reserve_unique_path(plan.archive, directory=True)
    if archive != plan.archive:  # the name was taken: rebase the folder and the command on it
        old = str(plan.dataset_dir)
        plan.archive, plan.dataset_dir = archive, archive / "dataset"
        plan.argv = [str(plan.dataset_dir) if a == old else a for a in plan.argv]
    atomic_write_json(archive / "solution.json", packed_solution)
    prepare_dataset_dir(plan.dataset_dir, dataset, defn, plan.workloads, packed_solution)
    atomic_write_json(
        archive / "command.json",
        {
            "argv": plan.argv,
            "command_line": plan.command_line,
            "cwd": str(archive),
            "launcher": plan.launcher,
            "flags": plan.flags,
            "preset_source": plan.preset_source,
        },
    )
    record = ParityRecord(
        id=archive.name,
        definition=plan.definition,
        solution=plan.solution,
        source="run",
        started=now_iso(),
        finished=None,
        path=archive,
        selection=plan.selection,
        workloads=list(plan.workloads),
        command=list(plan.argv),
        evaluator=preset_for(defn).evaluator,
    )
    defn_json = next(
        iter(sorted((plan.dataset_dir / "definitions").rglob(f"{defn.name}.json"))), None
    )
    python = plan.argv[0] if plan.launcher == "python -c" else _script_python(plan.argv[0])
    if defn_json is not None:
        # flashinfer-bench from PATH is asked through its own interpreter when it is a script
        record.bench_evaluator = official_evaluator(defn_json, python)
    facts = bench_facts(python, defn_json)
    atomic_write_json(archive / "parity.json", record.to_json())
    record.returncode = _run_logged(
        plan.argv, archive, archive / "console.log", on_line, cancel, wall_timeout_s
    )
    if cancel.is_set():
        signal_name = stopped_by() if stopped_by is not None else None
        record.notes.append(
            f"stopped by {signal_name}: flashinfer-bench was stopped before it finished"
            if signal_name
            else "cancelled by the user"
        )
    elif record.returncode != 0:
        record.notes.append(
            f"flashinfer-bench exited with code {record.returncode} (see console.log)"
        )
    files = _collect_traces(plan.dataset_dir)
    traces = archive / "traces.jsonl"
    if files:
        _concat(files, traces)
    else:
        record.notes.append("flashinfer-bench saved no traces")
    _provenance(record, facts, traces if files else None, preset_for(defn))
    return _finish_record(record, traces if files else None, ws, against)


def _script_python(exe: str) -> str | None:
    """The interpreter of a console script (its ``#!`` line), else this Python."""
    try:
        with open(exe, "rb") as fh:
            first = fh.readline(512)
    except OSError:
        return None
    if first.startswith(b"#!"):
        words = first[2:].decode("utf-8", "replace").split()
        if words and Path(words[0]).name.startswith("python"):
            return words[0]
    return sys.executable


def _run_logged(
    argv: list[str],
    cwd: Path,
    log_path: Path,
    on_line: LineSink | None,
    cancel: threading.Event,
    wall_timeout_s: float | None,
) -> int:
    from fibtui.runners.local import scrubbed_environment

    env = scrubbed_environment(
        dict(os.environ)
    )  # the solution under test never sees tokens or secrets
    env["PYTHONUNBUFFERED"] = "1"
    deadline = time.monotonic() + wall_timeout_s if wall_timeout_s else None
    with open(log_path, "ab") as log:
        try:
            proc = subprocess.Popen(
                argv,
                cwd=str(cwd),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            log.write(f"could not start {argv[0]}: {exc}\n".encode())
            raise UsageError(
                f"could not start flashinfer-bench ({argv[0]}): {exc.strerror or exc}"
            ) from None
        done = threading.Event()

        def pump() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                log.write(raw)
                log.flush()
                if on_line is not None:
                    on_line(raw.decode("utf-8", "replace").rstrip("\n"))
            done.set()

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            while proc.poll() is None:
                if cancel.is_set() or (deadline is not None and time.monotonic() > deadline):
                    _kill_group(proc)
                    break
                cancel.wait(0.1)
        finally:
            if proc.poll() is None:
                _kill_group(proc)
        done.wait(5)
        return proc.wait()


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, PermissionError):
        pass
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
