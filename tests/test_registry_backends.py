"""Backends declare themselves (fibtui.runners.registry): a backend added at run time, in a module of
its own and one line in ``BACKEND_MODULES``, gets ``fibtui run --backend NAME``, its flags, its
``--help`` and a run through its runner factory; and no module outside the backends' own compares
a backend's name."""

from __future__ import annotations

import ast
import json
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from fibtui.runners import registry
from tests.conftest import run_cli
from tests.runner_helpers import TINY, make_tiny_workspace

REPO = Path(__file__).resolve().parents[1]

#: a whole backend in one module: its flag (a value for the run's options, and a TUI field), its
#: check, its engine and timing kind, and a runner that passes every job at the flag's latency
TOY_MODULE = """
from __future__ import annotations

from fibtui.runners.registry import Backend, Option, register

SPEED = Option(
    "--toy-speed",
    "toy: the latency every job reports, in ms",
    action="store",
    type=float,
    metavar="MS",
    default=1.0,
    label="toy latency (ms)",
)
CHECKED = []


def check(found, in_process):
    CHECKED.append(in_process)


class ToyRunner:
    def __init__(self, ctx):
        self.ctx = ctx

    def run(self, on_event, cancel):
        from fibtui.runners.journaling import JobRecorder, SolutionIds

        header = self.ctx.header
        ids = SolutionIds(header, self.ctx.solutions)
        recorder = JobRecorder(self.ctx.folder, header, ids.ref_of)
        speed = self.ctx.options.backend_options["toy_speed"]
        for job in header.jobs:
            sid = ids.sid_of[(job.role, job.solution)]
            result = {"status": "PASSED", "latency_ms": speed, "timing": {"toy": True}}
            recorder.record(sid, job.uuid, job.repeat, 1, result, on_event)
        return recorder.finish(cancel.is_set(), on_event)


register(
    Backend(
        "toy",
        "a toy for the registry's test",
        check,
        ToyRunner,
        lambda found, options: "toy",
        options=(SPEED,),
        timing_kind="toy-clock",
        l2_policy=False,
    )
)
"""


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The toy backend's module on sys.path and its one line in BACKEND_MODULES; forgotten after."""
    folder = tmp_path / "toy_pkg"
    folder.mkdir()
    (folder / "fibtui_toy_backend.py").write_text(textwrap.dedent(TOY_MODULE))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setattr(
        registry, "BACKEND_MODULES", (*registry.BACKEND_MODULES, "fibtui_toy_backend")
    )
    monkeypatch.setattr(registry, "_loaded", False)
    monkeypatch.setenv("FIBTUI_WORKERS_DAEMON", "0")
    yield __import__("fibtui_toy_backend")
    registry.unregister("toy")
    sys.modules.pop("fibtui_toy_backend", None)


def test_the_builtin_backends_register_themselves() -> None:
    assert registry.names() == ("local", "interpreter", "modal")
    assert [b.name for b in registry.all_backends().values() if b.billed] == ["modal"]
    assert registry.with_plan() == ["modal"]
    assert registry.timing_kind("interpreter") == "cpu-interpreter"
    assert registry.timing_kind("local") == registry.timing_kind("modal") == "cupti"
    flags = [o.flag for o in registry.options()]
    assert flags == ["--no-daemon", "--modal-in-process", "--yes"]  # --no-daemon once
    assert [f.flag for f in registry.tui_fields("interpreter")] == ["--no-daemon"]
    assert registry.tui_fields("modal") == []  # --yes is the TUI's confirm screen, no field


#: ``fibtui run --help``'s options before the backends declared their own, in its order
RUN_FLAGS = (
    "-h --help --workspace -w --dataset --wide --backend --plan --workloads --quick --solution "
    "--baseline --repeats --adaptive --resume --send-unsupported --retry-failed --definition "
    "--workers --timeout --l2 --timing --no-profile-baseline --calls-per-block --blocks --json --no-daemon --yes"
).split()


def test_run_keeps_its_flags_and_their_help(capsys) -> None:
    from fibtui.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "verb")
    run = sub.choices["run"]  # type: ignore[index]
    shown = [f for a in run._actions if a.help != "==SUPPRESS==" for f in a.option_strings]
    assert shown == RUN_FLAGS
    hidden = [f for a in run._actions if a.help == "==SUPPRESS==" for f in a.option_strings]
    assert hidden == ["--modal-in-process"]
    helps = {f: a.help for a in run._actions for f in a.option_strings}
    assert helps["--plan"] == (
        "with --backend modal: print the plan (containers, GPU, image, volume, estimated "
        "GPU-seconds and cost) and exit; no network"
    )
    assert helps["--yes"] == (
        "modal: start even when the worst case costs more than [modal] confirm_above_usd"
    )
    assert helps["--no-daemon"].startswith("local/interpreter: start this run's own workers")
    code, out, _ = run_cli(capsys, "run", "--help")
    assert code == 0 and "--modal-in-process" not in out and "--no-daemon" in out


def test_a_backend_declared_twice_differently_is_refused() -> None:
    local = registry.get("local")
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(
            registry.Backend("local", "other", local.check, local.runner, local.engine)
        )
    assert registry.get("local") is local


