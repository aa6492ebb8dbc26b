"""The archive (``optimize_ops/``), decisions and round summaries.

Layout (docs/formats.md, "The archive, optimize_ops/"), relative to the archive root ``<workspace>/optimize_ops``::

    runs/<run_id>/                 fibtui's run folders (journal, run.json, snapshots, worker logs)
    benchmarks/                    run results and other measurement files; benchmarks/ncu/ for
                                   Nsight Compute reports; benchmarks/aa.jsonl: A/A sessions
    docs/                          round summaries round_<date>_<topic>.md (+ .json twin),
                                   rounds.jsonl (one line per decision: the round records)
    kernels/<id>/                  isolated candidates (ids without a version, rejected workspace edits)
    v<major>/<id>/                 snapshots of each tested kernel (v2_smallb_splitv -> v2/)
    <operator>/parallel_runs/      result folders of other runners, archived as they are
    best_solution_<language>/      the best kernel, named latency-first
                                   (<operator>_<model>_lat<xxpxxx>us.kernel.<ext>), its full
                                   snapshot in a folder of the same stem, and best.json (the
                                   pointer to the current best: the one file rewritten here)

Nothing archived is ever overwritten: a taken name becomes ``_run2``, ``_run3``
(:func:`fibtui.core.fsio.reserve_unique_path`). Every folder and file is made through
:mod:`fibtui.core.fsio`, so a write the file system refuses (no permission, a read-only or full
disk, a file where a folder belongs) is one :class:`~fibtui.core.errors.WriteFailed` line naming
the path, and the entry being made is removed again: nothing is left half-written.

Decisions (``promote``, ``reject``, ``archive_only``) archive first, then act, then append a round
record to ``docs/rounds.jsonl`` (a later line for the same round replaces the earlier one) and
regenerate the round summary. A round record freezes what its decision used (the noise floor and
the statistics settings), so the summary is regenerated from the records alone: the run records
named in the round, the round record and the workload definition; the same records give the same
bytes (no clock is read; dates come from the run records).

Restoring on reject: the checked-in kernel (``solution/<language>/``) goes back to the last commit
(``git checkout HEAD -- solution/<language>``, with files the candidate added removed after they
were archived): ``promote`` commits what it changed, so the last commit is the previous best. A
workspace that is not a git repository (or has no commit of that folder) is restored from the best
snapshot under ``best_solution_<language>/`` instead.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fibtui.core import stats
from fibtui.core.dataset import iter_jsonl
from fibtui.core.errors import CheckFailed, InputError, UsageError, WriteFailed
from fibtui.core.fsio import (
    append_line,
    atomic_copy_file,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    check_input_file,
    make_dirs,
    read_input_text,
    reserve_unique_path,
)
from fibtui.core.workspace import archive_root_of  # noqa: F401  (the archive's own name for it)

ROUNDS_FILE = "docs/rounds.jsonl"
RUNS_DIR = "runs"
BEST_POINTER = "best.json"
DECISIONS = ("promoted", "archived", "rejected", "undecided")
#: ``<version>_<band>_<change>``: v2_smallb_splitv, v25a_long_gemm2_ns2
CANDIDATE_ID = re.compile(r"^v(?P<major>\d+)[a-z]?_(?P<band>[a-z0-9]+)_(?P<change>[a-z0-9]+(?:_[a-z0-9]+)*)$")
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_SKIP_NAMES = {"__pycache__", "lock", ".pytest_cache"}


def safe_name(text: str, fallback: str = "item") -> str:
    name = _SAFE.sub("_", text).strip("._")[:100]
    return name or fallback


def _rel(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


# --------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------


def check_candidate_id(name: str) -> list[str]:
    """Warnings (never a refusal) when ``name`` does not read ``<version>_<band>_<change>``."""
    if CANDIDATE_ID.match(name):
        return []
    return [f"candidate id {name!r} does not name its hypothesis as <version>_<band>_<change> "
            "(e.g. v2_smallb_splitv: version v2, band smallb, change splitv)"]


def candidate_parts(name: str) -> dict[str, str] | None:
    m = CANDIDATE_ID.match(name)
    if not m:
        return None
    return {"version": name.split("_", 1)[0], "band": m.group("band"), "change": m.group("change")}


def candidate_major(name: str) -> int | None:
    m = CANDIDATE_ID.match(name) or re.match(r"^v(?P<major>\d+)", name)
    return int(m.group("major")) if m else None


def latency_tag(latency_us: float) -> str:
    """8.022 us -> ``lat8p022us`` (three decimals, the point spelled ``p``)."""
    if not isinstance(latency_us, (int, float)) or isinstance(latency_us, bool) or not math.isfinite(latency_us) or latency_us < 0:
        raise InputError(None, f"latency must be a finite non-negative number of microseconds, got {latency_us!r}",
                         field="latency_us")
    whole, _, frac = f"{float(latency_us) + 0.0:.3f}".partition(".")  # + 0.0 turns -0.0 into 0.0
    return f"lat{whole}p{frac}us"


def best_artifact_name(operator: str, model: str, latency_us: float, ext: str) -> str:
    """``<operator>_<model>_lat<xxpxxx>us.<ext>`` (ext without the leading dot, e.g. kernel.cu)."""
    return f"{safe_name(operator, 'operator')}_{safe_name(model, 'model')}_{latency_tag(latency_us)}.{ext.lstrip('.')}"


# --------------------------------------------------------------------------------------------
# Archiving files and folders (never overwriting)
# --------------------------------------------------------------------------------------------


def _copy_tree_into(src: Path, dest: Path, skip_dirs: tuple[str, ...] = ()) -> None:
    """Fill the empty folder ``dest`` (just reserved) with a copy of ``src``: the copy is built in a
    temp folder beside it and renamed onto ``dest``, so ``dest`` is whole or stays empty. Links are
    never followed (nothing outside ``src`` is copied); caches and lock files are left out."""
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    except OSError as exc:
        raise WriteFailed(dest, exc) from None
    try:
        for dirpath, dirnames, filenames in os.walk(src):
            here = Path(dirpath)
            rel = here.relative_to(src)
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_NAMES and not (here / d).is_symlink()
                                 and not (rel == Path(".") and d in skip_dirs))
            make_dirs(tmp / rel)
            for name in sorted(filenames):
                item = here / name
                if name in _SKIP_NAMES or name.endswith(".pyc") or item.is_symlink() or not item.is_file():
                    continue
                if rel == Path(".") and name in skip_dirs:
                    continue
                atomic_copy_file(item, tmp / rel / name)
                shutil.copystat(item, tmp / rel / name)
        os.replace(tmp, dest)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError) and not isinstance(exc, WriteFailed):
            raise WriteFailed(dest, exc) from None
        raise


@contextlib.contextmanager
def _claimed(path: Path):
    """A just-reserved archive name: removed again when filling it fails, so a failed step leaves
    no half-made entry behind."""
    try:
        yield path
    except BaseException:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        raise


def archive_run(archive_root: Path, run_folder: str | Path) -> Path:
    """Copy one run folder (journal, run.json, snapshots, worker logs; not ``work/``) to
    ``runs/<run_id>`` (``_run2``... when taken)."""
    src = Path(run_folder)
    if not (src / "journal.jsonl").is_file():
        raise InputError(src, "not a fibtui run folder (no journal.jsonl)")
    from fibtui.core.runs import read_journal

    run_id = read_journal(src / "journal.jsonl").header.run_id
    dest = reserve_unique_path(archive_root / RUNS_DIR / safe_name(run_id, "run"), directory=True)
    with _claimed(dest):
        _copy_tree_into(src, dest, skip_dirs=("work",))
    return dest


def archive_file(archive_root: Path, src: str | Path, subdir: str = "benchmarks", name: str | None = None) -> Path:
    """Copy a file under ``<subdir>/`` of the archive (a run result, a log, a summary...)."""
    src = Path(src)
    check_input_file(src)  # a missing path, a folder, a FIFO or a device: one line, nothing reserved
    dest = reserve_unique_path(archive_root / subdir / safe_name(name or src.name, "file"))
    with _claimed(dest):
        atomic_copy_file(src, dest)
    return dest


def archive_ncu_report(archive_root: Path, src: str | Path, label: str | None = None) -> Path:
    """Copy an Nsight Compute report (.ncu-rep or an exported page) to ``benchmarks/ncu/``."""
    src = Path(src)
    name = f"{safe_name(label)}{''.join(src.suffixes) or '.ncu-rep'}" if label else src.name
    return archive_file(archive_root, src, "benchmarks/ncu", name)


def archive_parallel_runs(archive_root: Path, operator: str, folder: str | Path) -> Path:
    """Copy another runner's result folder to ``<operator>/parallel_runs/<name>``."""
    src = Path(folder)
    if not src.is_dir():
        raise InputError(src, "not a folder")
    dest = reserve_unique_path(archive_root / safe_name(operator, "operator") / "parallel_runs" / safe_name(src.name),
                               directory=True)
    with _claimed(dest):
        _copy_tree_into(src, dest)
    return dest


