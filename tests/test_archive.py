"""fibtui.core.archive and fibtui.services.archive: names, never-overwrite archiving, round records and summaries, promote,
reject (restoring the kernel with git), archive, and their CLI verbs."""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from pathlib import Path

import git
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fibtui.core import archive, stats
from fibtui.core.dataset import Dataset
from fibtui.core.errors import InputError
from fibtui.services import archive as archive_ops
from tests.conftest import DEMO, DEMO_DEFINITION, run_cli

REPO = Path(__file__).resolve().parent.parent
RUNS = REPO / "optimize_ops" / "runs"
GATE_RUN = "20261129-103529_demo_local"
SWEEP_RUN = "20261129-103545_demo_local"
BUNDLED_SUMMARY = REPO / "optimize_ops" / "docs" / "round_2026-11-29_v2_smallb_splitv.md"


def _need_round() -> None:
    assert (RUNS / SWEEP_RUN / "journal.jsonl").is_file(), (
        "the archived demo round (optimize_ops/runs/) is committed with the repository and is missing"
    )


def _git_repo(folder: Path) -> git.Repo:
    repo = git.Repo.init(folder)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "test")
        cw.set_value("user", "email", "test@example.invalid")
    repo.git.add(A=True)
    repo.index.commit("initial")
    return repo


def _workspace_with_round(tmp_path: Path, *, git_init: bool = True) -> Path:
    """A demo workspace (no bundled history) holding only the two runs of the measured round."""
    _need_round()
    ws = tmp_path / "ws"
    shutil.copytree(DEMO, ws, ignore=shutil.ignore_patterns("__pycache__"))
    for run in (GATE_RUN, SWEEP_RUN):
        archive_ops.archive_run(ws / "optimize_ops", RUNS / run)
    if git_init:
        _git_repo(ws)
    return ws


# --------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------


def test_latency_first_names() -> None:
    assert archive.latency_tag(8.022) == "lat8p022us"
    assert archive.latency_tag(12.3456) == "lat12p346us"
    assert archive.latency_tag(0.5) == "lat0p500us"
    assert (
        archive.best_artifact_name("gdn_decode", "qwen3", 8.022, "kernel.cu")
        == "gdn_decode_qwen3_lat8p022us.kernel.cu"
    )
    with pytest.raises(InputError):
        archive.latency_tag(float("nan"))


def test_candidate_ids_are_checked_not_refused() -> None:
    assert archive.check_candidate_id("v2_smallb_splitv") == []
    assert archive.check_candidate_id("v25a_long_gemm2_ns2") == []
    assert archive.candidate_parts("v25a_long_gemm2_ns2") == {
        "version": "v25a",
        "band": "long",
        "change": "gemm2_ns2",
    }
    assert archive.candidate_major("v25a_long_gemm2_ns2") == 25
    warn = archive.check_candidate_id("faster")
    assert len(warn) == 1 and "<version>_<band>_<change>" in warn[0]
    assert archive.candidate_folder(Path("/a"), "v2_smallb_splitv") == Path(
        "/a/v2/v2_smallb_splitv"
    )
    assert archive.candidate_folder(Path("/a"), "faster") == Path("/a/kernels/faster")


@given(st.text(max_size=60))
def test_candidate_id_check_never_raises(name: str) -> None:
    out = archive.check_candidate_id(name)
    assert isinstance(out, list) and len(out) <= 1
    archive.candidate_folder(Path("/archive"), name)


