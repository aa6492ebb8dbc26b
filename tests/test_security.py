"""Security: nobody gets in.

- No shell: no ``shell=True``, no ``os.system`` / ``os.popen``, and no command built as a string
  anywhere in the package (an AST scan of every call that starts a process).
- Paths: solution sources like ``../../x`` or ``/abs`` are refused wherever sources are unpacked
  (the dataset's solution JSON, ``fibtui run --solution X.json``, a run's snapshot, the worker's
  own build, the Modal container's function body); workload safetensors paths stay inside the
  dataset root (``../``, absolute paths and symlinks leaving the root are refused).
- Secrets: Modal tokens and other ``*_TOKEN`` / ``*_SECRET`` variables planted in the environment
  never appear in any output, log, journal, record or archive of a local run, an in-process Modal
  run, a Modal plan, status, runs list or an archived run, even when a kernel tries to leak them.
"""

from __future__ import annotations

import ast
import json
import os
import struct
import subprocess
import sys
import uuid as uuidlib
from pathlib import Path

import pytest

from fibtui.core.dataset import Dataset
from fibtui.core.errors import InputError
from tests.runner_helpers import PY_TEMPLATE, TINY_DEFINITION, make_tiny_workspace

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "fibtui"

# --------------------------------------------------------------------------------------------
# No shell, no string-built commands
# --------------------------------------------------------------------------------------------

#: call targets that start a process from an argument list
SPAWN = {"subprocess.run", "subprocess.Popen", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
         "asyncio.create_subprocess_exec"}
#: call targets that always go through a shell (or take a command string): never allowed
SHELL = {"os.system", "os.popen", "subprocess.getoutput", "subprocess.getstatusoutput",
         "asyncio.create_subprocess_shell", "os.execl", "os.execlp", "os.spawnl", "os.spawnlp"}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _stringy(node: ast.AST | None) -> bool:
    """An expression that builds a string (a command line) rather than a list of arguments."""
    if node is None:
        return False
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp):
        return _stringy(node.left) or _stringy(node.right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in ("format", "join") and (_stringy(node.func.value) or node.func.attr == "format")
    return False


def _assignments(tree: ast.AST) -> dict[int, dict[str, list[ast.AST]]]:
    """Per function (by id of its node): name -> every value assigned to it (incl. augmented)."""
    out: dict[int, dict[str, list[ast.AST]]] = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            continue
        names: dict[str, list[ast.AST]] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        names.setdefault(t.id, []).append(node.value)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name) and node.value:
                names.setdefault(node.target.id, []).append(node.value)
        out[id(fn)] = names
    return out


def process_calls() -> list[tuple[str, int, str, ast.Call, dict[str, list[ast.AST]]]]:
    """(file, line, target, call, the enclosing function's assignments) of every process start."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        assigned = _assignments(tree)
        parents: dict[int, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                parents[id(child)] = node
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            target = _dotted(node.func)
            if target in SPAWN or target in SHELL or target.endswith(".git.execute"):
                scope: ast.AST = node
                while not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
                    scope = parents[id(scope)]
                found.append((str(path.relative_to(REPO)), node.lineno, target, node, assigned[id(scope)]))
    return found


def test_no_shell_and_no_string_commands_anywhere_in_the_package() -> None:
    calls = process_calls()
    assert len(calls) >= 6, "the scan must see the package's process starts (ncu, nvidia-smi, workers, parity...)"
    problems = []
    for where, line, target, call, assigned in calls:
        if target in SHELL:
            problems.append(f"{where}:{line}: {target} goes through a shell")
        for kw in call.keywords:
            if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                problems.append(f"{where}:{line}: {target}(shell=...)")
        cmd = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg in ("args", "command")), None)
        values = [cmd]
        if isinstance(cmd, ast.Name):
            values = assigned.get(cmd.id, []) or [cmd]
        for v in values:
            if _stringy(v):
                problems.append(f"{where}:{line}: {target} gets a command built as a string")
    assert not problems, "\n".join(problems)


def test_no_shell_true_in_any_call_at_all() -> None:
    """GitPython and friends take shell= too: nowhere in the package."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                for kw in node.keywords:
                    if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                        offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not offenders