def candidate_folder(archive_root: Path, candidate_id: str, isolated: bool = False) -> Path:
    """``v<major>/<id>`` for a versioned id, ``kernels/<id>`` otherwise (or when ``isolated``)."""
    major = candidate_major(candidate_id)
    parent = archive_root / ("kernels" if isolated or major is None else f"v{major}")
    return parent / safe_name(candidate_id, "candidate")


def archive_snapshot(archive_root: Path, snapshot: str | Path, candidate_id: str, *, isolated: bool = False,
                     meta: dict[str, Any] | None = None) -> Path:
    """Copy a run's solution snapshot (solution.json + sources/) into the archive, with
    ``archived.json`` saying where it came from."""
    src = Path(snapshot)
    if not src.is_dir():
        raise InputError(src, "snapshot folder not found")
    dest = reserve_unique_path(candidate_folder(archive_root, candidate_id, isolated), directory=True)
    with _claimed(dest):
        _copy_tree_into(src, dest)
        atomic_write_json(dest / "archived.json", {"candidate": candidate_id, **(meta or {})})
    return dest


def archive_sources(archive_root: Path, source_dir: str | Path, candidate_id: str, *, isolated: bool = True,
                    meta: dict[str, Any] | None = None) -> Path:
    """Copy a folder of sources (e.g. the workspace's solution/<language>/) into the archive."""
    src = Path(source_dir)
    if not src.is_dir():
        raise InputError(src, "source folder not found")
    dest = reserve_unique_path(candidate_folder(archive_root, candidate_id, isolated), directory=True)
    with _claimed(dest):
        make_dirs(dest / "sources")
        _copy_tree_into(src, dest / "sources")
        atomic_write_json(dest / "archived.json", {"candidate": candidate_id, **(meta or {})})
    return dest


def write_best(archive_root: Path, snapshot: str | Path, *, language: str, entry_file: str, operator: str, model: str,
               latency_us: float, meta: dict[str, Any] | None = None) -> list[Path]:
    """Put a promoted kernel under ``best_solution_<language>/``: the entry file named
    latency-first, its full snapshot in a folder of the same stem, and best.json pointing at it."""
    src = Path(snapshot)
    entry = src / "sources" / entry_file
    if not entry.is_file():
        raise InputError(src, f"snapshot has no sources/{entry_file}", field="entry_point")
    folder = archive_root / f"best_solution_{safe_name(language, 'language')}"
    ext = "kernel" + (Path(entry_file).suffix or ".py")
    name = best_artifact_name(operator, model, latency_us, ext)
    kernel = reserve_unique_path(folder / name)
    with _claimed(kernel):
        atomic_copy_file(entry, kernel)
        stem = kernel.name[: -len("." + ext)] if kernel.name.endswith("." + ext) else kernel.stem
        snap = reserve_unique_path(folder / stem, directory=True)
        with _claimed(snap):
            _copy_tree_into(src, snap)
    pointer = folder / BEST_POINTER
    previous = read_best(archive_root, language)
    history = list((previous or {}).get("history", []))
    if previous and previous.get("current"):
        history.append({k: v for k, v in previous.items() if k != "history"})
    atomic_write_json(pointer, {"current": kernel.name, "snapshot": snap.name, "latency_us": round(latency_us, 6),
                                "operator": operator, "model": model, "language": language, "entry_file": entry_file,
                                **(meta or {}), "history": history})
    return [kernel, snap, pointer]


def read_best(archive_root: Path, language: str) -> dict[str, Any] | None:
    path = archive_root / f"best_solution_{safe_name(language, 'language')}" / BEST_POINTER
    if not path.is_file():
        return None
    text = read_input_text(path)  # a byte-order mark is accepted; bytes that are not UTF-8 are one line
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise InputError(path, f"not JSON: {exc}") from None
    except ValueError:  # json refuses integers of more than 4300 digits
        raise InputError(path, "not JSON: a number with more than 4300 digits") from None
    if not isinstance(data, dict):
        raise InputError(path, "expected an object")
    for key in ("current", "snapshot"):
        value = data.get(key)
        if value is not None and (not isinstance(value, str) or value in ("", ".", "..") or "/" in value
                                  or "\\" in value or "\0" in value or len(value) > 255):
            raise InputError(path, f"expected a file name inside {path.parent.name}/, got {value!r}", field=key)
    return data


def best_solution_path(archive_root: Path, language: str) -> Path | None:
    """What to pair a gate against: the best snapshot's solution.json (from best.json), or a plain
    best_solution_<language>/ folder of sources; None when nothing was promoted yet."""
    folder = archive_root / f"best_solution_{safe_name(language, 'language')}"
    best = read_best(archive_root, language)
    if best and isinstance(best.get("snapshot"), str):
        candidate = folder / best["snapshot"] / "solution.json"
        if candidate.is_file():
            return candidate
    if folder.is_dir() and any(p.suffix in (".py", ".cu") for p in folder.iterdir() if p.is_file()):
        return folder
    return None


# --------------------------------------------------------------------------------------------
# The workspace's checked-in kernel and config.toml
# --------------------------------------------------------------------------------------------


def set_config_value(config_path: str | Path, dotted: str, value: Any) -> Path:
    """Set ``table.key = value`` in a config.toml with tomlkit: comments and layout survive."""
    import tomlkit

    from fibtui.core.workspace import read_toml

    path = Path(config_path)
    read_toml(path)  # a clear error (file, line) when it is broken
    doc = tomlkit.parse(read_input_text(path))  # tomlkit refuses a byte-order mark; it is dropped
    parts = dotted.split(".")
    node: Any = doc
    for i, part in enumerate(parts[:-1]):
        if part not in node:
            node[part] = tomlkit.table()
        node = node[part]
        if not isinstance(node, dict):
            raise InputError(path, "expected a table", field=".".join(parts[: i + 1]))
    node[parts[-1]] = value
    return atomic_write_text(path, tomlkit.dumps(doc))


def _mirror_sources(src_sources: Path, dest: Path) -> list[str]:
    """Make ``dest`` hold exactly the files of ``src_sources`` (caches left alone)."""
    make_dirs(dest)
    wanted = {p.relative_to(src_sources).as_posix() for p in src_sources.rglob("*") if p.is_file()}
    changed: list[str] = []
    for p in sorted(dest.rglob("*")):
        rel = p.relative_to(dest).as_posix()
        if p.is_file() and "__pycache__" not in p.parts and rel not in wanted:
            try:
                p.unlink()
            except OSError as exc:
                raise WriteFailed(p, exc) from None
            changed.append(rel)
    for rel in sorted(wanted):
        target = dest / rel
        make_dirs(target.parent)
        data = (src_sources / rel).read_bytes()
        if not target.is_file() or target.read_bytes() != data:
            atomic_write_bytes(target, data)  # the user's kernel: never half-written
            changed.append(rel)
    return changed


@dataclass
class RestoreResult:
    source: str  # "git HEAD <sha>" | "best snapshot <name>"
    restored: list[str]
    removed: list[str]


def _open_repo(root: Path):
    import git

    try:
        return git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None


def restore_kernel(workspace_root: str | Path, source_dir: str | Path, *, archive_root: Path | None = None,
                   language: str | None = None) -> RestoreResult:
    """Put ``source_dir`` (the checked-in kernel folder) back to the previous best: the last
    commit when it is in one, else the best snapshot (see the module docstring)."""
    import git

    root = Path(workspace_root).resolve()
    folder = Path(source_dir).resolve()
    repo = _open_repo(root)
    if repo is not None and repo.head.is_valid():
        work = Path(repo.working_tree_dir or root).resolve()
        rel = folder.relative_to(work).as_posix()
        tracked = repo.git.ls_tree("-r", "--name-only", "HEAD", "--", rel).splitlines()
        if tracked:
            removed: list[str] = []
            untracked = repo.git.ls_files("--others", "--exclude-standard", "--", rel).splitlines()
            for path in untracked:
                (work / path).unlink(missing_ok=True)
                removed.append(path)
            # files deleted or changed since HEAD come back; files added and staged go away
            staged_new = repo.git.diff("--cached", "--name-only", "--diff-filter=A", "HEAD", "--", rel).splitlines()
            for path in staged_new:
                repo.git.rm("--cached", "--quiet", "--", path)
                (work / path).unlink(missing_ok=True)
                removed.append(path)
            try:
                repo.git.checkout("HEAD", "--", rel)
            except git.GitCommandError as exc:
                raise UsageError(f"could not restore {rel} from the last commit: {exc.stderr.strip() or exc}") from None
            return RestoreResult(f"git HEAD {repo.head.commit.hexsha[:12]}", tracked, removed)
    if archive_root is not None and language is not None:
        best = read_best(archive_root, language)
        if best and best.get("snapshot"):
            snap = archive_root / f"best_solution_{safe_name(language, 'language')}" / str(best["snapshot"]) / "sources"
            if snap.is_dir():
                changed = _mirror_sources(snap, folder)
                return RestoreResult(f"best snapshot {best['snapshot']}", changed, [])
    raise UsageError(f"nothing to restore {folder} from: it is not in a git commit and there is no best snapshot "
                     "under optimize_ops/best_solution_<language>/")