# --------------------------------------------------------------------------------------------
# Never overwrite
# --------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(["a.json", "a.json", "b.ncu-rep", "a", "a_run2.json", "x.tar.gz", "run"]),
        min_size=1,
        max_size=12,
    )
)
def test_archiving_never_overwrites(names: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "optimize_ops"
        src = Path(tmp) / "src"
        src.mkdir()
        archived = []
        for i, name in enumerate(names):
            f = src / name
            f.write_text(f"content {i}")
            archived.append((archive_ops.archive_file(root, f), f"content {i}"))
            f.unlink()
        paths = [p for p, _ in archived]
        assert len(set(paths)) == len(paths)
        for path, content in archived:
            assert path.read_text() == content  # nothing written later replaced it


def test_archive_run_drops_work_and_never_overwrites(tmp_path: Path) -> None:
    _need_round()
    src = tmp_path / "run"
    shutil.copytree(RUNS / GATE_RUN, src)
    (src / "work" / "slot-0").mkdir(parents=True)
    (src / "work" / "slot-0" / "x").write_text("scratch")
    root = tmp_path / "optimize_ops"
    first = archive_ops.archive_run(root, src)
    second = archive_ops.archive_run(root, src)
    assert first.name == GATE_RUN and second.name == f"{GATE_RUN}_run2"
    assert not (first / "work").exists()
    assert (first / "journal.jsonl").is_file() and (first / "run.json").is_file()
    assert (first / "snapshots" / "candidate-v2_smallb_splitv" / "sources" / "kernel.py").is_file()
    assert sorted(p.name for p in first.glob("worker*.log"))
    with pytest.raises(InputError, match="journal"):
        archive_ops.archive_run(root, tmp_path)


def test_best_snapshot_is_named_latency_first(tmp_path: Path) -> None:
    _need_round()
    snap = RUNS / SWEEP_RUN / "snapshots" / "candidate-v2_smallb_splitv"
    root = tmp_path / "optimize_ops"
    written = archive_ops.write_best(
        root,
        snap,
        language="triton",
        entry_file="kernel.py",
        operator="gdn_decode",
        model="demo",
        latency_us=8.022,
    )
    assert written[0].name == "gdn_decode_demo_lat8p022us.kernel.py"
    assert (written[1] / "sources" / "kernel.py").read_text() == (
        snap / "sources" / "kernel.py"
    ).read_text()
    again = archive_ops.write_best(
        root,
        snap,
        language="triton",
        entry_file="kernel.py",
        operator="gdn_decode",
        model="demo",
        latency_us=8.022,
    )
    assert again[0].name == "gdn_decode_demo_lat8p022us_run2.kernel.py"
    best = archive_ops.read_best(root, "triton")
    assert best["current"] == again[0].name and best["history"][0]["current"] == written[0].name


# --------------------------------------------------------------------------------------------
# config.toml
# --------------------------------------------------------------------------------------------


def test_config_comments_survive(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        '# my solution, do not lose this comment\n[solution]\nname = "old"  # the name\n'
        'definition = "d"\n\n# build notes\n[build]\nlanguage = "triton"\n'
    )
    archive_ops.set_config_value(cfg, "solution.name", "d_v2_smallb_splitv")
    text = cfg.read_text()
    assert "# my solution, do not lose this comment" in text and "# build notes" in text
    assert 'name = "d_v2_smallb_splitv"' in text
    assert text.count("[solution]") == 1
    cfg.write_text("[solution\n")
    with pytest.raises(InputError):
        archive_ops.set_config_value(cfg, "solution.name", "x")


# --------------------------------------------------------------------------------------------
# Round records and summaries
# --------------------------------------------------------------------------------------------


def _demo_dataset():
    ds = Dataset(DEMO / "dataset")
    return ds.definition(DEMO_DEFINITION), ds.workloads(DEMO_DEFINITION)


def test_round_summary_regenerates_identically(tmp_path: Path) -> None:
    ws = _workspace_with_round(tmp_path, git_init=False)
    root = ws / "optimize_ops"
    d, workloads = _demo_dataset()
    inputs = archive_ops.gather_round(root, definition_obj=d, workloads=workloads)
    assert [r.run_id for r in inputs.runs] == [GATE_RUN, SWEEP_RUN]
    assert inputs.deciding.run_id == SWEEP_RUN and inputs.deciding_kind == "sweep"
    result = archive_ops.archive_only(
        inputs, reason="kept for the test", definition_obj=d, workloads=workloads
    )
    md_path = root / result.record.summary
    first = md_path.read_bytes()
    json_first = md_path.with_suffix(".json").read_bytes()
    rec = archive.find_round(root)
    assert rec.round == "2026-11-29_v2_smallb_splitv" and rec.decision == "archived"
    archive.write_round_summary(root, rec, d, workloads)
    assert md_path.read_bytes() == first
    assert md_path.with_suffix(".json").read_bytes() == json_first
    text = first.decode()
    for section in (
        "## Verdict",
        "## Results",
        "## Noise floor",
        "## Bands",
        "## Representative workloads",
        "## Shape matrix",
        "## Findings",
        "## Decision",
    ):
        assert section in text
    assert "| `batch_size=1` |" in text and "Best single repeat mean" in text
    assert "a8efeb8a-8b7b-5ea6-9f13-0d763ae059b8" in text  # a representative uuid of the gate
    assert (root / "v2" / "v2_smallb_splitv" / "sources" / "kernel.py").is_file()
    assert result.record.artifacts == ["v2/v2_smallb_splitv"]


def test_bundled_round_summary_regenerates_in_a_demo_workspace(capsys, tmp_path: Path) -> None:
    from fibtui.core.demo import create_demo_workspace

    if not BUNDLED_SUMMARY.is_file():
        pytest.skip("no bundled round summary in this checkout")
    ws = create_demo_workspace(tmp_path / "demo", git_init=False)
    code, out, _ = run_cli(capsys, "round", "summary", "--workspace", str(ws))
    assert code == 0 and out == BUNDLED_SUMMARY.read_text()
    code, out, _ = run_cli(capsys, "round", "summary", "--json", "--workspace", str(ws))
    assert out == BUNDLED_SUMMARY.with_suffix(".json").read_text()
    code, out, _ = run_cli(capsys, "round", "list", "--json", "--workspace", str(ws))
    assert json.loads(out)[0]["decision"] == "promoted"


def test_round_summary_of_undecided_runs(capsys, tmp_path: Path) -> None:
    ws = _workspace_with_round(tmp_path, git_init=False)
    code, out, _ = run_cli(
        capsys, "round", "summary", "--runs", GATE_RUN, SWEEP_RUN, "--workspace", str(ws)
    )
    assert code == 0 and "**undecided**" in out and "PROMOTE" in out
    assert not (ws / "optimize_ops" / "docs").exists()
    code, _, err = run_cli(capsys, "round", "summary", "--workspace", str(ws))
    assert code == 2 and "no round recorded" in err


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=50),
            st.just('{"round": "r", "date": "d", "definition": "x", "decision": "maybe"}'),
            st.just(
                '{"round": "r", "date": "d", "definition": "x", "decision": "archived", "runs": 3}'
            ),
            st.just('{"round": 1}'),
            st.just("[]"),
        ),
        max_size=4,
    )
)
def test_round_records_parser_never_crashes(tmp_path: Path, lines: list[str]) -> None:
    path = tmp_path / archive.ROUNDS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "\n".join(x.replace("\n", " ").replace("\r", " ") for x in lines), encoding="utf-8"
    )
    try:
        rounds = archive.load_rounds(tmp_path)
    except InputError as exc:
        assert "rounds.jsonl" in str(exc)
    else:
        assert all(isinstance(r, archive.RoundRecord) for r in rounds)


