"""fibtui.core.archive: names, never-overwrite archiving, round records and summaries, promote,
reject (restoring the kernel with git), archive, and their CLI verbs."""

from __future__ import annotations

import json
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
from tests.conftest import DEMO, DEMO_DEFINITION, run_cli

REPO = Path(__file__).resolve().parent.parent
RUNS = REPO / "optimize_ops" / "runs"
GATE_RUN = "20261129-103529_demo_local"
SWEEP_RUN = "20261129-103545_demo_local"
BUNDLED_SUMMARY = REPO / "optimize_ops" / "docs" / "round_2026-11-29_v2_smallb_splitv.md"


def _need_round() -> None:
    if not (RUNS / SWEEP_RUN / "journal.jsonl").is_file():
        pytest.skip("the archived demo round is not in this checkout")


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
        archive.archive_run(ws / "optimize_ops", RUNS / run)
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
    assert archive.best_artifact_name("gdn_decode", "qwen3", 8.022, "kernel.cu") == "gdn_decode_qwen3_lat8p022us.kernel.cu"
    with pytest.raises(InputError):
        archive.latency_tag(float("nan"))


def test_candidate_ids_are_checked_not_refused() -> None:
    assert archive.check_candidate_id("v2_smallb_splitv") == []
    assert archive.check_candidate_id("v25a_long_gemm2_ns2") == []
    assert archive.candidate_parts("v25a_long_gemm2_ns2") == {"version": "v25a", "band": "long", "change": "gemm2_ns2"}
    assert archive.candidate_major("v25a_long_gemm2_ns2") == 25
    warn = archive.check_candidate_id("faster")
    assert len(warn) == 1 and "<version>_<band>_<change>" in warn[0]
    assert archive.candidate_folder(Path("/a"), "v2_smallb_splitv") == Path("/a/v2/v2_smallb_splitv")
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
@given(st.lists(st.sampled_from(["a.json", "a.json", "b.ncu-rep", "a", "a_run2.json", "x.tar.gz", "run"]), min_size=1, max_size=12))
def test_archiving_never_overwrites(names: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "optimize_ops"
        src = Path(tmp) / "src"
        src.mkdir()
        archived = []
        for i, name in enumerate(names):
            f = src / name
            f.write_text(f"content {i}")
            archived.append((archive.archive_file(root, f), f"content {i}"))
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
    first = archive.archive_run(root, src)
    second = archive.archive_run(root, src)
    assert first.name == GATE_RUN and second.name == f"{GATE_RUN}_run2"
    assert not (first / "work").exists()
    assert (first / "journal.jsonl").is_file() and (first / "run.json").is_file()
    assert (first / "snapshots" / "candidate-v2_smallb_splitv" / "sources" / "kernel.py").is_file()
    assert sorted(p.name for p in first.glob("worker*.log"))
    with pytest.raises(InputError, match="journal"):
        archive.archive_run(root, tmp_path)


def test_best_snapshot_is_named_latency_first(tmp_path: Path) -> None:
    _need_round()
    snap = RUNS / SWEEP_RUN / "snapshots" / "candidate-v2_smallb_splitv"
    root = tmp_path / "optimize_ops"
    written = archive.write_best(root, snap, language="triton", entry_file="kernel.py", operator="gdn_decode",
                                 model="demo", latency_us=8.022)
    assert written[0].name == "gdn_decode_demo_lat8p022us.kernel.py"
    assert (written[1] / "sources" / "kernel.py").read_text() == (snap / "sources" / "kernel.py").read_text()
    again = archive.write_best(root, snap, language="triton", entry_file="kernel.py", operator="gdn_decode",
                               model="demo", latency_us=8.022)
    assert again[0].name == "gdn_decode_demo_lat8p022us_run2.kernel.py"
    best = archive.read_best(root, "triton")
    assert best["current"] == again[0].name and best["history"][0]["current"] == written[0].name


# --------------------------------------------------------------------------------------------
# config.toml
# --------------------------------------------------------------------------------------------


def test_config_comments_survive(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text("# my solution, do not lose this comment\n[solution]\nname = \"old\"  # the name\n"
                   "definition = \"d\"\n\n# build notes\n[build]\nlanguage = \"triton\"\n")
    archive.set_config_value(cfg, "solution.name", "d_v2_smallb_splitv")
    text = cfg.read_text()
    assert "# my solution, do not lose this comment" in text and "# build notes" in text
    assert 'name = "d_v2_smallb_splitv"' in text
    assert text.count("[solution]") == 1
    cfg.write_text("[solution\n")
    with pytest.raises(InputError):
        archive.set_config_value(cfg, "solution.name", "x")


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
    inputs = archive.gather_round(root, definition_obj=d, workloads=workloads)
    assert [r.run_id for r in inputs.runs] == [GATE_RUN, SWEEP_RUN]
    assert inputs.deciding.run_id == SWEEP_RUN and inputs.deciding_kind == "sweep"
    result = archive.archive_only(inputs, reason="kept for the test", definition_obj=d, workloads=workloads)
    md_path = root / result.record.summary
    first = md_path.read_bytes()
    json_first = md_path.with_suffix(".json").read_bytes()
    rec = archive.find_round(root)
    assert rec.round == "2026-11-29_v2_smallb_splitv" and rec.decision == "archived"
    archive.write_round_summary(root, rec, d, workloads)
    assert md_path.read_bytes() == first
    assert md_path.with_suffix(".json").read_bytes() == json_first
    text = first.decode()
    for section in ("## Verdict", "## Results", "## Noise floor", "## Bands", "## Representative workloads",
                    "## Shape matrix", "## Findings", "## Decision"):
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
    code, out, _ = run_cli(capsys, "round", "summary", "--runs", GATE_RUN, SWEEP_RUN, "--workspace", str(ws))
    assert code == 0 and "**undecided**" in out and "PROMOTE" in out
    assert not (ws / "optimize_ops" / "docs").exists()
    code, _, err = run_cli(capsys, "round", "summary", "--workspace", str(ws))
    assert code == 2 and "no round recorded" in err


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.text(max_size=50), st.just('{"round": "r", "date": "d", "definition": "x", "decision": "maybe"}'),
                          st.just('{"round": "r", "date": "d", "definition": "x", "decision": "archived", "runs": 3}'),
                          st.just('{"round": 1}'), st.just("[]")), max_size=4))
