"""The CLI as a newcomer meets it (issue 38, the CLI paragraph): text from files is never read as
markup, an option's error names that option, paths are never wrapped, the common options go
after every verb, a mistyped verb is answered with the nearest one, a refused promotion is JSON
under --json, compare and run agree on exit codes, the demo leaves fibtui's own benchmarks out,
and ``tag --next`` proposes the promoted best."""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
from pathlib import Path

import pytest

from tests.conftest import DEMO, REPO, run_cli
from tests.test_cli_width import lines_of

TEXT_PAGE = REPO / "tests" / "fixtures" / "ncu" / "gdn_b64_details.txt"


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI lays out for an 80x24 terminal (as tests/test_cli_width.py's fixture)."""
    monkeypatch.setenv("FIBTUI_FORCE_TERMINAL", "1")
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("LINES", "24")


@pytest.fixture
def piped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FIBTUI_FORCE_TERMINAL", raising=False)
    monkeypatch.setenv("COLUMNS", "80")


# -- markup -----------------------------------------------------------------------------------


def test_status_prints_a_problem_with_brackets_as_it_is(capsys, tmp_path: Path, piped) -> None:
    """A folder with a config.toml but no [solution] table: the problem says "[solution]"."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "config.toml").write_text("[other]\nx = 1\n")
    code, out, err = run_cli(capsys, "status", "--workspace", str(ws))
    assert code in (0, 2), err
    text = out + err
    assert "[solution]" in text, text
    assert "a  table" not in text


def test_status_never_reads_a_solution_name_as_markup(capsys, tmp_path: Path, piped) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(DEMO, ws, ignore=shutil.ignore_patterns("__pycache__"))
    cfg = ws / "config.toml"
    cfg.write_text(
        cfg.read_text().replace(
            'name = "demo_gdn_decode_triton_v1"', 'name = "v1[bold]x[/bold]"', 1
        )
    )
    assert "[bold]" in cfg.read_text()
    code, out, err = run_cli(capsys, "status", "--workspace", str(ws))
    assert code == 0, err
    assert "v1[bold]x[/bold]" in out


# -- option names in errors ---------------------------------------------------------------------


def test_a_bad_baseline_is_reported_as_baseline(capsys, demo_ws: Path) -> None:
    code, out, err = run_cli(
        capsys, "run", "--workspace", str(demo_ws), "--baseline", "no_such_dir", "--workloads", "1"
    )
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "field '--baseline'" in err and "--solution" not in err


def test_a_bad_solution_is_still_reported_as_solution(capsys, demo_ws: Path) -> None:
    code, _, err = run_cli(
        capsys, "run", "--workspace", str(demo_ws), "--solution", "no_such_dir", "--workloads", "1"
    )
    assert code == 2 and "field '--solution'" in err


# -- paths are never wrapped ---------------------------------------------------------------------


def _long_copy(tmp_path: Path) -> Path:
    deep = tmp_path / ("a_rather_long_folder_name_for_reports_" * 2) / "ncu_reports_of_round_7"
    deep.mkdir(parents=True)
    target = deep / "gdn_b64_details_with_a_long_name.txt"
    shutil.copy(TEXT_PAGE, target)
    assert len(str(target)) > 80
    return target


def test_ncu_import_prints_a_long_report_path_whole_at_80_columns(
    capsys, tmp_path: Path, terminal
) -> None:
    report = _long_copy(tmp_path)
    code, out, err = run_cli(capsys, "ncu", "import", str(report))
    assert code == 0, err
    assert any(str(report) in line for line in lines_of(out)), out[:600]


def test_ncu_diff_prints_both_paths_whole_at_80_columns(capsys, tmp_path: Path, terminal) -> None:
    report = _long_copy(tmp_path)
    code, out, err = run_cli(capsys, "ncu", "diff", str(report), str(report))
    assert code == 0, err
    lines = lines_of(out)
    assert any(line.startswith("baseline") and str(report) in line for line in lines)
    assert any(line.startswith("candidate") and str(report) in line for line in lines)


# -- the common options after every verb ------------------------------------------------------------


def _leaves(parser: argparse.ArgumentParser, path: list[str]):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for s in subs:
        for name, sp in s.choices.items():
            yield from _leaves(sp, [*path, name])


def test_every_verb_takes_workspace_dataset_and_wide_after_it() -> None:
    from fibtui.cli import build_parser

    leaves = list(_leaves(build_parser(), []))
    assert len(leaves) > 20
    for path, parser in leaves:
        options = {o for a in parser._actions for o in a.option_strings}
        missing = {"--workspace", "--dataset", "--wide"} - options
        assert not missing, (" ".join(path), missing)


def test_ncu_import_takes_wide_after_the_verb(capsys, piped) -> None:
    code, out, err = run_cli(capsys, "ncu", "import", str(TEXT_PAGE), "--wide")
    assert code == 0, err
    code, _, err = run_cli(capsys, "demo", "--wide", "--help")
    assert code == 0, err


# -- did you mean --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "nearest"),
    [(["stauts"], "status"), (["promte"], "promote"), (["workers", "stpo"], "stop")],
)
def test_a_mistyped_verb_is_answered_with_the_nearest(capsys, argv, nearest) -> None:
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"did you mean '{nearest}'?" in err


def test_a_word_near_no_verb_gets_no_guess(capsys) -> None:
    code, _, err = run_cli(capsys, "zzzzqqq")
    assert code == 2 and "did you mean" not in err and "invalid choice" in err


# -- promote --json ------------------------------------------------------------------------------


def test_a_refused_promotion_is_a_json_object_under_json(capsys, tmp_path: Path) -> None:
    from tests.test_archive import GATE_RUN, _workspace_with_round

    ws = _workspace_with_round(tmp_path, git_init=False)
    code, out, err = run_cli(capsys, "promote", GATE_RUN, "--workspace", str(ws), "--json")
    assert code == 1
    data = json.loads(out)
    assert data["refused"] is True and data["decision"] is None and data["exit_code"] == 1
    assert "full set" in data["error"] and "full set" in err
    # without --json: the one line on stderr, nothing on stdout (as before)
    code, out, err = run_cli(capsys, "promote", GATE_RUN, "--workspace", str(ws))
    assert code == 1 and out == "" and "full set" in err


# -- compare and run agree -----------------------------------------------------------------------


def _paired_record(tmp_path: Path, status_of) -> Path:
    rng = random.Random(3)
    jobs = []
    for w in range(6):
        for role, factor in (("baseline", 1.0), ("candidate", 0.9)):
            for r in range(2):
                status = status_of(w, role)
                jobs.append(
                    {
                        "uuid": f"w{w}",
                        "axes": {"batch_size": 2**w},
                        "solution": role[:4],
                        "role": role,
                        "repeat": r,
                        "status": status,
                        "latency_ms": (
                            0.001 * (w + 1) * factor * math.exp(rng.gauss(0, 0.002))
                            if status == "PASSED"
                            else None
                        ),
                    }
                )
    path = tmp_path / f"run{len(list(tmp_path.glob('run*.json')))}.json"
    path.write_text(
        json.dumps(
            {
                "format": "fibtui-run",
                "definition": "d",
                "run_id": path.stem,
                "jobs": jobs,
                "workload_selection": "all",
            }
        )
    )
    return path


def test_compare_exits_as_run_does_for_the_same_rows(capsys, tmp_path: Path) -> None:
    def wrong(w: int, role: str) -> str:
        return "INCORRECT_NUMERICAL" if (w, role) == (2, "candidate") else "PASSED"

    def unsupported(w: int, role: str) -> str:
        return "UNSUPPORTED_HERE" if w == 5 else "PASSED"

    cases = [(lambda w, role: "PASSED", 0), (wrong, 1), (unsupported, 3)]
    for status_of, expected in cases:
        path = _paired_record(tmp_path, status_of)
        code, out, err = run_cli(capsys, "compare", str(path))
        assert code == expected, (expected, out[-400:], err)
        code, out, _ = run_cli(capsys, "compare", str(path), "--json")
        assert code == expected
        verdict = json.loads(out)["verdict"]
        if expected == 1:  # every job ran, one is wrong: INCORRECT (INCOMPLETE: jobs missing)
            assert verdict == "INCORRECT"
        if expected == 3:
            assert verdict == "NOT_JUDGED"


# -- the demo ------------------------------------------------------------------------------------


def test_the_demo_leaves_the_development_benchmarks_out(tmp_path: Path) -> None:
    from fibtui.core.demo import DEMO_BENCHMARKS, create_demo_workspace

    ws = create_demo_workspace(tmp_path / "ws", git_init=False)
    bench = ws / "optimize_ops" / "benchmarks"
    assert {p.name for p in bench.iterdir()} == set(DEMO_BENCHMARKS)
    assert (bench / "aa.jsonl").is_file() and any((bench / "ncu").iterdir())
    assert (ws / "optimize_ops" / "runs").is_dir()  # the demo's own history stays
    size = sum(p.stat().st_size for p in ws.rglob("*") if p.is_file())
    assert size < 6 * 2**20, size  # was 14 MB of benchmarks alone


# -- tag --next proposes the promoted best ----------------------------------------------------------


def _git(ws: Path, *args: str) -> str:
    import subprocess

    return subprocess.run(
        ["git", "-C", str(ws), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_tag_next_refuses_a_checked_in_kernel_that_is_not_the_promoted_best(
    capsys, tmp_path: Path
) -> None:
    from fibtui.core.demo import create_demo_workspace

    ws = create_demo_workspace(tmp_path / "ws", git_init=False)
    _git(ws, "init", "-q", "-b", "main")
    _git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    _git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "demo")
    code, out, _ = run_cli(capsys, "tag", "--next", "--no-remote-check", "--workspace", str(ws))
    assert code == 1 and "safe to tag" not in out
    assert "the promoted best is v2_smallb_splitv" in out
    code, out, _ = run_cli(
        capsys, "tag", "--next", "--no-remote-check", "--json", "--workspace", str(ws)
    )
    data = json.loads(out)
    assert code == 1 and not data["ok"]
    assert any("promoted best" in p for p in data["problems"])
    code, _, err = run_cli(capsys, "tag", "--create", "--no-remote-check", "--workspace", str(ws))
    assert code == 1 and "promoted best" in err and _git(ws, "tag", "--list") == ""

    # the best installed and committed: now it is what a tag proposes
    best = next((ws / "optimize_ops" / "best_solution_triton").glob("*/sources"))
    for f in best.iterdir():
        shutil.copy(f, ws / "solution" / "triton" / f.name)
    _git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "install the best")
    code, out, _ = run_cli(capsys, "tag", "--next", "--no-remote-check", "--workspace", str(ws))
    assert "promoted best" not in out
    assert code == 0 and "safe to tag" in out, out


# -- nanobind's leak lines at the end of a test run -------------------------------------------------


def test_nanobind_leak_lines_are_not_printed_at_exit_of_a_test_process(tmp_path: Path) -> None:
    """A Triton object alive at exit (held by a daemon thread, as the suite leaves some) makes
    nanobind list it on stderr; a process that loaded tests/conftest.py prints none of that."""
    import subprocess
    import sys

    pytest.importorskip(
        "triton", reason="the leak lines come from Triton's bindings: without Triton there are none"
    )
    leak = (
        "import threading, time\n"
        "from triton._C.libtriton import ir\n"
        "c = ir.context(); b = ir.builder(c)\n"
        "threading.Thread(target=lambda keep=[c, b]: time.sleep(60), daemon=True).start()\n"
        "time.sleep(0.05)\n"
    )
    quiet = subprocess.run(
        [sys.executable, "-c", "import tests.conftest\n" + leak],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert "nanobind" not in quiet.stderr, quiet.stderr[-2000:]