# --------------------------------------------------------------------------------------------
# promote / reject / archive through the CLI
# --------------------------------------------------------------------------------------------


def test_promote_installs_archives_renames_and_commits(capsys, tmp_path: Path) -> None:
    ws = _workspace_with_round(tmp_path)
    (ws / "solution" / "triton" / "kernel.py").write_text("# an uncommitted experiment\n")
    code, out, err = run_cli(capsys, "promote", GATE_RUN, "--workspace", str(ws))
    assert code == 1 and "full set" in err  # a gate alone cannot promote
    code, out, _ = run_cli(capsys, "promote", "--workspace", str(ws), "--json")
    data = json.loads(out)
    assert code == 0 and data["decision"] == "promoted" and data["verdict"] == "PROMOTE"
    snap = (
        ws
        / "optimize_ops"
        / "runs"
        / SWEEP_RUN
        / "snapshots"
        / "candidate-v2_smallb_splitv"
        / "sources"
        / "kernel.py"
    )
    assert (ws / "solution" / "triton" / "kernel.py").read_text() == snap.read_text()
    config = (ws / "config.toml").read_text()
    assert config.startswith("# fibtui's bundled demo")
    assert f'name = "{DEMO_DEFINITION}_v2_smallb_splitv"' in config
    best = list(
        (ws / "optimize_ops" / "best_solution_triton").glob("*_lat6p836us.kernel.py")
    )  # the final H200 round
    assert len(best) == 1
    assert "optimize_ops/v2/v2_smallb_splitv" in data["written"]
    kept = (
        ws
        / "optimize_ops"
        / "kernels"
        / "v2_smallb_splitv_replaced_workspace"
        / "sources"
        / "kernel.py"
    )
    assert kept.read_text() == "# an uncommitted experiment\n"  # archived before it was replaced
    assert "optimize_ops/docs/round_2026-11-29_v2_smallb_splitv.md" in data["written"]
    repo = git.Repo(ws)
    assert data["commit"] == repo.head.commit.hexsha and not repo.is_dirty(untracked_files=True)
    assert "fibtui promote v2_smallb_splitv" in repo.head.commit.message
    # deciding the same round again never overwrites the archived snapshot
    code, out, _ = run_cli(capsys, "promote", "--workspace", str(ws), "--no-commit")
    assert code == 0 and "v2/v2_smallb_splitv_run2" in out


