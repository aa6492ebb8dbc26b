"""fibtui.worker.wire: every message kind written as the code wrote it before the wire had types
(the same keys in the same order, so the same bytes on a pipe, the socket and in a journal), read
back the same; no op or event name spelled anywhere else in fibtui; one pid-alive answer."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fibtui.core import procs, runs
from fibtui.core.dataset import Dataset
from fibtui.core.presets import official_timing, preset_for
from fibtui.runners.service import common
from fibtui.runners.session import (
    GPU_PLAN,
    INTERPRETER_PLAN,
    RunOptions,
    default_build_cache_dir,
    default_cache_dir,
    engine_config,
)
from fibtui.worker import protocol, wire
from fibtui.worker.wire import Event, Op, ServiceOp
from tests.conftest import DEMO, DEMO_DEFINITION

REPO = Path(__file__).resolve().parents[1]
RESULT = {
    "job_id": "0|abc",
    "uuid": "abc",
    "repeat": 0,
    "results": [{"solution_id": "candidate-0", "status": "PASSED", "latency_ms": 0.5}],
    "restart": False,
}
ENV = {"PATH": "/usr/bin", "TRITON_INTERPRET": "1"}

#: (the message, the dict the code sent before the wire had types: literal, in its key order)
CASES: list[tuple[Any, dict[str, Any]]] = [
    # requests to a worker
    (
        wire.Load({"backend": "local"}, {"name": "d"}, [{"id": "candidate-0"}], [{"uuid": "u"}]),
        {
            "op": "load",
            "config": {"backend": "local"},
            "definition": {"name": "d"},
            "solutions": [{"id": "candidate-0"}],
            "prefetch": [{"uuid": "u"}],
        },
    ),
    (
        wire.Load({}, {"name": "d"}, [], []),
        {"op": "load", "config": {}, "definition": {"name": "d"}, "solutions": [], "prefetch": []},
    ),
    (
        wire.Job("1|abc", {"uuid": "abc"}, 1, ["baseline-0", "candidate-1"]),
        {
            "op": "job",
            "job_id": "1|abc",
            "workload": {"uuid": "abc"},
            "repeat": 1,
            "solutions": ["baseline-0", "candidate-1"],
        },
    ),
    (wire.Adopt(1234), {"op": "adopt", "runner_pid": 1234}),
    # events of a worker
    (wire.Ready(77), {"event": "ready", "pid": 77}),
    (
        wire.Loaded({"candidate-0": {"ok": True}}, {"torch": "2"}),
        {
            "event": "loaded",
            "solutions": {"candidate-0": {"ok": True}},
            "environment": {"torch": "2"},
        },
    ),
    (wire.JobStarted("0|abc"), {"event": "job_started", "job_id": "0|abc"}),
    (
        wire.Calling("0|abc", "check", "candidate-0"),
        {"event": "calling", "job_id": "0|abc", "sid": "candidate-0", "phase": "check"},
    ),
    (
        wire.Calling("0|abc", "judge", None),
        {"event": "calling", "job_id": "0|abc", "phase": "judge", "sid": None},
    ),
    (
        wire.Calling("0|abc", "timing", None, ["baseline-0", "candidate-1"]),
        {
            "event": "calling",
            "job_id": "0|abc",
            "sid": None,
            "sids": ["baseline-0", "candidate-1"],
            "phase": "timing",
        },
    ),
    (wire.Result(dict(RESULT)), {"event": "result", **RESULT}),
    (wire.Released(3, True), {"event": "released", "runs": 3, "keep": True}),
    (
        wire.Released(100, False, "it served 100 runs"),
        {"event": "released", "runs": 100, "keep": False, "why": "it served 100 runs"},
    ),
    (
        wire.Adopted(77, "/tmp/fibtui-worker-cwd-1-x"),
        {"event": "adopted", "pid": 77, "scratch": "/tmp/fibtui-worker-cwd-1-x"},
    ),
    (wire.Error("job before load"), {"event": "error", "message": "job before load"}),
    (
        wire.Error("worker cannot start: ImportError: torch", fatal=True),
        {"event": "error", "fatal": True, "message": "worker cannot start: ImportError: torch"},
    ),
    (
        wire.Error("ValueError: x", traceback="Traceback ..."),
        {"event": "error", "message": "ValueError: x", "traceback": "Traceback ..."},
    ),
    (
        wire.Done(False, "cpu-interpreter"),
        {"event": "done", "poisoned": False, "timing_kind": "cpu-interpreter"},
    ),
    (
        wire.HostView("cpu", {"torch": "2"}, [{"uuid": "u"}]),
        {
            "event": "host_view",
            "device": "cpu",
            "environment": {"torch": "2"},
            "workloads": [{"uuid": "u"}],
        },
    ),
    (
        wire.BuildCheck({"candidate-0": {"ok": True}}),
        {"event": "buildcheck", "results": {"candidate-0": {"ok": True}}},
    ),
    (wire.Garbage("not json"), {"event": "garbage", "text": "not json"}),
    # a Modal container's progress
    (wire.SliceResult(dict(RESULT)), {"event": "result", "job": RESULT}),
    # requests to the worker service, and its hand-over reply
    (
        wire.SlotRequest(ServiceOp.TAKE, "cpu", True, ENV, 1.0),
        {"op": "take", "device": "cpu", "interpreter": True, "env": ENV, "wait_s": 1.0},
    ),
    (
        wire.SlotRequest(ServiceOp.WARM, "cuda:0", False, ENV),
        {"op": "warm", "device": "cuda:0", "interpreter": False, "env": ENV, "wait_s": 0.0},
    ),
    (
        wire.SlotRequest(ServiceOp.RETURN, "cpu", True, ENV, pid=55, runs=2),
        {
            "op": "return",
            "device": "cpu",
            "interpreter": True,
            "env": ENV,
            "wait_s": 0.0,
            "pid": 55,
            "runs": 2,
        },
    ),
    (wire.ExitStatus(55), {"op": "exit_status", "pid": 55}),
    (
        wire.HandOver(55, "/tmp/fibtui-worker-cwd-9-y", "interp:cpu:ab12", "cpu", True),
        {
            "ok": True,
            "pid": 55,
            "scratch": "/tmp/fibtui-worker-cwd-9-y",
            "key": "interp:cpu:ab12",
            "device": "cpu",
            "pidfd": True,
        },
    ),
]


def _bytes_runner(obj: dict[str, Any]) -> bytes:
    """A request as a runner writes it on a worker's stdin (fibtui.runners.local.WorkerProcess)."""
    return (json.dumps(obj) + "\n").encode()