def commit_paths(workspace_root: str | Path, paths: list[Path], message: str) -> str | None:
    """Commit exactly ``paths`` (nothing else staged goes with them); the new commit's sha, or
    None when the workspace is not a git repository or nothing changed."""

    repo = _open_repo(Path(workspace_root))
    if repo is None:
        return None
    work = Path(repo.working_tree_dir or workspace_root).resolve()
    rels = []
    for p in paths:
        try:
            rels.append(Path(p).resolve().relative_to(work).as_posix())
        except ValueError:
            continue
    rels = [r for r in rels if (work / r).exists() or repo.git.ls_files("--", r)]
    if not rels:
        return None
    repo.git.add("--all", "--", *rels)
    if not repo.git.diff("--cached", "--name-only", "--", *rels).strip():
        return None
    with repo.config_reader() as cr:
        has_user = cr.has_option("user", "name") and cr.has_option("user", "email")
    env = {} if has_user else {"GIT_AUTHOR_NAME": "fibtui", "GIT_AUTHOR_EMAIL": "fibtui@localhost",
                               "GIT_COMMITTER_NAME": "fibtui", "GIT_COMMITTER_EMAIL": "fibtui@localhost"}
    repo.git.commit("-m", message, "--", *rels, env=env)
    return repo.head.commit.hexsha


# --------------------------------------------------------------------------------------------
# Round records
# --------------------------------------------------------------------------------------------


@dataclass
class RoundRecord:
    round: str  # <date>_<topic>
    date: str
    topic: str
    definition: str
    baseline: dict[str, Any]  # name, source_hash, language, entry_point
    candidate: dict[str, Any]
    runs: list[dict[str, str]]  # run_id, kind (gate | sweep | selection)
    decision: str  # promoted | archived | rejected | undecided
    reason: str = ""
    summary: str = ""  # docs/round_<date>_<topic>.md (relative to the archive root)
    artifacts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    noise_floor: dict[str, Any] = field(default_factory=dict)  # frozen: tau, source, min_gain, aa_*
    settings: dict[str, Any] = field(default_factory=dict)  # frozen stats settings
    verdict: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"kind": "round", **asdict(self)}

    @classmethod
    def from_json(cls, obj: dict[str, Any], path: Path | None = None, line: int | None = None) -> RoundRecord:
        known = set(cls.__dataclass_fields__)
        try:
            rec = cls(**{k: v for k, v in obj.items() if k in known})
        except TypeError as exc:
            raise InputError(path, f"round record is malformed: {exc}", line=line) from None
        for key in ("round", "date", "definition", "decision"):
            if not isinstance(getattr(rec, key), str) or not getattr(rec, key):
                raise InputError(path, "expected a non-empty string", line=line, field=key)
        if rec.decision not in DECISIONS:
            raise InputError(path, f"expected one of {', '.join(DECISIONS)}, got {rec.decision!r}", line=line, field="decision")
        if not isinstance(rec.runs, list) or not all(isinstance(r, dict) and isinstance(r.get("run_id"), str) for r in rec.runs):
            raise InputError(path, "expected a list of {run_id, kind}", line=line, field="runs")
        return rec


def load_rounds(archive_root: Path) -> list[RoundRecord]:
    """Every round, in the order first recorded; a later line for a round replaces the earlier."""
    path = archive_root / ROUNDS_FILE
    if not path.is_file():
        return []
    out: dict[str, RoundRecord] = {}
    for number, obj in iter_jsonl(path):
        rec = RoundRecord.from_json(obj, path, number)
        out[rec.round] = rec
    return list(out.values())


def append_round(archive_root: Path, record: RoundRecord) -> Path:
    path = archive_root / ROUNDS_FILE
    append_line(path, json.dumps(record.to_json(), sort_keys=True))
    return path


def find_round(archive_root: Path, name: str | None = None) -> RoundRecord:
    rounds = load_rounds(archive_root)
    if not rounds:
        raise UsageError(f"no round recorded in {archive_root / ROUNDS_FILE}: decide one with fibtui promote / "
                         "reject / archive, or summarize runs with fibtui round summary --runs RUN_ID ...")
    if name is None:
        return rounds[-1]
    for r in rounds:
        if r.round == name or r.summary.endswith(f"round_{name}.md") or r.summary == name:
            return r
    raise UsageError(f"no round {name!r} (known: {', '.join(r.round for r in rounds[-8:])})")


# --------------------------------------------------------------------------------------------
# Reading run records
# --------------------------------------------------------------------------------------------


@dataclass
class RunData:
    run_id: str
    folder: Path
    record: dict[str, Any]

    @property
    def selection(self) -> str:
        return str(self.record.get("workload_selection") or "")

    def solutions(self, role: str) -> list[dict[str, Any]]:
        return [s for s in self.record.get("solutions") or [] if s.get("role") == role]

    def rows(self, role: str, name: str | None = None) -> list[dict[str, Any]]:
        return [j for j in self.record.get("jobs") or [] if j.get("role") == role and (name is None or j.get("solution") == name)]

    @property
    def uuids(self) -> list[str]:
        return list(dict.fromkeys(str(j.get("uuid")) for j in self.record.get("jobs") or []))

    @property
    def gpu(self) -> str | None:
        env = self.record.get("environment") or {}
        return env.get("gpu") if isinstance(env, dict) else None


def load_run(archive_root: Path, run_id: str) -> RunData:
    from fibtui.core.runs import build_record, run_dir

    folder = run_dir(archive_root, run_id)
    path = folder / "run.json"
    from_file = path.is_file()
    if from_file:
        text = read_input_text(path)  # a byte-order mark is accepted; a FIFO or device refused
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(path, f"not JSON: {exc.msg}", line=exc.lineno) from None
        except RecursionError:
            raise InputError(path, "not JSON: RecursionError") from None
        except ValueError:  # an integer of more than 4300 digits
            raise InputError(path, "not JSON: a number with more than 4300 digits") from None
    else:
        record = build_record(folder)
    if not isinstance(record, dict) or record.get("format") != "fibtui-run":
        raise InputError(path, "not a fibtui run record")
    if from_file:  # a record built from the journal is valid by construction
        from fibtui.core.results import check_run_record

        check_run_record(path, record)  # a NaN, zero or negative latency is one line, never a statistic
    return RunData(run_id, folder, record)


def run_kind(run: RunData, total_workloads: int | None = None) -> str:
    """gate (the representatives), sweep (every workload) or selection."""
    if run.selection == "all" or (total_workloads is not None and len(run.uuids) >= total_workloads):
        return "sweep"
    if run.selection == "rep":
        return "gate"
    return "selection"


def _pair_key(run: RunData, candidate: str | None, candidate_hash: str | None = None) -> tuple[str, str, str, str] | None:
    base = run.solutions("baseline")
    cands = run.solutions("candidate")
    if len(base) != 1 or not cands:
        return None
    chosen = [c for c in cands if (candidate is None or c.get("name") == candidate)
              and (candidate_hash is None or c.get("source_hash") == candidate_hash)]
    if not chosen:
        return None
    c = chosen[0]
    return (base[0].get("name", ""), base[0].get("source_hash", ""), c.get("name", ""), c.get("source_hash", ""))


def round_runs(archive_root: Path, run_ids: list[str] | None = None, candidate: str | None = None,
               candidate_hash: str | None = None) -> list[RunData]:
    """The runs of a round: the named ones; else the newest paired run (with ``candidate`` and
    its ``candidate_hash`` when given) and every other paired run of the same baseline and
    candidate sources."""
    from fibtui.core.runs import list_runs

    if run_ids:
        runs = [load_run(archive_root, r) for r in run_ids]
        for r in runs:
            if _pair_key(r, candidate) is None:
                what = f"candidate {candidate!r}" if candidate else "a baseline and a candidate"
                raise UsageError(f"run {r.run_id} has no paired {what}")
        return runs
    listings = [x for x in list_runs(archive_root) if x.passed > 0]
    newest: tuple[RunData, tuple[str, str, str, str]] | None = None
    for listing in reversed(listings):
        try:
            run = load_run(archive_root, listing.path.name)
        except (InputError, UsageError):
            continue
        key = _pair_key(run, candidate, candidate_hash)
        if key is not None and key[1] != key[3]:
            newest = (run, key)
            break
    if newest is None:
        what = f" with candidate {candidate!r}" if candidate else ""
        what += f" of sources {candidate_hash}" if candidate_hash else ""
        raise UsageError(f"no paired run{what} under {archive_root / RUNS_DIR} (run one with fibtui run --baseline DIR "
                         "--solution DIR, or name the runs)")
    out = []
    for listing in listings:
        try:
            run = load_run(archive_root, listing.path.name)
        except (InputError, UsageError):
            continue
        key = _pair_key(run, newest[1][2], newest[1][3])
        if key == newest[1] and run.record.get("definition") == newest[0].record.get("definition"):
            out.append(run)
    return out