def test_reject_archives_then_restores_from_the_last_commit(capsys, tmp_path: Path) -> None:
    ws = _workspace_with_round(tmp_path)
    kernel = ws / "solution" / "triton" / "kernel.py"
    original = kernel.read_text()
    kernel.write_text(original + "\n# candidate edit: BV = 64\n")
    (ws / "solution" / "triton" / "helper.py").write_text("X = 1\n")
    code, out, _ = run_cli(
        capsys, "reject", GATE_RUN, SWEEP_RUN, "--reason", "test", "--json", "--workspace", str(ws)
    )
    data = json.loads(out)
    assert code == 0 and data["decision"] == "rejected"
    assert kernel.read_text() == original
    assert not (ws / "solution" / "triton" / "helper.py").exists()
    assert data["restored"]["source"].startswith("git HEAD ")
    saved = ws / "optimize_ops" / "kernels" / "v2_smallb_splitv_workspace" / "sources"
    assert (
        "candidate edit" in (saved / "kernel.py").read_text()
        and (saved / "helper.py").read_text() == "X = 1\n"
    )
    assert (ws / "optimize_ops" / "v2" / "v2_smallb_splitv" / "sources" / "kernel.py").is_file()
    rec = archive.find_round(ws / "optimize_ops")
    assert rec.decision == "rejected" and "restored from git HEAD" in rec.notes[0]


def test_reject_of_an_unmeasured_edit_leaves_the_recorded_rounds_alone(
    capsys, tmp_path: Path
) -> None:
    ws = _workspace_with_round(tmp_path)
    root = ws / "optimize_ops"
    archive_ops.archive_only(archive_ops.gather_round(root), reason="kept")
    before = (root / archive.ROUNDS_FILE).read_text()
    code, _, err = run_cli(capsys, "reject", "--workspace", str(ws))
    assert code == 2 and "already decided" in err  # nothing edited, the newest round is decided
    kernel = ws / "solution" / "triton" / "kernel.py"
    original = kernel.read_text()
    kernel.write_text("an edit no run measured\n")
    code, out, _ = run_cli(capsys, "reject", "--workspace", str(ws))
    assert code == 0 and kernel.read_text() == original
    assert (root / archive.ROUNDS_FILE).read_text() == before
    assert (
        root / "kernels" / "rejected_workspace" / "sources" / "kernel.py"
    ).read_text() == "an edit no run measured\n"
    # the workspace holding the candidate's exact sources: its reject joins that round
    snap = (
        root
        / "runs"
        / SWEEP_RUN
        / "snapshots"
        / "candidate-v2_smallb_splitv"
        / "sources"
        / "kernel.py"
    )
    kernel.write_text(snap.read_text())
    code, out, _ = run_cli(capsys, "reject", "--workspace", str(ws))
    assert code == 0 and kernel.read_text() == original
    assert archive.find_round(root).decision == "rejected"