def _bytes_worker(obj: dict[str, Any]) -> bytes:
    """An event as the worker writes it (fibtui.worker.protocol.emit), and a service's line."""
    return (json.dumps(protocol._clean(obj), separators=(",", ":"), default=str) + "\n").encode()


@pytest.mark.parametrize(
    ("message", "sent"), CASES, ids=[f"{type(m).__name__}-{i}" for i, (m, _) in enumerate(CASES)]
)
def test_each_message_is_the_bytes_sent_before_and_reads_back_the_same(
    message: Any, sent: dict[str, Any]
) -> None:
    out = message.to_dict()
    assert list(out) == list(sent)  # the same keys in the same order
    assert _bytes_runner(out) == _bytes_runner(sent)
    assert _bytes_worker(out) == _bytes_worker(sent)
    assert all(type(v) is not Op and type(v) is not Event for v in out.values())  # plain str
    back = type(message).from_dict(json.loads(_bytes_worker(sent)))
    assert back == message
    assert _bytes_worker(back.to_dict()) == _bytes_worker(sent)


def test_the_messages_without_fields() -> None:
    assert wire.bare(Op.RELEASE) == {"op": "release"}
    assert wire.bare(Op.SHUTDOWN) == {"op": "shutdown"}
    assert wire.bare(Op.PING) == {"op": "ping"}
    for op in (ServiceOp.HELLO, ServiceOp.STATUS, ServiceOp.STOP):
        assert _bytes_worker(wire.bare(op)) == b'{"op":"%s"}\n' % op.value.encode()
    assert wire.bare_event(Event.PONG) == {"event": "pong"}
    assert wire.bare_event(Event.SLICE_STARTED) == {"event": "slice_started"}
    assert wire.bare_event(Event.LOADED) == {"event": "loaded"}


def test_every_message_kind_with_fields_has_a_case() -> None:
    kinds = {
        obj
        for obj in vars(wire).values()
        if isinstance(obj, type) and hasattr(obj, "to_dict") and hasattr(obj, "from_dict")
    }
    kinds -= {wire.EngineConfig, wire.TimingPlan}  # tested below
    assert kinds == {type(m) for m, _ in CASES}


def test_the_names_are_each_defined_once() -> None:
    assert [op.value for op in Op] == ["load", "job", "adopt", "release", "ping", "shutdown"]
    assert common.OPS == wire.SERVICE_OPS
    assert wire.SERVICE_OPS == ("hello", "take", "warm", "return", "status", "stop", "exit_status")
    assert wire.WORK_OPS == {"take", "warm", "return"}
    assert common.PROTOCOL == wire.PROTOCOL == 2
    events = [e.value for e in Event]
    assert len(events) == len(set(events)) == 14
    assert wire.event_of({"event": "ready"}) == Event.READY
    assert wire.event_of(None) is None and wire.event_of([1]) is None
    assert wire.op_of({"op": "job"}) == Op.JOB and wire.op_of("job") is None