# --------------------------------------------------------------------------------------------
# The round report (the data behind the Markdown summary and its JSON twin)
# --------------------------------------------------------------------------------------------


def _us(ms: float | None, digits: int = 3) -> str:
    return "-" if ms is None else f"{ms * 1000:.{digits}f}"


def _signed_pct(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:+.{digits}f}%"


def _ratio_pct(ratio: float | None) -> str:
    return "-" if ratio is None else f"{(ratio - 1.0) * 100:+.2f}%"


def _band_sort_key(name: str) -> tuple[Any, ...]:
    nums = [int(x) for x in re.findall(r"-?\d+", name)]
    return (name.startswith("outlier"), nums, name)


def _band_map(definition_obj: Any, workloads: Any, rows: list[dict[str, Any]]) -> tuple[dict[str, str], Any, str]:
    """uuid -> band (regimes of the definition's workloads when given, else the rows' axes)."""
    if definition_obj is not None and workloads is not None:
        from fibtui.core import regimes

        try:
            report = regimes.analyze(definition_obj, workloads, rows)
        except InputError:
            report = None
        if report is not None:
            return dict(report.table.select("uuid", "band").iter_rows()), report, "regimes of the definition's workloads"
    return stats.bands_from_axes(rows), None, "the result rows' axes"


def _floor_from_record(rec: RoundRecord, settings: stats.StatsSettings) -> stats.NoiseFloor:
    nf = rec.noise_floor or {}
    if "tau" not in nf:
        return stats.noise_floor(settings)
    return stats.NoiseFloor(tau=float(nf["tau"]), source=str(nf.get("source", "")), min_gain=float(nf.get("min_gain", settings.min_gain)),
                            aa_sessions=int(nf.get("aa_sessions", 0)), aa_p99_abs_log_g=nf.get("aa_p99_abs_log_g"),
                            aa_sigma=nf.get("aa_sigma"), aa_promotions=int(nf.get("aa_promotions", 0)))


def _settings_from_record(rec: RoundRecord) -> stats.StatsSettings:
    s = stats.StatsSettings()
    for key, value in (rec.settings or {}).items():
        if hasattr(s, key):
            setattr(s, key, type(getattr(s, key))(value))
    return s


def freeze_floor(floor: stats.NoiseFloor) -> dict[str, Any]:
    out = floor.to_json()
    out["sessions"] = [{"source": s.source, "kind": s.kind, "log_g": s.log_g, "sigma": s.sigma} for s in floor.sessions]
    return out


def _compare_run(run: RunData, base: dict[str, Any], cand: dict[str, Any], band_of: dict[str, str],
                 settings: stats.StatsSettings, floor: stats.NoiseFloor, total: int | None = None) -> stats.Comparison:
    scope = "full" if run_kind(run, total) == "sweep" else "sample"
    return stats.paired_verdict(run.rows("baseline", base["name"]), run.rows("candidate", cand["name"]),
                                scope=scope,
                                baseline_name=base["name"], candidate_name=cand["name"], band_of=band_of,
                                settings=settings, floor=floor, baseline_hash=base.get("source_hash"),
                                candidate_hash=cand.get("source_hash"))


def _env_line(record: dict[str, Any]) -> str:
    env = record.get("environment") or {}
    plan = ((record.get("settings") or {}).get("engine") or {}).get("plan") or {}
    parts = []
    if env.get("gpu"):
        gpu = env["gpu"] + (f" ({env['sm_count']} SMs" if env.get("sm_count") else "")
        if env.get("driver"):
            gpu += f", driver {env['driver']}" if env.get("sm_count") else f" (driver {env['driver']}"
        gpu += ")" if env.get("sm_count") or env.get("driver") else ""
        parts.append(gpu)
    for key in ("torch", "triton", "cuda"):
        if env.get(key):
            parts.append(f"{key} {env[key]}")
    line = ", ".join(parts) or "unknown machine"
    timing = record.get("timing_kind") or "?"
    l2 = record.get("l2_policy") or "?"
    detail = f"; timing {timing}, L2 {l2}"
    if plan.get("blocks") and plan.get("calls_per_block"):
        detail += f", latency = median over {plan['blocks']} blocks of the median of {plan['calls_per_block']} launches"
    return line + detail


def build_round_report(archive_root: Path, rec: RoundRecord, definition_obj: Any = None, workloads: Any = None) -> dict[str, Any]:
    """Everything the round summary says, from the records alone (a plain dict: the JSON twin)."""
    settings = _settings_from_record(rec)
    floor = _floor_from_record(rec, settings)
    runs = [load_run(archive_root, r["run_id"]) for r in rec.runs]
    total = len(workloads) if workloads is not None else None
    base, cand = rec.baseline, rec.candidate
    sweeps = [r for r in runs if run_kind(r, total) == "sweep"]
    deciding = sweeps[-1] if sweeps else runs[-1]
    band_rows = deciding.rows("baseline", base["name"])
    band_of, regime_report, band_source = _band_map(definition_obj, workloads, band_rows)
    run_entries = []
    comparisons: dict[str, stats.Comparison] = {}
    for run in runs:
        comp = _compare_run(run, base, cand, band_of, settings, floor, total)
        comparisons[run.run_id] = comp
        run_entries.append({
            "run_id": run.run_id, "kind": run_kind(run, total), "selection": run.selection,
            "workloads": len(run.uuids), "repeats": run.record.get("repeats"), "state": run.record.get("state"),
            "started": run.record.get("started"), "finished": run.record.get("finished"),
            "backend": run.record.get("backend"), "environment": _env_line(run.record),
            "comparison": _comparison_digest(comp),
        })
    decisive = comparisons[deciding.run_id]
    per_band = sorted(decisive.per_band, key=lambda b: _band_sort_key(b.band))
    # Representatives: the workloads the gate ran (else the regime analysis's picks).
    gates = [r for r in runs if run_kind(r, total) == "gate"]
    rep_uuids = gates[0].uuids if gates else ([r.uuid for r in regime_report.representatives] if regime_report else [])
    shares = {b.name: b.latency_share for b in regime_report.bands} if regime_report else {}
    regime_reasons = {r.uuid: r.reason for r in regime_report.representatives} if regime_report else {}
    pair_of = {p.uuid: p for p in decisive.pairs}
    reps = []
    for uuid in rep_uuids:
        p = pair_of.get(uuid)
        band = band_of.get(uuid, p.band if p else "all")
        share = shares.get(band)
        reason = regime_reasons.get(uuid) or (f"band {band}" + (f" ({share:.0%} of the baseline latency)" if share is not None else ""))
        reps.append({"uuid": uuid, "band": band, "axes": p.axes if p else {}, "reason": reason,
                     "base_ms": p.base_mean_ms if p else None, "cand_ms": p.cand_mean_ms if p else None,
                     "ratio": p.ratio if p else None})
    # Shape matrix: band -> representative workload -> dominant kernel (from the timing records).
    kernels: dict[str, list[str]] = {}
    for run in runs:
        for j in run.rows("candidate", cand["name"]):
            names = (j.get("timing") or {}).get("kernel_names") if isinstance(j.get("timing"), dict) else None
            if names and str(j.get("uuid")) not in kernels:
                kernels[str(j.get("uuid"))] = list(names)
    matrix = []
    rep_by_band: dict[str, str] = {}
    for r in reps:
        rep_by_band.setdefault(r["band"], r["uuid"])
    first_by_band: dict[str, str] = {}
    for uuid, band in band_of.items():
        first_by_band.setdefault(band, uuid)
    for b in per_band:
        uuid = rep_by_band.get(b.band) or first_by_band.get(b.band)
        names = kernels.get(uuid or "", [])
        matrix.append({"band": b.band, "uuid": uuid, "dominant_kernel": names[0] if names else None,
                       "bottleneck": None, "limiter": None,
                       "source": "kernel names from the timing records; not profiled with NCU in this round"})
    findings = _findings(rec, run_entries, decisive, per_band, comparisons, runs, total)
    return {
        "format": "fibtui-round-summary",
        "version": 1,
        "round": rec.round,
        "date": rec.date,
        "topic": rec.topic,
        "definition": rec.definition,
        "baseline": dict(sorted(base.items())),
        "candidate": dict(sorted(cand.items())),
        "candidate_id": {"parts": candidate_parts(cand["name"]), "warnings": check_candidate_id(cand["name"])},
        "hypothesis": _hypothesis_text(deciding, cand),
        "environment": _env_line(deciding.record),
        "runs": run_entries,
        "deciding_run": deciding.run_id,
        "verdict": decisive.verdict,
        "comparison": _comparison_digest(decisive),
        "arms": {"baseline": decisive.baseline.to_json(), "candidate": decisive.candidate.to_json()},
        "noise_floor": {"tau": floor.tau, "source": floor.source, "min_gain": floor.min_gain,
                        "aa_sessions": floor.aa_sessions, "aa_p99_abs_log_g": floor.aa_p99_abs_log_g,
                        "aa_sigma": floor.aa_sigma, "aa_promotions": floor.aa_promotions,
                        "pair_noise": asdict(decisive.noise) if decisive.noise else None},
        "settings": asdict(settings),
        "band_source": band_source,
        "bands": [b.to_json() for b in per_band],
        "representatives": reps,
        "shape_matrix": matrix,
        "findings": findings,
        "decision": {"decision": rec.decision, "reason": rec.reason, "verdict": rec.verdict or decisive.verdict,
                     "recommendation": decisive.recommendation()},
        "artifacts": list(rec.artifacts),
        "notes": list(rec.notes),
        "warnings": list(rec.warnings),
        "summary": rec.summary,
    }