def test_reject_restores_from_the_best_snapshot_without_git(tmp_path: Path) -> None:
    _need_round()
    ws = tmp_path / "ws"
    shutil.copytree(DEMO, ws, ignore=shutil.ignore_patterns("__pycache__"))
    root = ws / "optimize_ops"
    snap = RUNS / SWEEP_RUN / "snapshots" / "baseline-triton"
    archive_ops.write_best(
        root,
        snap,
        language="triton",
        entry_file="kernel.py",
        operator="op",
        model="m",
        latency_us=8.473,
    )
    kernel = ws / "solution" / "triton" / "kernel.py"
    kernel.write_text("broken candidate\n")
    result = archive_ops.reject(
        None,
        workspace_root=ws,
        source_dir=ws / "solution" / "triton",
        archive_root=root,
        language="triton",
    )
    assert result.restored.source.startswith("best snapshot ")
    assert kernel.read_text() == (snap / "sources" / "kernel.py").read_text()
    assert (
        root / "kernels" / "rejected_workspace" / "sources" / "kernel.py"
    ).read_text() == "broken candidate\n"


def test_archive_verb_keeps_a_candidate_and_files(capsys, tmp_path: Path) -> None:
    ws = _workspace_with_round(tmp_path, git_init=False)
    report = tmp_path / "b64.ncu-rep"
    report.write_bytes(b"\x00binary")
    code, out, _ = run_cli(capsys, "archive", "--ncu", str(report), "--workspace", str(ws))
    assert code == 0 and "benchmarks/ncu/b64.ncu-rep" in out
    assert not (ws / "optimize_ops" / archive.ROUNDS_FILE).exists()  # files only: no decision
    code, out, _ = run_cli(
        capsys, "archive", GATE_RUN, "--reason", "local win at small batch", "--workspace", str(ws)
    )
    assert code == 0 and "v2/v2_smallb_splitv" in out
    rec = archive.find_round(ws / "optimize_ops")
    assert (
        rec.decision == "archived"
        and rec.reason == "local win at small batch"
        and rec.verdict == "INCONCLUSIVE"
    )
    assert [r["run_id"] for r in rec.runs] == [GATE_RUN]


def test_aa_sessions_include_same_code_paired_runs(tmp_path: Path) -> None:
    _need_round()
    root = tmp_path / "optimize_ops"
    dest = archive_ops.archive_run(root, RUNS / GATE_RUN)
    record = json.loads((dest / "run.json").read_text())
    for s in record["solutions"]:
        s["source_hash"] = "same"
    (dest / "run.json").write_text(json.dumps(record))
    sessions = stats.aa_sessions(root)
    assert (
        len(sessions) == 1 and sessions[0].kind == "paired-run" and sessions[0].source == GATE_RUN
    )
    assert abs(sessions[0].log_g) > 0.05  # (the arms really differ; the hashes say they do not)


@given(
    st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(min_value=-10, max_value=10**9),
        st.booleans(),
        st.text(max_size=5),
        st.none(),
    )
)
def test_latency_tag_accepts_or_refuses_cleanly(value) -> None:
    try:
        tag = archive.latency_tag(value)
    except InputError as exc:
        assert "latency" in str(exc)
    else:
        whole, _, rest = tag[3:].partition("p")
        assert (
            tag.startswith("lat")
            and tag.endswith("us")
            and whole.isdigit()
            and rest[:-2].isdigit()
            and len(rest) == 5
        )


# --------------------------------------------------------------------------------------------
# Archive writes the file system refuses: one line naming the path, nothing half-written
# --------------------------------------------------------------------------------------------

