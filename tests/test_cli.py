from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fibtui import __version__
from tests.conftest import DEMO_DEFINITION, run_cli


def test_version(capsys) -> None:
    code, out, _ = run_cli(capsys, "--version")
    assert code == 0 and out.strip() == f"fibtui {__version__}"


def test_status_json_on_the_demo(capsys, demo_ws: Path) -> None:
    code, out, _ = run_cli(capsys, "status", "--json", "--workspace", str(demo_ws))
    data = json.loads(out)
    assert code == 0
    assert {"workspace", "solution", "definitions", "dataset", "topology", "backends"} <= set(data)
    assert data["solution"]["definition"] == DEMO_DEFINITION
    assert data["definitions"][0]["workloads"] == 50
    assert data["topology"] == {"kind": "single", "valid": True, "problems": []}
    assert {"gpu", "ncu", "interpreter", "modal_credentials"} <= set(data["backends"])


def test_status_without_workspace(capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(capsys, "status", "--json")
    assert code == 0 and json.loads(out)["workspace"] is None


def test_check_ok_and_failing(capsys, demo_ws: Path) -> None:
    assert run_cli(capsys, "check", str(demo_ws))[0] == 0
    (demo_ws / "solution" / "triton" / "kernel.py").unlink()
    code, out, _ = run_cli(capsys, "check", str(demo_ws), "--json")
    data = json.loads(out)
    assert code == 1 and not data["valid"] and "is empty" in data["problems"][0]


def test_check_deep_validates_every_workload_line(capsys, demo_ws: Path) -> None:
    wl = demo_ws / "dataset" / "workloads" / "gdn" / f"{DEMO_DEFINITION}.jsonl"
    lines = wl.read_text().splitlines()
    lines[3] = lines[3].replace('"type": "random"', '"type": "zeros"', 1)
    wl.write_text("\n".join(lines) + "\n")
    assert run_cli(capsys, "check", str(demo_ws))[0] == 0
    code, out, _ = run_cli(capsys, "check", str(demo_ws), "--deep", "--json")
    assert code == 1 and ":4: field 'workload.inputs.q.type'" in json.loads(out)["problems"][0]


def test_results_show_json(capsys, tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text(
        json.dumps(
            {
                "definition": "d",
                "results": {
                    "d": {
                        "a": {
                            "status": "PASSED",
                            "latency_ms": 0.002,
                            "reference_latency_ms": 1.0,
                            "speedup_factor": 500.0,
                        },
                        "b": {
                            "status": "PASSED",
                            "latency_ms": 0.004,
                            "reference_latency_ms": 1.0,
                            "speedup_factor": 250.0,
                        },
                    }
                },
            }
        )
    )
    code, out, _ = run_cli(capsys, "results", "show", str(p), "--json")
    data = json.loads(out)
    assert code == 0 and data["source_format"] == "retained-run"
    assert data["summary"]["passed"] == 2 and data["summary"]["mean_latency_ms"] == pytest.approx(
        0.003
    )
    code, out, _ = run_cli(capsys, "results", "show", str(p))
    assert code == 0 and "2/2 PASSED" in out


def test_results_show_solution_filter(capsys, shared) -> None:
    path = shared("fixtures", "h200", "flashinfer-bench", "isolated_14wl_3sol_dps.jsonl")
    code, out, _ = run_cli(capsys, "results", "show", str(path), "--solution", "dps_bv32", "--json")
    data = json.loads(out)
    assert (
        code == 0
        and data["summary"]["total"] == 14
        and {r["solution"] for r in data["rows"]} == {"dps_bv32"}
    )
    code, _, err = run_cli(capsys, "results", "show", str(path), "--solution", "nope")
    assert code == 2 and "no rows for solution 'nope'" in err


def test_demo_refuses_a_non_empty_folder(capsys, tmp_path: Path) -> None:
    (tmp_path / "x").write_text("keep me")
    code, _, err = run_cli(capsys, "demo", str(tmp_path), "--no-tui")
    assert code == 2 and "not empty" in err
    assert (tmp_path / "x").read_text() == "keep me"


def test_demo_creates_a_valid_git_workspace(capsys, tmp_path: Path) -> None:
    target = tmp_path / "ws"
    code, out, _ = run_cli(capsys, "demo", str(target), "--no-tui")
    assert code == 0 and (target / "config.toml").is_file() and (target / ".git").is_dir()
    code, out, _ = run_cli(capsys, "check", str(target))
    assert code == 0


BAD_INPUTS = [
    (
        "truncated.jsonl",
        '{"definition": "d", "workload": {"uuid": "a", "axes": {}, "inputs": {}}, "solution": "s", "evaluation": {"status": "PASS',
    ),
    ("wrong_types.json", '{"definition": "d", "results": {"d": {"a": {"status": 7}}}}'),
    ("missing.json", '{"definition": "d", "results": {"d": {"a": {"latency_ms": 1}}}}'),
    ("unknown_status.json", '{"definition": "d", "results": {"d": {"a": {"status": "SORT_OF"}}}}'),
    ("empty.json", ""),
]


@pytest.mark.parametrize(("name", "text"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_files_give_one_line_and_exit_2(tmp_path: Path, name: str, text: str) -> None:
    p = tmp_path / name
    p.write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "fibtui", "results", "show", str(p)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fibtui: error: ") and str(p) in lines[0]


def test_usage_errors_exit_2(capsys) -> None:
    code, _, err = run_cli(capsys, "results")
    assert code == 2 and "error" in err
    code, _, err = run_cli(capsys, "no-such-verb")
    assert code == 2


def _registered_by_module() -> list[tuple[str, str]]:
    """(verb, module) as each verb module's register adds them, the modules found on disk."""
    import argparse
    import importlib
    import pkgutil

    import fibtui.verbs

    out = []
    for info in sorted(pkgutil.iter_modules(fibtui.verbs.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"fibtui.verbs.{info.name}")
        if info.name.startswith("_") or not hasattr(module, "register"):
            continue
        sub = argparse.ArgumentParser().add_subparsers()
        module.register(sub, lambda p: None)
        out += [(name, info.name) for name in sub._name_parser_map]
    return out


def test_the_verb_table_names_every_verb_and_its_module_in_help_order() -> None:
    from fibtui.cli import build_parser
    from fibtui.verbs import VERBS

    assert list(VERBS.items()) == _registered_by_module()
    verbs = next(a for a in build_parser()._actions if a.dest == "verb")
    assert [a.dest for a in verbs._choices_actions] == list(VERBS)


def _modules_after(*argv: str) -> list[str]:
    code = (
        "import json, sys\n"
        "from fibtui.cli import build_parser\n"
        f"build_parser(lazy=True).parse_args({list(argv)!r})\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('fibtui.verbs'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_the_command_line_imports_only_the_module_of_the_verb_it_runs() -> None:
    assert _modules_after("--workspace", "x") == ["fibtui.verbs"]  # the TUI: fibtui.verbs.tui later
    assert _modules_after("-w", "x", "runs", "list") == ["fibtui.verbs", "fibtui.verbs.run"]
    assert _modules_after("round", "list") == ["fibtui.verbs", "fibtui.verbs.decide"]


def test_help_and_usage_errors_are_those_of_the_whole_parser(capsys) -> None:
    """The lazy parser of main prints what the parser with every verb loaded prints."""
    from fibtui.cli import build_parser

    code, out, _ = run_cli(capsys, "--help")
    assert code == 0 and out == build_parser().format_help()
    for verb in ("status", "ncu", "runs"):
        assert f"\n    {verb} " in out
    code, _, err = run_cli(capsys, "no-such-verb")
    assert code == 2 and "invalid choice: 'no-such-verb' (choose from 'compare', 'promote'" in err
    code, out, _ = run_cli(capsys, "runs", "--help")
    assert code == 0 and out.startswith("usage: fibtui runs")