# -- the engine config ---------------------------------------------------------------------------


def _legacy_engine_config(
    backend: str, preset: Any, dataset_root: Path, options: RunOptions
) -> dict[str, Any]:
    """fibtui.runners.session.engine_config as it was before the wire had an EngineConfig."""
    interpreter = backend == "interpreter"
    plan: dict[str, Any] = dict(INTERPRETER_PLAN if interpreter else GPU_PLAN)
    if options.calls_per_block:
        plan["calls_per_block"] = options.calls_per_block
    if options.blocks:
        plan["blocks"] = options.blocks
    plan["l2_policy"] = options.l2_policy
    timing: dict[str, Any] = {}
    if options.timing == "official":
        official = {"warmup": 0, "iterations": 3, "trials": 2}
        timing = {
            "timing": "official",
            "official": official if interpreter else official_timing(preset),
        }
    return {
        "backend": backend,
        "device": "cpu" if interpreter else "cuda:0",
        "correctness_trials": options.correctness_trials or (1 if interpreter else 2),
        "atol": preset.atol,
        "rtol": preset.rtol,
        "matched_ratio": preset.matched_ratio,
        "evaluator": preset.evaluator,
        "plan": plan,
        **timing,
        "cache_dir": default_cache_dir(),
        "build_cache_dir": default_build_cache_dir(),
        "dataset_root": str(dataset_root),
    }


@pytest.mark.parametrize("backend", ["local", "interpreter", "modal"])
@pytest.mark.parametrize(
    "options",
    [
        RunOptions(),
        RunOptions(timing="official", calls_per_block=7, blocks=3, l2_policy="warm"),
        RunOptions(correctness_trials=5),
    ],
    ids=["defaults", "official", "trials"],
)
def test_engine_config_is_the_json_written_before(backend: str, options: RunOptions) -> None:
    definition = Dataset(DEMO / "dataset").definition(DEMO_DEFINITION)
    root = DEMO / "dataset"
    written = engine_config(backend, definition, root, options)
    legacy = _legacy_engine_config(backend, preset_for(definition), root, options)
    assert json.dumps(written) == json.dumps(legacy)
    # what a run adds on its way to a worker: a CUTLASS checkout, the slot's device and build
    # folder (fibtui.runners.local), Modal's report_calls (fibtui.runners.modal_app)
    sent = {**written, "reference_root": "/ws/reference"}
    sent["device"] = "cpu"
    sent["workdir"] = "/tmp/fibtui-worker-cwd-1-x/build"
    sent["report_calls"] = True
    config = wire.EngineConfig.from_dict(json.loads(json.dumps(sent)))
    assert json.dumps(config.to_dict()) == json.dumps(sent)
    assert config.plan.calls_per_block == legacy["plan"]["calls_per_block"]
    assert config.report_calls is True and config.device == "cpu"


def test_engine_config_reads_what_the_worker_always_read() -> None:
    config = wire.EngineConfig.from_dict(
        {"backend": "interpreter", "plan": {"blocks": 2, "checks": False}, "from_a_newer": 1}
    )
    assert config.timing_kind == "cpu-interpreter"
    assert config.plan == wire.TimingPlan(blocks=2, checks=False)
    assert config.to_dict()["plan"] == {
        "calls_per_block": 20,
        "blocks": 2,
        "warmup_calls": 3,
        "l2_policy": "cold",
        "checks": False,
    }
    assert "from_a_newer" not in config.to_dict()
    assert wire.EngineConfig.from_json is not None  # the name the worker's callers used
    assert wire.EngineConfig.from_dict({}) == wire.EngineConfig()


# -- no op or event name spelled outside the wire ---------------------------------------------------


NAMES = {op.value for op in Op} | set(wire.SERVICE_OPS) | {e.value for e in Event}
KEYS = {wire.OP, wire.EVENT}


def _literal_key_read(node: ast.AST) -> bool:
    """``x.get("event")``, ``x["op"]``: the key spelled by hand."""
    if isinstance(node, ast.Call):
        return (
            isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and bool(node.args)
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in KEYS
        )
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Constant)
        and node.slice.value in KEYS
    )


def _is_key_read(node: ast.AST) -> bool:
    """A read of a message's op or event name: by hand, or ``event_of(x)`` / ``op_of(x)``."""
    if isinstance(node, ast.Call):
        fn = node.func
        name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
        if name in ("event_of", "op_of"):
            return True
    return _literal_key_read(node)