SUPPORT = Path(__file__).parent / "malformed" / "_support"


def _tree(root: Path) -> dict[str, bytes | None]:
    return {
        p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def _finished_run(folder: Path) -> Path:
    """A small finished run folder (journal + run.json) made through the run API."""
    from fibtui.core import runs

    header = runs.RunHeader(
        run_id="20260101-000000_tiny_interpreter",
        definition="tiny_scale",
        backend="interpreter",
        timing_kind="cpu-interpreter",
        l2_policy="n/a",
        solutions=[runs.SolutionRef("s", "candidate", "snapshots/candidate-s")],
        jobs=[runs.JobSpec("wl-000-n1", {"n": 1}, "s", "candidate", 0)],
        repeats=1,
        workload_selection="all",
        started="2026-01-01T00:00:00+00:00",
    )
    journal = runs.Journal(folder)
    journal.write_header(header)
    journal.append_result(
        runs.JobResult("wl-000-n1", {"n": 1}, "s", "candidate", 0, "PASSED", latency_ms=0.5)
    )
    journal.append_end("finished")
    (folder / "snapshots" / "candidate-s").mkdir(parents=True)
    (folder / "snapshots" / "candidate-s" / "kernel.py").write_text("x = 1\n")
    runs.write_record(folder)
    return folder


def _write_verbs(tmp_path: Path) -> list[tuple[str, list[str], str]]:
    """(name, argv, the path the one line names, relative to the archive root) of every verb that
    writes into optimize_ops/."""
    run_folder = _finished_run(tmp_path / "elsewhere" / "r1")
    return [
        ("run", ["run", "--backend", "interpreter", "--workloads", "all"], "runs"),
        (
            "compare --aa",
            [
                "compare",
                "--aa",
                str(SUPPORT / "base_traces.jsonl"),
                str(SUPPORT / "base_traces.jsonl"),
            ],
            "benchmarks/aa.jsonl",
        ),
        ("archive --file", ["archive", "--file", str(SUPPORT / "base_traces.jsonl")], "benchmarks"),
        ("archive --run-folder", ["archive", "--run-folder", str(run_folder)], "runs"),
    ]


def _one_line(argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    from tests.test_malformed_corpus import run_cli_in_process

    code, _, err = run_cli_in_process(argv, monkeypatch, tmp_path)
    lines = err.splitlines()
    assert code == 1 and len(lines) == 1 and "Traceback" not in err, (code, err)
    return lines[0]


@pytest.mark.parametrize(
    "blocked", ["optimize_ops", "optimize_ops/runs", "optimize_ops/benchmarks"]
)
def test_a_file_where_an_archive_folder_belongs_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, blocked: str
) -> None:
    """ENOTDIR (optimize_ops is a file) and EEXIST (runs/ or benchmarks/ is a file) used to be
    NotADirectoryError / FileExistsError tracebacks from `run`, `compare --aa` and `archive`."""
    from tests.runner_helpers import make_tiny_workspace

    ws = make_tiny_workspace(tmp_path / "ws")
    (ws / blocked).parent.mkdir(parents=True, exist_ok=True)
    (ws / blocked).write_text("not a folder\n")
    before = _tree(ws)
    hit = 0
    for name, argv, target in _write_verbs(tmp_path):
        archive_root = ws / "optimize_ops"
        path = archive_root / target
        if not (blocked == "optimize_ops" or path == ws / blocked or ws / blocked in path.parents):
            continue  # this verb writes elsewhere
        hit += 1
        line = _one_line([*argv, "--workspace", str(ws)], tmp_path, monkeypatch)
        assert line == (
            f"fibtui: error: cannot write {path}: {ws / blocked} is a file, not a folder "
            "(nothing there was changed)"
        ), name
        assert _tree(ws) == before, f"{name} changed the workspace"
    assert hit >= 2


def _refuse_writes_under(
    monkeypatch: pytest.MonkeyPatch, root: Path, err: int, after: int = 0
) -> list[str]:
    """From the ``after``-th write on, every folder or file made under ``root`` fails with ``err``
    (what a read-only mount or missing permission does, also when the tests run as root, whom
    chmod does not stop). Returns the paths refused."""
    real_mkdir, real_open = os.mkdir, os.open
    refused: list[str] = []
    count = [0]

    def under(path) -> bool:
        return str(root) in os.fspath(path) if not isinstance(path, int) else False

    def refuse(path) -> None:
        count[0] += 1
        if count[0] > after:
            refused.append(os.fspath(path))
            raise OSError(err, os.strerror(err), os.fspath(path))

    def mkdir(path, mode=0o777, *, dir_fd=None):
        if under(path):
            refuse(path)
        return real_mkdir(path, mode, dir_fd=dir_fd)

    def open_(path, flags, mode=0o777, *, dir_fd=None):
        if under(path) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            refuse(path)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "mkdir", mkdir)
    monkeypatch.setattr(os, "open", open_)
    return refused