def test_round_records_parser_never_crashes(tmp_path: Path, lines: list[str]) -> None:
    path = tmp_path / archive.ROUNDS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(x.replace("\n", " ").replace("\r", " ") for x in lines), encoding="utf-8")
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
    snap = ws / "optimize_ops" / "runs" / SWEEP_RUN / "snapshots" / "candidate-v2_smallb_splitv" / "sources" / "kernel.py"
    assert (ws / "solution" / "triton" / "kernel.py").read_text() == snap.read_text()
    config = (ws / "config.toml").read_text()
    assert config.startswith("# fibtui's bundled demo")
    assert f'name = "{DEMO_DEFINITION}_v2_smallb_splitv"' in config
    best = list((ws / "optimize_ops" / "best_solution_triton").glob("*_lat6p836us.kernel.py"))  # the final H200 round
    assert len(best) == 1
    assert "optimize_ops/v2/v2_smallb_splitv" in data["written"]
    kept = ws / "optimize_ops" / "kernels" / "v2_smallb_splitv_replaced_workspace" / "sources" / "kernel.py"
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
    code, out, _ = run_cli(capsys, "reject", GATE_RUN, SWEEP_RUN, "--reason", "test", "--json", "--workspace", str(ws))
    data = json.loads(out)
    assert code == 0 and data["decision"] == "rejected"
    assert kernel.read_text() == original
    assert not (ws / "solution" / "triton" / "helper.py").exists()
    assert data["restored"]["source"].startswith("git HEAD ")
    saved = ws / "optimize_ops" / "kernels" / "v2_smallb_splitv_workspace" / "sources"
    assert "candidate edit" in (saved / "kernel.py").read_text() and (saved / "helper.py").read_text() == "X = 1\n"
    assert (ws / "optimize_ops" / "v2" / "v2_smallb_splitv" / "sources" / "kernel.py").is_file()
    rec = archive.find_round(ws / "optimize_ops")
    assert rec.decision == "rejected" and "restored from git HEAD" in rec.notes[0]