def _hypothesis_text(run: RunData, ref: dict[str, Any]) -> str | None:
    """The candidate's own statement of its hypothesis: the module docstring of its entry file
    (Python), or its leading comment block (C++/CUDA), from the run's snapshot."""
    import ast

    snapshot = next((s.get("snapshot") for s in run.record.get("solutions") or []
                     if s.get("role") == "candidate" and s.get("name") == ref["name"]), None)
    entry = (ref.get("entry_point") or "").split("::", 1)[0]
    if not snapshot or not entry:
        return None
    path = run.folder / snapshot / "sources" / entry
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    doc: str | None = None
    if path.suffix == ".py":
        try:
            doc = ast.get_docstring(ast.parse(text))
        except (SyntaxError, ValueError):
            doc = None
    else:
        lines = []
        for line in text.splitlines():
            stripped = line.strip()
            if stripped.startswith("//"):
                lines.append(stripped[2:].strip())
            elif stripped.startswith(("/*", "*")):
                lines.append(stripped.strip("/* ").strip())
            elif stripped or lines:
                break
        doc = "\n".join(lines).strip() or None
    if not doc:
        return None
    paragraphs = [" ".join(p.split()) for p in doc.split("\n\n") if p.strip()]
    return "\n\n".join(paragraphs[:4])[:2000]


def _comparison_digest(c: stats.Comparison) -> dict[str, Any]:
    wins, ties, losses = c.wins
    iv = c.interval
    return {"verdict": c.verdict, "interval_verdict": c.interval_verdict, "geomean_ratio": c.geomean_ratio,
            "ci_low": iv.low if iv else None, "ci_high": iv.high if iv else None,
            "interval_method": iv.method if iv else None, "confidence": c.confidence, "tau": c.tau.tau,
            "tau_source": c.tau.source, "workloads": c.workloads, "wins": wins, "ties": ties, "losses": losses,
            "tie_band": c.tie_band, "blocked_by": c.blocked_by, "dispatch_bands": c.dispatch_bands,
            "complete": c.complete, "failures": c.failures,
            "baseline": _arm_digest(c.baseline), "candidate": _arm_digest(c.candidate),
            "recommendation": c.recommendation()}


def _arm_digest(a: stats.ArmSummary) -> dict[str, Any]:
    return {"name": a.name, "mean_latency_ms": a.mean_latency_ms, "p95_latency_ms": a.p95_latency_ms,
            "median_latency_ms": a.median_latency_ms, "best_repeat_mean_ms": a.best_repeat_mean_ms,
            "run_to_run_cv": a.run_to_run_cv, "repeats": a.repeats, "workloads": a.workloads, "passed": a.passed,
            "rows": a.rows, "mean_reference_latency_ms": a.mean_reference_latency_ms, "mean_speedup": a.mean_speedup}


def _band_word(b: stats.BandResult, tie: float) -> str:
    if b.regression:
        return "regression beyond the guard"
    if b.ci_high < 1.0 and b.geomean_ratio < 1.0 - tie:
        return "improvement"
    if b.ci_low > 1.0 and b.geomean_ratio > 1.0 + tie:
        return "slower"
    return "flat"


def _findings(rec: RoundRecord, run_entries: list[dict[str, Any]], c: stats.Comparison, bands: list[stats.BandResult],
              comparisons: dict[str, stats.Comparison], runs: list[RunData], total: int | None) -> list[str]:
    out: list[str] = []
    b, k = c.baseline, c.candidate
    if c.geomean_ratio is not None and c.interval is not None:
        out.append(f"Geometric-mean latency ratio {c.geomean_ratio:.4f} ({_ratio_pct(c.geomean_ratio)}), "
                   f"{c.confidence:.0%} interval [{c.interval.low:.4f}, {c.interval.high:.4f}]; PROMOTE needs it below "
                   f"{math.exp(-c.tau.tau):.4f} (tau {c.tau.tau * 100:.2f}%): {c.verdict}.")
    if b.mean_latency_ms and k.mean_latency_ms:
        p95_change = (k.p95_latency_ms / b.p95_latency_ms - 1) * 100 if b.p95_latency_ms and k.p95_latency_ms else None
        out.append(f"Mean latency {_us(b.mean_latency_ms)} -> {_us(k.mean_latency_ms)} us "
                   f"({_signed_pct((k.mean_latency_ms / b.mean_latency_ms - 1) * 100)}); p95 {_us(b.p95_latency_ms)} -> "
                   f"{_us(k.p95_latency_ms)} us ({_signed_pct(p95_change)}).")
    wins, ties, losses = c.wins
    out.append(f"Paired per workload: {wins} wins, {ties} ties, {losses} losses (tie band +-{c.tie_band * 100:.1f}%).")
    improved = [x for x in bands if _band_word(x, c.tie_band) == "improvement"]
    flat = [x for x in bands if _band_word(x, c.tie_band) == "flat"]
    if improved:
        best = min(improved, key=lambda x: x.geomean_ratio)
        out.append(f"The gain is in {', '.join(x.band for x in improved)}; largest in {best.band} "
                   f"({_signed_pct(best.change_pct)}, {best.wins}/{best.workloads} wins).")
    if flat:
        out.append(f"Flat (interval includes no change, or within the tie band): {', '.join(x.band for x in flat)}.")
    if c.guard:
        out.append("Regression guard fired: " + "; ".join(c.blocked_by) + ".")
    else:
        out.append(f"No workload or band is slower beyond +{c.guard_margin:.0%} with confidence (regression guard, Holm).")
    if c.dispatch_bands:
        out.append("Archive as a dispatch candidate for band " + ", ".join(c.dispatch_bands) + ".")
    for run, entry in zip(runs, run_entries, strict=True):
        if entry["kind"] == "gate":
            g = comparisons[run.run_id]
            if g.geomean_ratio is not None:
                iv = f", interval [{g.interval.low:.4f}, {g.interval.high:.4f}]" if g.interval else ""
                out.append(f"Representative gate ({g.workloads} workloads): ratio {g.geomean_ratio:.4f}{iv} -> {g.verdict}"
                           + (f"; the gate's bands {', '.join(g.dispatch_bands)} already won with confidence" if g.dispatch_bands else "")
                           + ".")
    if b.run_to_run_cv is not None and k.run_to_run_cv is not None:
        out.append(f"Run-to-run variation of the mean across {b.repeats} repeats: baseline {b.run_to_run_cv * 100:.2f}%, "
                   f"candidate {k.run_to_run_cv * 100:.2f}%.")
    if c.noise is not None:
        out.append(f"Noise of one paired ratio: {c.noise.sigma * 100:.2f}% ({c.noise.source}).")
    if c.failures:
        out.append(f"Incomplete: {len(c.failures)} failure(s): " + "; ".join(c.failures[:5]) + ("; ..." if len(c.failures) > 5 else "") + ".")
    else:
        rows = b.rows + k.rows
        out.append(f"Every counted job PASSED ({rows}/{rows} in the deciding run).")
    return out


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------


def _md_arm_row(label: str, run_label: str, a: dict[str, Any], passed_total: str) -> str:
    cv = "-" if a["run_to_run_cv"] is None else f"{a['run_to_run_cv'] * 100:.2f}%"
    ref = "-" if a["mean_reference_latency_ms"] is None else f"{a['mean_reference_latency_ms']:.4f}"
    spd = "-" if a["mean_speedup"] is None else f"{a['mean_speedup']:.1f}x"
    return (f"| {label} | {run_label} | **{_us(a['mean_latency_ms'])}** | **{_us(a['p95_latency_ms'])}** | "
            f"{_us(a['median_latency_ms'])} | {_us(a['best_repeat_mean_ms'])} | {cv} | {ref} | {spd} | {passed_total} |")