@pytest.mark.parametrize(
    ("err", "text"),
    [(errno.EACCES, "Permission denied"), (errno.EROFS, "Read-only file system")],
    ids=["EACCES", "EROFS"],
)
def test_an_archive_the_file_system_refuses_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, err: int, text: str
) -> None:
    from tests.runner_helpers import make_tiny_workspace

    ws = make_tiny_workspace(tmp_path / "ws")
    (ws / "optimize_ops").mkdir()
    verbs = _write_verbs(tmp_path)
    before = _tree(ws)
    _refuse_writes_under(monkeypatch, ws / "optimize_ops", err)
    for name, argv, target in verbs:
        line = _one_line([*argv, "--workspace", str(ws)], tmp_path, monkeypatch)
        assert line.startswith(
            f"fibtui: error: cannot write {ws / 'optimize_ops' / target}"
        ) and line.endswith(f": {text} (nothing there was changed)"), (name, line)
        assert _tree(ws) == before, f"{name} changed the workspace"


def test_a_copy_refused_half_way_leaves_no_half_made_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run folder's name is claimed, then its third file is refused: the claimed name and the
    temp copy are removed again."""
    from fibtui.core.errors import WriteFailed

    run_folder = _finished_run(tmp_path / "elsewhere" / "r1")
    root = tmp_path / "optimize_ops"
    (root / "runs").mkdir(parents=True)
    refused = _refuse_writes_under(monkeypatch, root, errno.EACCES, after=3)
    with pytest.raises(WriteFailed) as exc:
        archive_ops.archive_run(root, run_folder)
    assert (
        refused and "Permission denied" in exc.value.one_line() and "\n" not in exc.value.one_line()
    )
    assert str(exc.value.path).startswith(str(root / "runs"))
    monkeypatch.undo()
    assert list((root / "runs").iterdir()) == []


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0,
    reason="chmod does not stop root (the simulated EACCES above covers it)",
)
def test_a_real_read_only_archive_folder_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.runner_helpers import make_tiny_workspace

    ws = make_tiny_workspace(tmp_path / "ws")
    (ws / "optimize_ops").mkdir()
    (ws / "optimize_ops").chmod(0o500)
    try:
        line = _one_line(
            ["archive", "--file", str(SUPPORT / "base_traces.jsonl"), "--workspace", str(ws)],
            tmp_path,
            monkeypatch,
        )
        assert line == (
            f"fibtui: error: cannot write {ws / 'optimize_ops' / 'benchmarks'}: Permission denied "
            "(nothing there was changed)"
        )
    finally:
        (ws / "optimize_ops").chmod(0o700)
    assert list((ws / "optimize_ops").iterdir()) == []


def test_reading_best_json_with_a_huge_number_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "best_solution_triton"
    folder.mkdir()
    (folder / "best.json").write_text(
        '{"current": "k.kernel.py", "latency_us": 1' + "0" * 5000 + "}"
    )
    with pytest.raises(InputError) as exc:
        archive_ops.read_best(tmp_path, "triton")
    assert (
        exc.value.one_line()
        == f"{folder / 'best.json'}: not JSON: a number with more than 4300 digits"
    )
    (folder / "best.json").write_bytes(b'\xef\xbb\xbf{"current": "k.kernel.py", "snapshot": "k"}')
    assert (
        archive_ops.read_best(tmp_path, "triton")["snapshot"] == "k"
    )  # a byte-order mark is accepted


# -- a decision refused by the file system archives nothing; a tampered run.json is one line ----


@pytest.mark.parametrize("verb", ["archive", "reject"])
def test_a_decision_whose_docs_folder_cannot_be_made_archives_nothing(
    capsys, tmp_path: Path, verb: str
) -> None:
    """docs/ (the round records and summaries) is a file: the decision fails with one line before
    it archives the candidate, so no entry is left without its round."""
    ws = _workspace_with_round(tmp_path)
    docs = ws / "optimize_ops" / "docs"
    shutil.rmtree(docs, ignore_errors=True)
    docs.write_text("not a folder\n")
    before = _tree(ws / "optimize_ops")
    kernel_before = _tree(ws / "solution")
    code, out, err = run_cli(capsys, verb, GATE_RUN, "--workspace", str(ws))
    assert code == 1 and not out
    assert (
        err
        == f"fibtui: error: cannot write {docs}: {docs} is a file, not a folder (nothing there was changed)\n"
    )
    assert _tree(ws / "optimize_ops") == before and _tree(ws / "solution") == kernel_before


@pytest.mark.parametrize(
    ("latency", "shown"), [("0", "0"), ("NaN", "NaN"), ("-1.0", "-1.0"), ("1e400", "Infinity")]
)
def test_load_run_refuses_a_run_record_with_an_impossible_latency(
    tmp_path: Path, latency: str, shown: str
) -> None:
    root = tmp_path / "optimize_ops"
    folder = _finished_run(root / "runs" / "20260101-000000_tiny_interpreter")
    record = folder / "run.json"
    data = json.loads(record.read_text())
    assert archive.load_run(root, folder.name).record["jobs"][0]["latency_ms"] == 0.5
    data["jobs"][0]["latency_ms"] = "LATENCY"
    record.write_text(json.dumps(data).replace('"LATENCY"', latency))
    with pytest.raises(InputError) as exc:
        archive.load_run(root, folder.name)
    assert (
        str(exc.value)
        == f"{record}: field 'jobs[0].latency_ms': latency_ms must be a finite positive number, got {shown}"
    )


def test_round_summary_names_the_representatives_regimes_names_on_the_same_run(
    capsys, tmp_path: Path
) -> None:
    """The round summary's representatives are the regime analysis of the deciding run's
    candidate latencies: exactly what `fibtui regimes --results <that run> --solution <candidate>`
    names. The gate's own workloads (picked before the sweep) are marked, and one the analysis
    does not pick now is named below the table."""
    from fibtui.core.demo import create_demo_workspace

    ws = create_demo_workspace(tmp_path / "demo", git_init=False)
    code, out, err = run_cli(capsys, "round", "summary", "--json", "--workspace", str(ws))
    assert code == 0, err
    report = json.loads(out)
    run_json = ws / "optimize_ops" / "runs" / report["deciding_run"] / "run.json"
    code, out, err = run_cli(
        capsys,
        "regimes",
        "--results",
        str(run_json),
        "--solution",
        report["candidate"]["name"],
        "--json",
        "--workspace",
        str(ws),
    )
    assert code == 0, err
    picks = [r["uuid"] for r in json.loads(out)["representatives"]]
    assert [r["uuid"] for r in report["representatives"]] == picks and len(picks) >= 2
    assert report["representatives_source"] == "regimes of the deciding run's candidate latencies"
    gate = set(report["gate_workloads"])
    assert gate and all(r["in_gate"] == (r["uuid"] in gate) for r in report["representatives"])
    code, md, _ = run_cli(capsys, "round", "summary", "--workspace", str(ws))
    for u in gate - set(picks):
        assert f"The representative gate also ran `{u}`" in md