def test_reject_of_an_unmeasured_edit_leaves_the_recorded_rounds_alone(capsys, tmp_path: Path) -> None:
    ws = _workspace_with_round(tmp_path)
    root = ws / "optimize_ops"
    archive.archive_only(archive.gather_round(root), reason="kept")
    before = (root / archive.ROUNDS_FILE).read_text()
    code, _, err = run_cli(capsys, "reject", "--workspace", str(ws))
    assert code == 2 and "already decided" in err  # nothing edited, the newest round is decided
    kernel = ws / "solution" / "triton" / "kernel.py"
    original = kernel.read_text()
    kernel.write_text("an edit no run measured\n")
    code, out, _ = run_cli(capsys, "reject", "--workspace", str(ws))
    assert code == 0 and kernel.read_text() == original
    assert (root / archive.ROUNDS_FILE).read_text() == before
    assert (root / "kernels" / "rejected_workspace" / "sources" / "kernel.py").read_text() == "an edit no run measured\n"
    # the workspace holding the candidate's exact sources: its reject joins that round
    snap = root / "runs" / SWEEP_RUN / "snapshots" / "candidate-v2_smallb_splitv" / "sources" / "kernel.py"
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
    archive.write_best(root, snap, language="triton", entry_file="kernel.py", operator="op", model="m", latency_us=8.473)
    kernel = ws / "solution" / "triton" / "kernel.py"
    kernel.write_text("broken candidate\n")
    result = archive.reject(None, workspace_root=ws, source_dir=ws / "solution" / "triton", archive_root=root,
                            language="triton")
    assert result.restored.source.startswith("best snapshot ")
    assert kernel.read_text() == (snap / "sources" / "kernel.py").read_text()
    assert (root / "kernels" / "rejected_workspace" / "sources" / "kernel.py").read_text() == "broken candidate\n"


def test_archive_verb_keeps_a_candidate_and_files(capsys, tmp_path: Path) -> None:
    ws = _workspace_with_round(tmp_path, git_init=False)
    report = tmp_path / "b64.ncu-rep"
    report.write_bytes(b"\x00binary")
    code, out, _ = run_cli(capsys, "archive", "--ncu", str(report), "--workspace", str(ws))
    assert code == 0 and "benchmarks/ncu/b64.ncu-rep" in out
    assert not (ws / "optimize_ops" / archive.ROUNDS_FILE).exists()  # files only: no decision
    code, out, _ = run_cli(capsys, "archive", GATE_RUN, "--reason", "local win at small batch", "--workspace", str(ws))
    assert code == 0 and "v2/v2_smallb_splitv" in out
    rec = archive.find_round(ws / "optimize_ops")
    assert rec.decision == "archived" and rec.reason == "local win at small batch" and rec.verdict == "INCONCLUSIVE"
    assert [r["run_id"] for r in rec.runs] == [GATE_RUN]


def test_aa_sessions_include_same_code_paired_runs(tmp_path: Path) -> None:
    _need_round()
    root = tmp_path / "optimize_ops"
    dest = archive.archive_run(root, RUNS / GATE_RUN)
    record = json.loads((dest / "run.json").read_text())
    for s in record["solutions"]:
        s["source_hash"] = "same"
    (dest / "run.json").write_text(json.dumps(record))
    sessions = stats.aa_sessions(root)
    assert len(sessions) == 1 and sessions[0].kind == "paired-run" and sessions[0].source == GATE_RUN
    assert abs(sessions[0].log_g) > 0.05  # (the arms really differ; the hashes say they do not)


@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=-10, max_value=10**9),
                 st.booleans(), st.text(max_size=5), st.none()))
def test_latency_tag_accepts_or_refuses_cleanly(value) -> None:
    try:
        tag = archive.latency_tag(value)
    except InputError as exc:
        assert "latency" in str(exc)
    else:
        whole, _, rest = tag[3:].partition("p")
        assert tag.startswith("lat") and tag.endswith("us") and whole.isdigit() and rest[:-2].isdigit() and len(rest) == 5