def stray_literals(source: str) -> list[str]:
    """Where ``source`` spells the wire by hand: a dict with an ``op``/``event`` key, a read of
    that key by its literal name, or a comparison of what such a read gave with a literal name."""
    found: list[str] = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key in node.keys:
                if isinstance(key, ast.Constant) and key.value in KEYS:
                    found.append(f"{node.lineno}: a dict with the key {key.value!r}")
        elif _literal_key_read(node):
            found.append(f"{node.lineno}: the key read by its literal name")
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope in [tree, *scopes]:
        read_into = {
            target.id
            for n in ast.walk(scope)
            if isinstance(n, ast.Assign) and _is_key_read(n.value)
            for target in n.targets
            if isinstance(target, ast.Name)
        }
        for n in ast.walk(scope):
            if not isinstance(n, ast.Compare):
                continue
            sides = [n.left, *n.comparators]
            named = any(
                _is_key_read(s) or (isinstance(s, ast.Name) and s.id in read_into) for s in sides
            )
            literal = [s.value for s in sides if isinstance(s, ast.Constant) and s.value in NAMES]
            if named and literal:
                found.append(f"{n.lineno}: compared with the literal {literal[0]!r}")
    return sorted(set(found))


def test_the_check_finds_a_name_spelled_by_hand() -> None:
    planted = (
        "def f(ev, w):\n"
        "    w.send({'op': 'release'})\n"
        "    kind = ev.get('event')\n"
        "    if kind == 'result':\n"
        "        return event_of(ev) != 'ready'\n"
    )
    found = stray_literals(planted)
    assert any("dict with the key 'op'" in f for f in found), found
    assert any("read by its literal name" in f for f in found), found
    assert any("literal 'result'" in f for f in found), found
    assert any("literal 'ready'" in f for f in found), found
    # the names from the wire, and other protocols' words, are not flagged
    clean = (
        "def g(ev, row):\n"
        "    kind = event_of(ev)\n"
        "    if kind == Event.RESULT or row['kind'] == 'stop':\n"
        "        return {'ok': True}\n"
    )
    assert stray_literals(clean) == []


SHARED = {wire.SCRATCH_PREFIX, wire.SCRATCH_ENV, wire.RUNNER_PID_ENV}


def test_the_scratch_folder_and_the_worker_environment_are_named_once() -> None:
    from fibtui.runners import local

    assert local.SCRATCH_PREFIX == wire.SCRATCH_PREFIX == "fibtui-worker-cwd-"
    wire_path = REPO / "fibtui" / "worker" / "wire.py"
    spelled = {
        f"{path.relative_to(REPO)}:{node.lineno}"
        for path in sorted((REPO / "fibtui").rglob("*.py"))
        if path != wire_path
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value in SHARED
    }
    assert spelled == set()


def test_no_op_or_event_literal_outside_the_wire() -> None:
    wire_path = REPO / "fibtui" / "worker" / "wire.py"
    offenders = {
        str(path.relative_to(REPO)): found
        for path in sorted((REPO / "fibtui").rglob("*.py"))
        if path != wire_path and (found := stray_literals(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}


# -- one pid-alive answer ------------------------------------------------------------------------


def test_process_alive_is_one_function_and_a_zombie_is_dead() -> None:
    from fibtui.runners import local

    assert runs.process_alive is procs.process_alive is local.process_alive
    assert not hasattr(protocol, "process_alive")
    assert procs.process_alive(os.getpid())
    assert not procs.process_alive(0) and not procs.process_alive(-1)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while procs.process_alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.02)  # it ends by itself; not reaped, it stays a zombie
        assert os.waitpid(child.pid, os.WNOHANG) != (0, 0)  # it was a zombie, reaped just now
    finally:
        child.wait()
    assert not procs.process_alive(child.pid)


# -- the bytes a real worker writes ---------------------------------------------------------------


def test_a_serving_worker_writes_the_wire_bytes(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "TRITON_INTERPRET": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "FIBTUI_RUNNER_PID": str(os.getpid()),
    }
    requests = [wire.bare(Op.PING), {"op": "no_such_op"}, wire.Job("0|u", {}, 0, []).to_dict()]
    stdin = b"".join(_bytes_runner(r) for r in requests) + b"not json\n"
    stdin += _bytes_runner(wire.bare(Op.SHUTDOWN))
    proc = subprocess.run(
        [sys.executable, "-m", "fibtui.worker", "serve"],
        input=stdin,
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    lines = proc.stdout.splitlines(keepends=True)
    ready = json.loads(lines[0])
    assert lines == [
        _bytes_worker(wire.Ready(ready["pid"]).to_dict()),
        _bytes_worker(wire.bare_event(Event.PONG)),
        _bytes_worker(wire.Error("unknown op 'no_such_op'").to_dict()),
        _bytes_worker(wire.Error("job before load").to_dict()),
        _bytes_worker(
            wire.Error("bad request: Expecting value: line 1 column 1 (char 0)").to_dict()
        ),
    ]
    assert lines[1] == b'{"event":"pong"}\n'