def round_summary_markdown(report: dict[str, Any]) -> str:
    """The Markdown round summary of :func:`build_round_report`'s data."""
    r = report
    comp = r["comparison"]
    base, cand = r["baseline"], r["candidate"]
    lines: list[str] = []
    add = lines.append
    add(f"# Round {r['date']}: `{cand['name']}` vs `{base['name']}`")
    add("")
    add(f"- Date: {r['date']} (from the run records)")
    add(f"- Definition: `{r['definition']}`")
    add(f"- Baseline: `{base['name']}` (source hash `{base.get('source_hash') or '?'}`, entry point `{base.get('entry_point') or '?'}`)")
    parts = r["candidate_id"]["parts"]
    hyp = f"; hypothesis id: version {parts['version']}, band {parts['band']}, change {parts['change']}" if parts else ""
    add(f"- Candidate: `{cand['name']}` (source hash `{cand.get('source_hash') or '?'}`{hyp})")
    add(f"- Machine: {r['environment']}")
    for run in r["runs"]:
        kind = {"gate": "representative gate", "sweep": "full sweep"}.get(run["kind"], "selection")
        add(f"- Run `{run['run_id']}`: {kind}, {run['workloads']} workloads x {run['repeats']} repeats, "
            f"baseline and candidate paired in one process ({run['backend']}), {run['state']}")
    add(f"- Decision: **{r['decision']['decision']}** (verdict {r['verdict']})")
    add("")
    if r.get("hypothesis"):
        add("## Candidate")
        add("")
        add(f"From the docstring of the candidate's entry file (`{cand.get('entry_point') or '?'}`):")
        add("")
        for para in r["hypothesis"].split("\n\n"):
            add(f"> {para}")
            add(">")
        lines.pop()
        add("")
    add("## Verdict")
    add("")
    iv = "-" if comp["ci_low"] is None else f"[{comp['ci_low']:.4f}, {comp['ci_high']:.4f}]"
    ratio = "-" if comp["geomean_ratio"] is None else f"{comp['geomean_ratio']:.4f} ({_ratio_pct(comp['geomean_ratio'])})"
    add(f"**{comp['verdict']}** on the {'full sweep' if any(x['kind'] == 'sweep' and x['run_id'] == r['deciding_run'] for x in r['runs']) else 'deciding run'} "
        f"`{r['deciding_run']}`: geometric-mean latency ratio G = {ratio}, {comp['confidence']:.0%} interval {iv} "
        f"by {comp['interval_method'] or 'no interval (too few workloads)'}. Noise floor tau = {r['noise_floor']['tau'] * 100:.2f}% "
        f"(source: {r['noise_floor']['source']}): PROMOTE needs the whole interval below {math.exp(-r['noise_floor']['tau']):.4f}.")
    add("")
    add(f"- {comp['recommendation'][0].upper() + comp['recommendation'][1:]}.")
    if comp["blocked_by"]:
        add("- Blocked by: " + "; ".join(comp["blocked_by"]))
    add(f"- Threshold: the baseline's mean across repeats, {_us(comp['baseline']['mean_latency_ms'])} us "
        f"(its best single repeat, {_us(comp['baseline']['best_repeat_mean_ms'])} us, is context only).")
    add("")
    add("## Results")
    add("")
    add("Latency is the decision metric (mean and p95 over workloads, averaged across repeats); speedup against the "
        "reference is context only.")
    add("")
    add("| Solution | Run | Mean (us) | P95 (us) | Median (us) | Best single repeat mean (us) | Run-to-run CV | Mean ref (ms) | Mean speedup | Passed |")
    add("|----------|-----|----------:|---------:|------------:|-----------------------------:|--------------:|--------------:|-------------:|-------:|")
    for run in r["runs"]:
        c = run["comparison"]
        label = f"{run['kind']} `{run['run_id']}`"
        for role in ("candidate", "baseline"):
            a = c[role]
            add(_md_arm_row(f"{role} `{a['name']}`", label, a, f"{a['passed']}/{a['rows']}"))
    add("")
    add("Paired deltas (candidate vs baseline, same run):")
    add("")
    for run in r["runs"]:
        c = run["comparison"]
        if c["geomean_ratio"] is None:
            continue
        b, k = c["baseline"], c["candidate"]
        mean_d = (k["mean_latency_ms"] / b["mean_latency_ms"] - 1) * 100 if b["mean_latency_ms"] and k["mean_latency_ms"] else None
        p95_d = (k["p95_latency_ms"] / b["p95_latency_ms"] - 1) * 100 if b["p95_latency_ms"] and k["p95_latency_ms"] else None
        iv_text = "" if c["ci_low"] is None else f", interval [{c['ci_low']:.4f}, {c['ci_high']:.4f}]"
        add(f"- {run['kind']} `{run['run_id']}`: **{_signed_pct(mean_d)} mean latency**, {_signed_pct(p95_d)} p95 latency; "
            f"geomean ratio {c['geomean_ratio']:.4f}{iv_text}; {c['wins']} wins, {c['ties']} ties, {c['losses']} losses "
            f"-> {c['verdict']}")
    add("")
    add("## Noise floor")
    add("")
    nf = r["noise_floor"]
    add(f"- tau = {nf['tau'] * 100:.2f}% in log latency: {nf['source']}; smallest gain worth having {nf['min_gain'] * 100:.2f}%.")
    if nf["aa_sessions"]:
        sigma = "-" if nf["aa_sigma"] is None else f"{nf['aa_sigma'] * 100:.2f}%"
        add(f"- A/A history: {nf['aa_sessions']} session(s), p99 |log G| {nf['aa_p99_abs_log_g'] * 100:.3f}%, noise of one "
            f"paired ratio {sigma}; {nf['aa_promotions']} of them would have been promoted.")
    else:
        add("- A/A history: none (record one with `fibtui compare --aa RUN_A RUN_B` on two runs of the same code).")
    if nf["pair_noise"]:
        add(f"- Noise of one paired ratio in the deciding run: {nf['pair_noise']['sigma'] * 100:.2f}% ({nf['pair_noise']['source']}).")
    add("")
    add("## Bands")
    add("")
    add(f"Bands from {r['band_source']}; per band: mean latency over its workloads before and after, change of those means, "
        f"geometric-mean ratio with its {comp['confidence']:.0%} interval, wins/ties/losses (tie band +-{comp['tie_band'] * 100:.1f}%).")
    add("")
    add("| Band | Workloads | Baseline mean (us) | Candidate mean (us) | Change | Geomean ratio | Interval | Wins/Ties/Losses |")
    add("|------|----------:|-------------------:|--------------------:|-------:|--------------:|---------:|-----------------:|")
    for b in r["bands"]:
        add(f"| `{b['band']}` | {b['workloads']} | {_us(b['base_mean_ms'])} | {_us(b['cand_mean_ms'])} | "
            f"{_signed_pct(b['change_pct'])} | {b['geomean_ratio']:.4f} | [{b['ci_low']:.4f}, {b['ci_high']:.4f}] | "
            f"{b['wins']}/{b['ties']}/{b['losses']} |")
    add("")
    tie = comp["tie_band"]
    for b in r["bands"]:
        br = stats.BandResult(**b)
        word = _band_word(br, tie)
        add(f"- `{b['band']}`: {word} ({_signed_pct(b['change_pct'])}, `{_us(b['base_mean_ms'])} -> {_us(b['cand_mean_ms'])} us`), "
            f"with `{b['wins']}/{b['workloads']}` wins" + (" - dispatch candidate" if b["dispatch_candidate"] else ""))
    add("")
    add("## Representative workloads")
    add("")
    add("| UUID | Band | Baseline (us) | Candidate (us) | Ratio | Why |")
    add("|------|------|--------------:|---------------:|------:|-----|")
    for rep in r["representatives"]:
        ratio_text = "-" if rep["ratio"] is None else f"{rep['ratio']:.4f}"
        add(f"| `{rep['uuid']}` | `{rep['band']}` | {_us(rep['base_ms'])} | {_us(rep['cand_ms'])} | {ratio_text} | {rep['reason']} |")
    add("")
    add("## Shape matrix")
    add("")
    add("| Band | Workload | Dominant kernel | Bottleneck | Limiter |")
    add("|------|----------|-----------------|------------|---------|")
    for m in r["shape_matrix"]:
        add(f"| `{m['band']}` | `{m['uuid'] or '-'}` | {('`' + m['dominant_kernel'] + '`') if m['dominant_kernel'] else '-'} | "
            f"{m['bottleneck'] or 'not profiled'} | {m['limiter'] or 'not profiled'} |")
    add("")
    add("Kernel names come from the timing records; bottleneck and limiter need an NCU report of the band "
        "(`fibtui ncu profile`).")
    add("")
    add("## Findings")
    add("")
    for f in r["findings"]:
        add(f"- {f}")
    add("")
    add("## Decision")
    add("")
    d = r["decision"]
    add(f"**{d['decision'].capitalize()}** `{cand['name']}` (verdict {d['verdict']}).")
    add("")
    if d["reason"]:
        add(f"Reason: {d['reason']}")
        add("")
    for note in r["notes"]:
        add(f"- {note}")
    for w in r["warnings"]:
        add(f"- Warning: {w}")
    if r["artifacts"]:
        if r["notes"] or r["warnings"]:
            add("")
        add("Archived (paths under `optimize_ops/`):")
        add("")
        for a in r["artifacts"]:
            add(f"- `{a}`")
    add("")
    add("Generated by fibtui from the run records and the round record; regenerate with `fibtui round summary`.")
    return "\n".join(lines) + "\n"