def test_the_scanner_catches_what_it_must() -> None:
    """The scan's own check: string commands and shells are flagged."""
    bad = ["subprocess.run('ls ' + d, shell=True)", "subprocess.run(f'git {x}')", "os.system('rm -rf ' + p)",
           "cmd = 'ncu ' + rep\nsubprocess.Popen(cmd)"]
    for src in bad:
        tree = ast.parse(src)
        assigned = _assignments(tree)[id(tree)]
        call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and _dotted(n.func) in SPAWN | SHELL)
        cmd = call.args[0]
        values = assigned.get(cmd.id, []) if isinstance(cmd, ast.Name) else [cmd]
        flagged = (_dotted(call.func) in SHELL or any(k.arg == "shell" for k in call.keywords)
                   or any(_stringy(v) for v in values))
        assert flagged, src


# --------------------------------------------------------------------------------------------
# Solution sources: no way out of the folder they are unpacked into
# --------------------------------------------------------------------------------------------

EVIL_PATHS = ["../../x.py", "../x.py", "a/../../x.py", "/tmp/fibtui_evil.py", "\\\\server\\share\\x.py", "C:/x.py",
              ".", "", "a\x00b.py", "sub/../../../x.py"]
GOOD_KERNEL = "def scale(x, alpha, y):\n    y.copy_(x * alpha)\n"


def evil_solution(path: str) -> dict:
    return {"name": "evil", "definition": "tiny_scale", "author": "x",
            "spec": {"language": "python", "entry_point": "kernel.py::scale"},
            "sources": [{"path": "kernel.py", "content": GOOD_KERNEL}, {"path": path, "content": "PWNED = 1\n"}]}


@pytest.mark.parametrize("path", EVIL_PATHS)
def test_dataset_solution_files_refuse_paths_out(tmp_path: Path, path: str) -> None:
    ds = tmp_path / "ds"
    (ds / "definitions").mkdir(parents=True)
    (ds / "definitions" / "tiny_scale.json").write_text(json.dumps(TINY_DEFINITION))
    (ds / "solutions").mkdir()
    sol_file = ds / "solutions" / "evil.json"
    sol_file.write_text(json.dumps(evil_solution(path)))
    with pytest.raises(InputError) as exc:
        Dataset(ds).solutions()
    assert exc.value.path == sol_file and exc.value.field == "sources[1].path"