def test_a_toy_backend_gets_its_flag_help_and_a_run(toy: Any, tmp_path: Path, capsys) -> None:
    code, out, _ = run_cli(capsys, "run", "--backend", "toy", "--help")
    assert code == 0
    assert "toy (a toy for the registry's test)" in " ".join(out.split())
    assert "--toy-speed MS" in out and "toy: the latency every job reports" in " ".join(out.split())
    assert [f.label for f in registry.tui_fields("toy")] == ["toy latency (ms)"]

    ws = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    code, out, err = run_cli(
        capsys, "run", "--workspace", str(ws), "--backend", "toy", "--workloads", "all",
        "--toy-speed", "2.5", "--json",
    )  # fmt: skip
    assert code == 0, err
    record = json.loads(out)
    assert record["backend"] == "toy" and record["timing_kind"] == "toy-clock"
    assert record["l2_policy"] == "n/a"  # the toy declares no L2 policy
    assert record["state"] == "complete"
    assert [j["latency_ms"] for j in record["jobs"]] == [2.5, 2.5]
    assert {j["uuid"] for j in record["jobs"]} == {"wl-000-n1", "wl-001-n2"}
    assert toy.CHECKED == [False]  # its check ran, not in process

    run_dir = ws / "optimize_ops" / "runs"
    header = json.loads(next(run_dir.rglob("journal.jsonl")).read_text().splitlines()[0])
    assert header["backend"] == "toy" and header["definition"] == TINY

    # --plan and --adaptive say which backends have them: the toy is in neither list
    code, _, err = run_cli(capsys, "run", "--workspace", str(ws), "--backend", "toy", "--plan")
    assert code == 2 and "--plan goes with --backend modal" in err
    code, _, err = run_cli(
        capsys, "run", "--workspace", str(ws), "--backend", "toy", "--adaptive", "--baseline",
        str(ws),
    )  # fmt: skip
    assert code == 2 and "--adaptive runs on the local and interpreter backends" in err


def test_a_toy_run_resumes_through_its_factory(toy: Any, tmp_path: Path, capsys) -> None:
    from fibtui.core.workspace import open_workspace
    from fibtui.services.runs import RunOptions, prepare_resume, prepare_run

    ws = open_workspace(make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2, 3)))
    options = RunOptions(backend="toy", workloads="all", backend_options={"toy_speed": 4.0})
    prepared = prepare_run(ws, options)
    assert type(prepared.runner).__name__ == "ToyRunner"
    assert prepared.header.timing_kind == "toy-clock"
    # resumed: the toy's factory again, with the options the resume was given
    again = prepare_resume(
        ws, prepared.run_id, RunOptions(backend="toy", backend_options={"toy_speed": 7.0})
    )
    assert type(again.runner).__name__ == "ToyRunner"
    record = again.runner.run(lambda event: None, threading.Event())
    assert [j.latency_ms for j in record.jobs] == [7.0, 7.0, 7.0]
    assert toy.CHECKED == [False, False]


#: Where a comparison with a backend's name stays, and why. Each entry must still match one (the
#: list only shrinks); anything else comparing with a backend name fails.
ALLOWED: dict[tuple[str, str], str] = {
    # the backends' own modules: they may know their names
    ("fibtui/runners/local.py", "worker_pool"): "the local/interpreter backend's runner",
    ("fibtui/runners/hostview.py", "host_view"): "the local runner's host view (ncu host)",
    ("fibtui/runners/modal_app.py", "__init__"): "the modal backend's container side",
    ("fibtui/runners/modal_doctor.py", "run_doctor"): "the modal backend's doctor",
    ("fibtui/runners/modal_runner.py", "run_cost"): "the modal backend's runner",
    ("fibtui/runners/modal_runner.py", "_default_caller"): "the modal backend's runner",
    # the engine's own kind in its config and results: core and the worker import no runner
    ("fibtui/core/backends.py", "timing_kind_of"): "core's rule for an unregistered engine",
    ("fibtui/core/stats/timing_keys.py", "timing_key_of_rows"): "reads a recorded env's backend",
    ("fibtui/core/toolchain.py", "limits"): "the engine kind a toolchain check is for",
    ("fibtui/worker/wire.py", "timing_kind"): "the worker's own engine kind (EngineConfig)",
    # outside this change's files
    ("fibtui/verbs/ncu.py", "ncu_profile"): "ncu's own --backend (local|modal: where ncu runs)",
}


def _name_comparisons(names: set[str]) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for path in sorted((REPO / "fibtui").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel == "fibtui/runners/registry.py" or rel.startswith("fibtui/runners/backends/"):
            continue

        def visit(node: ast.AST, where: str, rel: str = rel) -> None:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                where = node.name
            if isinstance(node, ast.Compare):
                for side in (node.left, *node.comparators):
                    items = (
                        side.elts if isinstance(side, ast.Tuple | ast.List | ast.Set) else [side]
                    )
                    if any(isinstance(i, ast.Constant) and i.value in names for i in items):
                        found.add((rel, where))
            for child in ast.iter_child_nodes(node):
                visit(child, where, rel)

        visit(ast.parse(path.read_text(encoding="utf-8")), "<module>")
    return found


def test_no_backend_name_is_compared_outside_the_backends() -> None:
    found = _name_comparisons(set(registry.names()))
    assert found - set(ALLOWED) == set(), "compare with the Backend's declared fields instead"
    assert set(ALLOWED) - found == set(), "gone: take it off ALLOWED"