def render_round(archive_root: Path, rec: RoundRecord, definition_obj: Any = None, workloads: Any = None) -> tuple[str, dict[str, Any]]:
    report = build_round_report(archive_root, rec, definition_obj, workloads)
    return round_summary_markdown(report), report


def write_round_summary(archive_root: Path, rec: RoundRecord, definition_obj: Any = None, workloads: Any = None) -> list[Path]:
    """(Re)generate ``docs/round_<date>_<topic>.md`` and its ``.json`` twin from the records."""
    md, report = render_round(archive_root, rec, definition_obj, workloads)
    md_path = archive_root / rec.summary
    json_path = md_path.with_suffix(".json")
    atomic_write_text(md_path, md)
    atomic_write_text(json_path, json.dumps(report, indent=1, sort_keys=False) + "\n")
    return [md_path, json_path]


# --------------------------------------------------------------------------------------------
# Decisions
# --------------------------------------------------------------------------------------------


@dataclass
class DecisionResult:
    record: RoundRecord
    comparison: stats.Comparison | None
    written: list[Path]
    warnings: list[str]
    commit: str | None = None
    restored: RestoreResult | None = None

    def to_json(self, root: Path | None = None) -> dict[str, Any]:
        return {"round": self.record.round, "decision": self.record.decision, "verdict": self.record.verdict,
                "summary": self.record.summary,
                "written": [(_rel(root, p) if root else str(p)) for p in self.written],
                "warnings": list(self.warnings), "commit": self.commit,
                "restored": asdict(self.restored) if self.restored else None,
                "comparison": self.comparison.to_json() if self.comparison else None}


@dataclass
class RoundInputs:
    """What a decision works from: the round's runs, its baseline and candidate, the verdict."""

    archive_root: Path
    runs: list[RunData]
    baseline: dict[str, Any]
    candidate: dict[str, Any]
    deciding: RunData
    deciding_kind: str
    comparison: stats.Comparison
    floor: stats.NoiseFloor
    settings: stats.StatsSettings
    date: str
    total_workloads: int | None


def _ref_of(run: RunData, role: str, name: str | None = None) -> dict[str, Any]:
    sols = [s for s in run.solutions(role) if name is None or s.get("name") == name]
    s = sols[0]
    return {k: s.get(k, "") for k in ("name", "source_hash", "language", "entry_point", "snapshot")}


def gather_round(archive_root: Path, *, run_ids: list[str] | None = None, candidate: str | None = None,
                 settings: stats.StatsSettings | None = None, definition_obj: Any = None, workloads: Any = None,
                 candidate_hash: str | None = None) -> RoundInputs:
    runs = round_runs(archive_root, run_ids, candidate, candidate_hash)
    total = len(workloads) if workloads is not None else None
    first = runs[-1]
    base = _ref_of(first, "baseline")
    cand = _ref_of(first, "candidate", candidate or _pair_key(first, None, candidate_hash)[2])  # type: ignore[index]
    sweeps = [r for r in runs if run_kind(r, total) == "sweep"]
    deciding = sweeps[-1] if sweeps else runs[-1]
    settings = settings or stats.StatsSettings()
    # the A/A sessions of the deciding run's own key: (definition, device, timing kind)
    kind = str(deciding.record.get("timing_kind") or "")
    definition = deciding.record.get("definition")
    definition = definition if isinstance(definition, str) else None
    sessions = stats.aa_sessions(archive_root, deciding.gpu, exclude_runs=[r.run_id for r in runs],
                                 definition=definition, timing_kind=kind or None)
    floor = stats.noise_floor(settings, sessions,
                              stats.aa_key_label(definition, stats.TimingKey(kind or "unknown", deciding.gpu)))
    band_of, _, _ = _band_map(definition_obj, workloads, deciding.rows("baseline", base["name"]))
    comp = _compare_run(deciding, base, cand, band_of, settings, floor, total)
    started = sorted(str(r.record.get("started") or "") for r in runs)
    date = (started[0][:10] if started and started[0] else "") or "undated"
    return RoundInputs(archive_root, runs, base, cand, deciding, run_kind(deciding, total), comp, floor, settings, date, total)


def _new_record(inputs: RoundInputs, decision: str, topic: str | None, reason: str) -> RoundRecord:
    topic = safe_name(topic or inputs.candidate["name"], "round")
    name = f"{inputs.date}_{topic}"
    run_list = [{"run_id": r.run_id, "kind": run_kind(r, inputs.total_workloads)} for r in inputs.runs]
    existing = {r.round: r for r in load_rounds(inputs.archive_root)}
    summary = ""
    if name in existing and [x["run_id"] for x in existing[name].runs] == [x["run_id"] for x in run_list]:
        summary = existing[name].summary  # the same round decided again: same summary file
    else:
        n = 1
        base = name
        while name in existing:
            n += 1
            name = f"{base}_run{n}"
        path = reserve_unique_path(inputs.archive_root / "docs" / f"round_{name}.md")
        summary = _rel(inputs.archive_root, path)
        name = path.name[len("round_"):-len(".md")]
    return RoundRecord(round=name, date=inputs.date, topic=topic, definition=str(inputs.deciding.record.get("definition", "")),
                       baseline={k: v for k, v in inputs.baseline.items() if k != "snapshot"},
                       candidate={k: v for k, v in inputs.candidate.items() if k != "snapshot"},
                       runs=run_list, decision=decision, reason=reason, summary=summary,
                       noise_floor=freeze_floor(inputs.floor),
                       settings={k: v for k, v in asdict(inputs.settings).items()},
                       verdict=inputs.comparison.verdict)


def _finish(inputs: RoundInputs, rec: RoundRecord, written: list[Path], warnings: list[str], definition_obj: Any,
            workloads: Any) -> list[Path]:
    inside = [p for p in written if p.resolve().is_relative_to(inputs.archive_root.resolve())]
    rec.artifacts = sorted({*rec.artifacts, *(_rel(inputs.archive_root.resolve(), p.resolve()) for p in inside)})
    rec.warnings = list(dict.fromkeys([*rec.warnings, *warnings]))
    append_round(inputs.archive_root, rec)
    return write_round_summary(inputs.archive_root, rec, definition_obj, workloads)


def _folders_first(archive_root: Path, *subdirs: str) -> None:
    """Make the folders a decision writes into after it has archived the candidate, before it
    archives anything: a folder that cannot be made (a file in its place, no permission, a
    read-only disk) then fails the decision with one line and nothing archived."""
    for sub in subdirs:
        make_dirs(archive_root / sub)


def _archive_candidate(inputs: RoundInputs, *, isolated: bool = False, decision: str) -> tuple[Path, list[str]]:
    warnings = check_candidate_id(inputs.candidate["name"])
    snapshot = inputs.deciding.folder / inputs.candidate["snapshot"]
    meta = {"source_hash": inputs.candidate.get("source_hash"), "language": inputs.candidate.get("language"),
            "entry_point": inputs.candidate.get("entry_point"), "from_run": inputs.deciding.run_id,
            "snapshot": inputs.candidate["snapshot"], "decision": decision,
            "verdict": inputs.comparison.verdict, "geomean_ratio": inputs.comparison.geomean_ratio}
    return archive_snapshot(inputs.archive_root, snapshot, inputs.candidate["name"], isolated=isolated, meta=meta), warnings