@pytest.mark.parametrize("path", ["../../pwned.py", "/tmp/fibtui_pwned_{}.py"])
def test_run_solution_json_refuses_paths_out_and_writes_nothing(tmp_path: Path, path: str) -> None:
    path = path.format(uuidlib.uuid4().hex)
    root = make_tiny_workspace(tmp_path / "ws")
    sol = tmp_path / "evil.json"
    sol.write_text(json.dumps(evil_solution(path)))
    proc = subprocess.run([sys.executable, "-m", "fibtui", "run", "--backend", "interpreter", "--workloads", "all",
                           "--solution", str(sol), "--workspace", str(root)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and "sources[1].path" in proc.stderr
    assert not (root / "optimize_ops" / "runs").exists()
    assert not Path(path).exists() and not (root.parent / "pwned.py").exists()


def test_a_tampered_snapshot_or_header_cannot_point_outside_the_run(tmp_path: Path) -> None:
    """A run's solution.json snapshot edited to hold '../' sources, and a journal header whose
    snapshot folder climbs out: resume refuses both with one line."""
    from fibtui.core.workspace import open_workspace
    from fibtui.runners.session import RunOptions, prepare_resume, prepare_run

    root = make_tiny_workspace(tmp_path / "ws")
    ws = open_workspace(root)
    prepared = prepare_run(ws, RunOptions(backend="interpreter", workloads="all"))
    ref = prepared.header.solutions[0]
    snap = prepared.folder / ref.snapshot / "solution.json"
    good = snap.read_text()
    snap.write_text(json.dumps({**json.loads(good), "sources": evil_solution("../../../x.py")["sources"]}))
    with pytest.raises(InputError) as exc:
        prepare_resume(ws, prepared.run_id)
    assert "parent-folder traversal" in exc.value.one_line()
    snap.write_text(good)
    journal = prepared.folder / "journal.jsonl"
    lines = journal.read_text().splitlines()
    header = json.loads(lines[0])
    header["solutions"][0]["snapshot"] = "../../../../../etc"
    journal.write_text("\n".join([json.dumps(header)] + lines[1:]) + "\n")
    with pytest.raises(InputError) as exc:
        prepare_resume(ws, prepared.run_id)
    assert exc.value.field == "header"


@pytest.mark.parametrize("path", ["../x.py", "/tmp/fibtui_abs.py", "a/../../x.py", "C:/x.py", ".", "a\x00.py"])
def test_the_worker_build_refuses_paths_out(tmp_path: Path, path: str) -> None:
    from fibtui.worker.build import BuildError, build

    work = tmp_path / "work"
    sol = evil_solution(path)
    with pytest.raises(BuildError):
        build("candidate-0", sol, work)
    written = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert all(w.startswith("work/") for w in written)
    assert not Path("/tmp/fibtui_abs.py").exists()


def test_the_modal_container_refuses_paths_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Modal function's body (run here, as Function.local() would) builds nothing outside its
    work folder: the bad solution is a COMPILE_ERROR, the good one in the same slice PASSES."""
    pytest.importorskip("modal")
    from fibtui.runners.modal_app import run_slice

    monkeypatch.chdir(tmp_path)
    workload = {"uuid": "wl-0", "axes": {"n": 1}, "inputs": {"x": {"type": "random"}, "alpha": {"type": "scalar", "value": 1.5}}}
    good = {"id": "candidate-0", "name": "good", "spec": {"language": "python", "entry_point": "kernel.py::scale"},
            "sources": [{"path": "kernel.py", "content": GOOD_KERNEL}]}
    evil = {"id": "candidate-1", **{k: v for k, v in evil_solution("../../../escaped.py").items() if k in ("name", "spec", "sources")}}
    request = {"config": {"backend": "interpreter", "device": "cpu", "correctness_trials": 1, "workdir": str(tmp_path / "w"),
                          "cache_dir": str(tmp_path / "cache"), "plan": {"calls_per_block": 1, "blocks": 1, "warmup_calls": 0}},
               "definition": TINY_DEFINITION, "solutions": [good, evil],
               "jobs": [{"job_id": "0|wl-0", "workload": workload, "repeat": 0, "solutions": ["candidate-0", "candidate-1"]}],
               "slice_id": 0}
    out = run_slice(request)
    results = {r["solution_id"]: r for r in out["jobs"][0]["results"]}
    assert results["candidate-0"]["status"] == "PASSED"
    assert results["candidate-1"]["status"] == "COMPILE_ERROR" and "leaves the solution folder" in results["candidate-1"]["error"]
    assert not list(tmp_path.parent.glob("escaped.py")) and not (tmp_path / "escaped.py").exists()


# --------------------------------------------------------------------------------------------
# Safetensors inputs stay inside the dataset root
# --------------------------------------------------------------------------------------------


def write_safetensors(path: Path, key: str, values: list[float], shape: list[int]) -> None:
    data = struct.pack(f"<{len(values)}f", *values)
    header = json.dumps({key: {"dtype": "F32", "shape": shape, "data_offsets": [0, len(data)]}}).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)


def test_safetensors_paths_stay_inside_the_dataset_root(tmp_path: Path) -> None:
    from fibtui.worker.inputs import InputErrorW, InputMaker

    root = tmp_path / "ds"
    secret = tmp_path / "outside" / "secret.safetensors"
    write_safetensors(secret, "x", [7.0] * 64, [1, 64])
    write_safetensors(root / "blob" / "x.safetensors", "x", [1.0] * 64, [1, 64])
    (root / "blob" / "link_out.safetensors").symlink_to(secret)
    (root / "blob" / "dir_out").symlink_to(secret.parent, target_is_directory=True)
    (root / "blob" / "link_in.safetensors").symlink_to(root / "blob" / "x.safetensors")
    maker = InputMaker(TINY_DEFINITION, "cpu", str(root))

    def make(path: str):
        workload = {"uuid": "u", "axes": {"n": 1}, "inputs": {
            "x": {"type": "safetensors", "path": path, "tensor_key": "x"}, "alpha": {"type": "scalar", "value": 1.0}}}
        return maker.make(workload, 0)

    assert float(make("blob/x.safetensors")[0].sum()) == 64.0
    assert float(make("./blob/link_in.safetensors")[0].sum()) == 64.0  # a link that stays inside is fine
    for bad in ("../outside/secret.safetensors", str(secret), "blob/link_out.safetensors",
                "blob/dir_out/secret.safetensors", "blob/../../outside/secret.safetensors"):
        with pytest.raises(InputErrorW, match="leaves the dataset root"):
            make(bad)


# --------------------------------------------------------------------------------------------
# Secrets never land anywhere
# --------------------------------------------------------------------------------------------

LEAKER = PY_TEMPLATE.format(body=(
    "    found = {k: v for k, v in os.environ.items() if any(w in k for w in ('TOKEN', 'SECRET', 'PASSWORD', 'KEY'))}\n"
    "    print('ENV', dict(os.environ))\n"
    "    print('FOUND', found, file=sys.stderr)\n"
    "    if found:\n"
    "        raise RuntimeError('leak ' + ' '.join(found.values()))\n"
    "    y.copy_(x * alpha)"))


@pytest.mark.slow
def test_planted_secrets_never_appear_in_outputs_logs_journals_or_archives(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    leak_dir = root / "candidates" / "leaker"
    leak_dir.mkdir(parents=True)
    (leak_dir / "kernel.py").write_text(LEAKER)
    planted = {
        "MODAL_TOKEN_ID": f"ak-{uuidlib.uuid4().hex}",
        "MODAL_TOKEN_SECRET": f"as-{uuidlib.uuid4().hex}",
        "MY_SERVICE_SECRET": f"svc-{uuidlib.uuid4().hex}",
        "GITHUB_TOKEN": f"ghp_{uuidlib.uuid4().hex}",
        "DB_PASSWORD": f"pw-{uuidlib.uuid4().hex}",
    }
    env = dict(os.environ, PYTHONPATH=str(REPO), FIBTUI_CACHE_DIR=str(tmp_path / "cache"), **planted)
    env.pop("FIB_DATASET_PATH", None)
    outputs = []

    def fibtui(*argv: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "fibtui", *argv, "--workspace", str(root)], capture_output=True,
                              text=True, env=env, timeout=300, cwd=tmp_path)
        outputs.append(proc.stdout + proc.stderr)
        assert proc.returncode in ok, (argv, proc.stderr[-2000:])
        return proc

    # a local run with a kernel that hunts for secrets (it finds none: workers never get them)
    local = json.loads(fibtui("run", "--backend", "interpreter", "--workloads", "all", "--solution", str(leak_dir),
                              "--json").stdout)
    assert local["summary"]["complete"], local["jobs"]
    # an in-process Modal run, a Modal plan, status, runs list, results, an archived run
    modal = json.loads(fibtui("run", "--backend", "modal", "--modal-in-process", "--workloads", "all", "--json").stdout)
    assert modal["summary"]["complete"]
    fibtui("run", "--backend", "modal", "--plan")
    fibtui("run", "--backend", "modal", "--plan", "--json")
    fibtui("status", "--json")
    fibtui("runs", "list", "--json")
    run_json = root / "optimize_ops" / "runs" / local["run_id"] / "run.json"
    fibtui("results", "show", str(run_json), "--json")
    fibtui("archive", "--run-folder", str(run_json.parent), "--json", ok=(0, 1))
    fibtui("run", "--resume", "no-such-run-" + planted["MODAL_TOKEN_SECRET"][:3], ok=(2,))  # an error message
    logs = list((root / "optimize_ops").rglob("worker-*.log"))
    assert logs and any(b"ENV" in p.read_bytes() for p in logs)  # the kernel did print its environment
    texts = outputs + [p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink()]
    for name, value in planted.items():
        hits = [t[:200] for t in texts if value in t]
        assert not hits, f"{name} leaked: {hits}"


def test_profiled_workers_and_parity_runs_get_no_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fibtui ncu profile` and `fibtui parity` run the user's kernel too: same scrubbed environment."""
    import threading

    from fibtui.runners import ncu as ncu_runner
    from fibtui.runners import parity

    planted = {"MODAL_TOKEN_ID": "ak-planted", "MODAL_TOKEN_SECRET": "as-planted", "HF_TOKEN": "hf-planted",
               "SOME_API_KEY": "k-planted", "PATH": os.environ.get("PATH", "")}
    for k, v in planted.items():
        monkeypatch.setenv(k, v)
    env = ncu_runner.worker_env()
    assert not {"MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "HF_TOKEN", "SOME_API_KEY"} & set(env) and env["PATH"]
    seen: dict = {}

    class FakePopen:
        def __init__(self, argv, **kwargs):
            seen.update(kwargs.get("env") or {})
            self.stdout = iter([b"done\n"])
            self.returncode = 0
            self.pid = os.getpid()

        def poll(self):
            return 0

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr(parity.subprocess, "Popen", FakePopen)
    parity._run_logged(["flashinfer-bench", "run"], tmp_path, tmp_path / "console.log", None, threading.Event(), 30)
    assert seen and not any(v.endswith("-planted") for v in seen.values())