def promote(inputs: RoundInputs, *, workspace_root: Path | None = None, source_dir: Path | None = None,
            config_path: Path | None = None, topic: str | None = None, force: bool = False, new_name: str | None = None,
            operator: str | None = None, model: str | None = None, commit: bool = True, definition_obj: Any = None,
            workloads: Any = None, notes: list[str] | None = None) -> DecisionResult:
    """Promote the round's candidate: archive its snapshot, write the best snapshot, install it as
    the checked-in kernel, rename the solution in config.toml, record the round, regenerate the
    summary, commit. Refused (CheckFailed) unless the verdict is PROMOTE on a full sweep."""
    comp = inputs.comparison
    if not force:
        if inputs.deciding_kind != "sweep":
            raise CheckFailed(f"promotion needs the full set of workloads: the newest run of this pair, {inputs.deciding.run_id}, "
                              f"is a {inputs.deciding_kind} (run fibtui run --workloads all --repeats 3 with the same "
                              "baseline and candidate, or pass --force)")
        if comp.verdict != stats.PROMOTE:
            raise CheckFailed(f"verdict is {comp.verdict}, not PROMOTE: {comp.recommendation()} (pass --force to promote anyway)")
    written: list[Path] = []
    language = inputs.candidate.get("language") or "triton"
    _folders_first(inputs.archive_root, "docs", f"best_solution_{safe_name(language, 'language')}")
    snap, warnings = _archive_candidate(inputs, decision="promoted")
    written.append(snap)
    latency_ms = comp.candidate.mean_latency_ms
    entry_file = (inputs.candidate.get("entry_point") or "kernel.py::").split("::", 1)[0] or "kernel.py"
    if latency_ms is not None:
        written += write_best(inputs.archive_root, inputs.deciding.folder / inputs.candidate["snapshot"], language=language,
                              entry_file=entry_file, operator=operator or inputs.deciding.record.get("definition", "operator"),
                              model=model or inputs.candidate["name"], latency_us=latency_ms * 1000.0,
                              meta={"candidate": inputs.candidate["name"], "source_hash": inputs.candidate.get("source_hash"),
                                    "from_run": inputs.deciding.run_id, "mean_latency_ms": latency_ms,
                                    "p95_latency_ms": comp.candidate.p95_latency_ms})
    rec = _new_record(inputs, "promoted", topic, reason=_verdict_reason(comp))
    rec.notes = list(notes or [])
    changed_ws: list[Path] = []
    if source_dir is not None and workspace_root is not None and source_dir.is_dir():
        cand_sources = inputs.deciding.folder / inputs.candidate["snapshot"] / "sources"
        if _differs_from_head(workspace_root, source_dir) and not _same_files(source_dir, cand_sources):
            kept = archive_sources(inputs.archive_root, source_dir, f"{safe_name(inputs.candidate['name'])}_replaced_workspace",
                                   isolated=True, meta={"what": "the workspace's kernel with uncommitted edits, replaced by promote"})
            written.append(kept)
            rec.notes.append("the workspace's kernel had uncommitted edits; they were archived before the promoted kernel replaced them")
    if source_dir is not None:
        _mirror_sources(inputs.deciding.folder / inputs.candidate["snapshot"] / "sources", source_dir)
        changed_ws.append(source_dir)
        rec.notes.append(f"installed as the checked-in kernel ({source_dir.name}/ under solution/)")
    if config_path is not None:
        name = new_name or f"{rec.definition}_{inputs.candidate['name']}"
        set_config_value(config_path, "solution.name", name)
        changed_ws.append(config_path)
        rec.notes.append(f"config.toml [solution] name = {name!r}")
    paths = _finish(inputs, rec, written, warnings, definition_obj, workloads)
    written += paths
    sha = None
    if commit and workspace_root is not None:
        sha = commit_paths(workspace_root, [*changed_ws, inputs.archive_root],
                           f"fibtui promote {inputs.candidate['name']} ({rec.reason})")
    return DecisionResult(rec, comp, written + changed_ws, rec.warnings, sha)


def _verdict_reason(comp: stats.Comparison) -> str:
    if comp.geomean_ratio is None:
        return f"verdict {comp.verdict}"
    iv = f", interval [{comp.interval.low:.4f}, {comp.interval.high:.4f}]" if comp.interval else ""
    forced = "" if comp.verdict == stats.PROMOTE else " (promoted with --force)"
    return f"{comp.verdict}: geomean latency ratio {comp.geomean_ratio:.4f}{iv}, noise floor {comp.tau.tau * 100:.2f}%{forced}"


def archive_only(inputs: RoundInputs, *, topic: str | None = None, reason: str | None = None, definition_obj: Any = None,
                 workloads: Any = None, notes: list[str] | None = None) -> DecisionResult:
    """Keep the candidate (a local win, a dispatch candidate) without promoting it."""
    comp = inputs.comparison
    _folders_first(inputs.archive_root, "docs")
    snap, warnings = _archive_candidate(inputs, decision="archived")
    default_reason = comp.recommendation()
    rec = _new_record(inputs, "archived", topic, reason or default_reason)
    rec.notes = list(notes or [])
    written = [snap] + _finish(inputs, rec, [snap], warnings, definition_obj, workloads)
    return DecisionResult(rec, comp, written, rec.warnings)


def reject(inputs: RoundInputs | None, *, workspace_root: Path, source_dir: Path, archive_root: Path, language: str,
           candidate_name: str | None = None, topic: str | None = None, reason: str | None = None,
           definition_obj: Any = None, workloads: Any = None) -> DecisionResult:
    """Reject: archive the rejected candidate (its run snapshot, and the workspace's edited kernel
    when it differs from the last commit), then restore the checked-in kernel (module docstring)."""
    written: list[Path] = []
    warnings: list[str] = []
    name = candidate_name or (inputs.candidate["name"] if inputs else None) or "rejected"
    if inputs is not None:
        _folders_first(archive_root, "docs")
        snap, warnings = _archive_candidate(inputs, decision="rejected")
        written.append(snap)
    if source_dir.is_dir() and _differs_from_head(workspace_root, source_dir):
        written.append(archive_sources(archive_root, source_dir, f"{safe_name(name)}_workspace", isolated=True,
                                       meta={"decision": "rejected", "what": "the workspace's kernel as it was before the restore"}))
    restored = restore_kernel(workspace_root, source_dir, archive_root=archive_root, language=language)
    rec = None
    if inputs is not None:
        rec = _new_record(inputs, "rejected", topic, reason or inputs.comparison.recommendation())
        rec.notes = [f"checked-in kernel restored from {restored.source}"]
        written += _finish(inputs, rec, written, warnings, definition_obj, workloads)
    else:
        rec = RoundRecord(round="", date="", topic=topic or "", definition="", baseline={}, candidate={"name": name},
                          runs=[], decision="rejected", reason=reason or "", notes=[f"restored from {restored.source}"])
    return DecisionResult(rec, inputs.comparison if inputs else None, written, warnings, None, restored)


def _same_files(a: Path, b: Path) -> bool:
    def files(folder: Path) -> dict[str, bytes]:
        return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts}

    return a.is_dir() and b.is_dir() and files(a) == files(b)


def decided_round(archive_root: Path, run_ids: list[str]) -> RoundRecord | None:
    """The recorded round over exactly these runs, if there is one."""
    want = sorted(run_ids)
    found = [r for r in load_rounds(archive_root) if sorted(x["run_id"] for x in r.runs) == want]
    return found[-1] if found else None


def differs_from_head(workspace_root: Path, folder: Path) -> bool:
    """Does ``folder`` differ from the last commit (or is it outside any commit)?"""
    return _differs_from_head(workspace_root, folder)


def _differs_from_head(workspace_root: Path, folder: Path) -> bool:
    repo = _open_repo(workspace_root)
    if repo is None or not repo.head.is_valid():
        return True
    work = Path(repo.working_tree_dir or workspace_root).resolve()
    rel = folder.resolve().relative_to(work).as_posix()
    status = repo.git.status("--porcelain", "--untracked-files=all", "--", rel)
    return bool(status.strip())


def summary_for_runs(archive_root: Path, run_ids: list[str] | None, candidate: str | None = None,
                     settings: stats.StatsSettings | None = None, definition_obj: Any = None,
                     workloads: Any = None) -> tuple[str, dict[str, Any]]:
    """A summary of runs that have no decision yet (printed; nothing written)."""
    inputs = gather_round(archive_root, run_ids=run_ids, candidate=candidate, settings=settings,
                          definition_obj=definition_obj, workloads=workloads)
    topic = safe_name(inputs.candidate["name"], "round")
    rec = RoundRecord(round=f"{inputs.date}_{topic}", date=inputs.date, topic=topic,
                      definition=str(inputs.deciding.record.get("definition", "")),
                      baseline={k: v for k, v in inputs.baseline.items() if k != "snapshot"},
                      candidate={k: v for k, v in inputs.candidate.items() if k != "snapshot"},
                      runs=[{"run_id": r.run_id, "kind": run_kind(r, inputs.total_workloads)} for r in inputs.runs],
                      decision="undecided", summary=f"docs/round_{inputs.date}_{topic}.md",
                      noise_floor=freeze_floor(inputs.floor), settings=asdict(inputs.settings),
                      verdict=inputs.comparison.verdict)
    return render_round(archive_root, rec, definition_obj, workloads)
