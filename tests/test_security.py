"""Security: nobody gets in.

- No shell: no ``shell=True``, no ``os.system`` / ``os.popen``, no command built as a string and no
  shell started through an argument list (``["sh", "-c", line]``, also via ``env``/``sudo``,
  ``os.exec*``, ``os.spawn*``, ``pty.spawn``) anywhere in the package (an AST scan of every call that
  starts a process; the scan is itself run over planted examples).
- Paths: solution sources like ``../../x`` or ``/abs`` are refused wherever sources are unpacked
  (the dataset's solution JSON, ``fibtui run --solution X.json``, a run's snapshot, the worker's
  own build, the Modal container's function body); workload safetensors paths stay inside the
  dataset root (``../``, absolute paths and symlinks leaving the root are refused).
- Secrets: Modal tokens and other ``*_TOKEN`` / ``*_SECRET`` variables planted in the environment
  never appear in any output, log, journal, record or archive of a local run, an in-process Modal
  run, a Modal plan, status, runs list or an archived run, even when a kernel tries to leak them.
  Every kind of secret name (tokens, secrets, passwords, API / access / private keys, credentials)
  is kept from a real kernel, from the worker ``fibtui ncu profile`` starts under (a stand-in) ncu,
  and from the host view's kernel.
"""

from __future__ import annotations

import ast
import json
import os
import struct
import subprocess
import sys
import tempfile
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
SPAWN = {
    "subprocess.run",
    "subprocess.Popen",
    "subprocess.call",
    "subprocess.check_call",
    "subprocess.check_output",
    "asyncio.create_subprocess_exec",
}
#: call targets that always go through a shell (or take a command string): never allowed
SHELL = {
    "os.system",
    "os.popen",
    "subprocess.getoutput",
    "subprocess.getstatusoutput",
    "asyncio.create_subprocess_shell",
    "os.execl",
    "os.execlp",
    "os.spawnl",
    "os.spawnlp",
}


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
        return node.func.attr in ("format", "join") and (
            _stringy(node.func.value) or node.func.attr == "format"
        )
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
            elif (
                isinstance(node, (ast.AugAssign, ast.AnnAssign))
                and isinstance(node.target, ast.Name)
                and node.value
            ):
                names.setdefault(node.target.id, []).append(node.value)
        out[id(fn)] = names
    return out


def process_calls(
    root: Path = PACKAGE, base: Path = REPO
) -> list[tuple[str, int, str, ast.Call, dict[str, list[ast.AST]]]]:
    """(file, line, target, call, the names assigned in the enclosing function and then in the
    module) of every process start in every ``*.py`` under ``root``. Targets are named as they
    would be without import aliases (``from subprocess import Popen as P`` -> subprocess.Popen)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        assigned = _assignments(tree)
        aliases = _import_aliases(tree)
        parents: dict[int, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                parents[id(child)] = node
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            target = _canonical(_dotted(node.func), aliases)
            if (
                target in SPAWN
                or target in SHELL
                or target in ARGV_AT
                or target.endswith(".git.execute")
            ):
                scope: ast.AST = node
                while not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
                    scope = parents[id(scope)]
                names = (
                    {**assigned[id(tree)], **assigned[id(scope)]}
                    if scope is not tree
                    else assigned[id(tree)]
                )
                found.append((str(path.relative_to(base)), node.lineno, target, node, names))
    return found


def _import_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> what it stands for: ``import subprocess as sp`` (sp -> subprocess), ``from os
    import execv`` (execv -> os.execv)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _canonical(target: str, aliases: dict[str, str]) -> str:
    head, _, rest = target.partition(".")
    if head in aliases:
        return aliases[head] + ("." + rest if rest else "")
    return target


# --------------------------------------------------------------------------------------------
# A shell started through an argument list: ["sh", "-c", ...], ["bash", "-lc", ...]
# --------------------------------------------------------------------------------------------

#: process starts whose program and arguments come as positional arguments: target -> (index of
#: the program path, index of the argv list, or None when the arguments are the remaining
#: positional ones)
ARGV_AT: dict[str, tuple[int | None, int | None]] = {
    "os.execv": (0, 1),
    "os.execve": (0, 1),
    "os.execvp": (0, 1),
    "os.execvpe": (0, 1),
    "os.spawnv": (1, 2),
    "os.spawnve": (1, 2),
    "os.spawnvp": (1, 2),
    "os.spawnvpe": (1, 2),
    "os.posix_spawn": (0, 1),
    "os.posix_spawnp": (0, 1),
    "pty.spawn": (None, 0),
    "os.execl": (0, None),
    "os.execle": (0, None),
    "os.execlp": (0, None),
    "os.execlpe": (0, None),
    "os.spawnl": (1, None),
    "os.spawnle": (1, None),
    "os.spawnlp": (1, None),
    "os.spawnlpe": (1, None),
    "asyncio.create_subprocess_exec": (None, None),
}
#: programs that run the string after -c as a command line
SHELLS = {
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "mksh",
    "pdksh",
    "ash",
    "csh",
    "tcsh",
    "fish",
    "rbash",
    "yash",
    "busybox",
    "pwsh",
    "powershell",
    "cmd",
    "cmd.exe",
}
#: programs that start the next word as a program (their own options and VAR=value words skipped)
WRAPPERS = {
    "env",
    "nohup",
    "nice",
    "sudo",
    "doas",
    "setsid",
    "stdbuf",
    "timeout",
    "time",
    "exec",
    "command",
    "xargs",
}
_UNKNOWN = object()


def _strings(
    node: ast.AST | None, names: dict[str, list[ast.AST]], depth: int = 0
) -> list[list[object]]:
    """The argument lists an expression can be, element by element: a string where it is one
    (a literal, a name assigned a literal, shutil.which("bash")), _UNKNOWN where it is not known."""
    if node is None or depth > 5:
        return [[_UNKNOWN]]
    if isinstance(node, (ast.List, ast.Tuple)):
        options: list[list[object]] = [[]]
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                parts = _strings(elt.value, names, depth + 1)
            else:
                parts = [[v] for v in _word(elt, names, depth + 1)]
            options = [o + p for o in options for p in parts][:64]
        return options
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return [
            a + b
            for a in _strings(node.left, names, depth + 1)
            for b in _strings(node.right, names, depth + 1)
        ][:64]
    if isinstance(node, ast.Name) and node.id in names:
        return [o for v in names[node.id] for o in _strings(v, names, depth + 1)][:64]
    if isinstance(node, ast.Call) and _dotted(node.func) in ("list", "tuple") and node.args:
        return _strings(node.args[0], names, depth + 1)
    return [[_UNKNOWN]]


def _word(node: ast.AST, names: dict[str, list[ast.AST]], depth: int) -> list[object]:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
        return [node.value.decode() if isinstance(node.value, bytes) else node.value]
    if isinstance(node, ast.Name) and node.id in names and depth <= 5:
        return [w for v in names[node.id] for w in _word(v, names, depth + 1)] or [_UNKNOWN]
    if isinstance(node, ast.Call) and _dotted(node.func) in ("shutil.which", "which") and node.args:
        return _word(node.args[0], names, depth + 1)
    return [_UNKNOWN]


def _is_shell_command(words: list[object]) -> bool:
    """``[wrapper...] shell ... -c ...``: a shell told to run a command line."""
    i = 0
    while i < len(words) and isinstance(words[i], str) and os.path.basename(words[i]) in WRAPPERS:
        i += 1
        while (
            i < len(words)
            and isinstance(words[i], str)
            and (words[i].startswith("-") or "=" in words[i] or words[i].isdigit())
        ):
            i += 1
    if i >= len(words) or not isinstance(words[i], str):
        return False
    program = os.path.basename(words[i].replace("\\", "/")).lower()
    if program not in SHELLS:
        return False
    rest = [w for w in words[i + 1 :] if isinstance(w, str)]
    if program == "busybox":
        return bool(rest) and rest[0] in SHELLS and _is_shell_command(rest)
    if program in ("cmd", "cmd.exe"):
        return any(w.lower() in ("/c", "/k") for w in rest)
    if program in ("pwsh", "powershell"):
        return any(w.lower() in ("-c", "-command", "-encodedcommand", "-e") for w in rest)
    # -c alone or among other one-letter options (-lc, -ec, -xc), before or after them
    return any(w.startswith("-") and not w.startswith("--") and "c" in w[1:] for w in rest)


def shell_argv_problems(calls) -> list[str]:
    """Every process start whose argument list starts a shell with -c (also through env, sudo...)."""
    problems = []
    for where, line, target, call, assigned in calls:
        if target in ARGV_AT:
            path_at, argv_at = ARGV_AT[target]
            pos = call.args
            if argv_at is None:  # the l-forms and create_subprocess_exec: the arguments follow
                start = 0 if path_at is None else path_at + 1
                candidates = _strings(ast.List(elts=list(pos[start:])), assigned)
            else:
                candidates = _strings(pos[argv_at] if len(pos) > argv_at else None, assigned)
            if path_at is not None and len(pos) > path_at:
                # the program actually started is the path: argv[0] is only its name
                candidates += [
                    [p, *c[1:]] for p in _word(pos[path_at], assigned, 0) for c in candidates
                ]
        elif target in SPAWN or target.endswith(".git.execute"):
            cmd = (
                call.args[0]
                if call.args
                else next((k.value for k in call.keywords if k.arg in ("args", "command")), None)
            )
            candidates = _strings(cmd, assigned)
            exe = next((k.value for k in call.keywords if k.arg == "executable"), None)
            if exe is not None:
                candidates += [[p, *c[1:]] for p in _word(exe, assigned, 0) for c in candidates]
        else:
            continue
        if any(_is_shell_command(c) for c in candidates):
            problems.append(
                f"{where}:{line}: {target} starts a shell with -c from an argument list"
            )
    return problems


def test_no_shell_and_no_string_commands_anywhere_in_the_package() -> None:
    calls = process_calls()
    assert len(calls) >= 6, (
        "the scan must see the package's process starts (ncu, nvidia-smi, workers, parity...)"
    )
    problems = []
    for where, line, target, call, assigned in calls:
        if target in SHELL:
            problems.append(f"{where}:{line}: {target} goes through a shell")
        for kw in call.keywords:
            if kw.arg == "shell" and not (
                isinstance(kw.value, ast.Constant) and kw.value.value is False
            ):
                problems.append(f"{where}:{line}: {target}(shell=...)")
        if target in ARGV_AT:
            continue  # a program path and separate arguments: a string there is no command line
        cmd = (
            call.args[0]
            if call.args
            else next((k.value for k in call.keywords if k.arg in ("args", "command")), None)
        )
        values = [cmd]
        if isinstance(cmd, ast.Name):
            values = assigned.get(cmd.id, []) or [cmd]
        for v in values:
            if _stringy(v):
                problems.append(f"{where}:{line}: {target} gets a command built as a string")
    assert not problems, "\n".join(problems)


def test_no_shell_started_through_an_argument_list_anywhere_in_the_package() -> None:
    """["sh", "-c", line] is shell=True by another name: no process start in fibtui/ builds one."""
    calls = process_calls()
    assert len(calls) >= 6
    problems = shell_argv_problems(calls)
    assert not problems, "\n".join(problems)


def test_no_shell_true_in_any_call_at_all() -> None:
    """GitPython and friends take shell= too: nowhere in the package."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                for kw in node.keywords:
                    if kw.arg == "shell" and not (
                        isinstance(kw.value, ast.Constant) and kw.value.value is False
                    ):
                        offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not offenders


def test_the_scanner_catches_what_it_must() -> None:
    """The scan's own check: string commands and shells are flagged."""
    bad = [
        "subprocess.run('ls ' + d, shell=True)",
        "subprocess.run(f'git {x}')",
        "os.system('rm -rf ' + p)",
        "cmd = 'ncu ' + rep\nsubprocess.Popen(cmd)",
    ]
    for src in bad:
        tree = ast.parse(src)
        assigned = _assignments(tree)[id(tree)]
        call = next(
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and _dotted(n.func) in SPAWN | SHELL
        )
        cmd = call.args[0]
        values = assigned.get(cmd.id, []) if isinstance(cmd, ast.Name) else [cmd]
        flagged = (
            _dotted(call.func) in SHELL
            or any(k.arg == "shell" for k in call.keywords)
            or any(_stringy(v) for v in values)
        )
        assert flagged, src


#: each of these, alone in a module, must be flagged by the argument-list shell scan
SHELL_IN_ARGV = [
    "import subprocess\nsubprocess.run(['sh', '-c', 'ls ' + d])",
    "import subprocess\nsubprocess.Popen(['/bin/bash', '-c', cmd], stdout=subprocess.PIPE)",
    "import subprocess\nsubprocess.check_output(('zsh', '-c', cmd))",
    "import subprocess\nsubprocess.call(args=['dash', '-c', cmd])",
    "import subprocess\nsubprocess.run(['bash', '-lc', cmd])",
    "import subprocess\nsubprocess.run(['/usr/bin/env', 'FOO=1', 'bash', '-e', '-c', cmd])",
    "import subprocess\nsubprocess.run(['sudo', '-n', 'sh', '-c', cmd])",
    "import subprocess\nsubprocess.run(['busybox', 'sh', '-c', cmd])",
    "import subprocess\nimport shutil\nsubprocess.run([shutil.which('bash'), '-c', cmd])",
    "import subprocess\ndef f(line):\n    argv = ['sh', '-c', line]\n    return subprocess.run(argv, check=True)",
    "import subprocess\nSHELL_PROG = '/bin/sh'\ndef f(line):\n    return subprocess.run([SHELL_PROG, '-c', line])",
    "import subprocess\nPREFIX = ['bash', '-c']\ndef f(line):\n    subprocess.run([*PREFIX, line])",
    "import subprocess\ndef f(line):\n    subprocess.run(['bash'] + ['-c', line])",
    "import subprocess\nsubprocess.run(['anything', '-c', cmd], executable='/bin/sh')",
    "from subprocess import Popen as P\nP(['sh', '-c', cmd])",
    "import subprocess as sp\nsp.check_call(['ksh', '-c', cmd])",
    "import os\nos.execv('/bin/sh', ['sh', '-c', cmd])",
    "import os\nos.execvp('bash', ['bash', '-c', cmd])",
    "import os\nos.execve('/bin/sh', ['whatever', '-c', cmd], env)",
    "from os import execvpe\nexecvpe('sh', ['sh', '-c', cmd], env)",
    "import os\nos.spawnv(os.P_WAIT, '/bin/bash', ['bash', '-c', cmd])",
    "import os\nos.posix_spawnp('sh', ['sh', '-c', cmd], os.environ)",
    "import os\nos.execlp('sh', 'sh', '-c', cmd)",
    "import pty\npty.spawn(['bash', '-c', cmd])",
    "import asyncio\nasync def f(cmd):\n    await asyncio.create_subprocess_exec('sh', '-c', cmd)",
    "import asyncio\nasync def f(cmd):\n    await asyncio.create_subprocess_exec(*['bash', '-c', cmd])",
]
#: and none of these: programs that are no shell, or a shell given a script file
NO_SHELL_IN_ARGV = [
    "import subprocess, sys\nsubprocess.run([sys.executable, '-m', 'fibtui.worker', 'serve'])",
    "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'print(1)'])",
    "import subprocess\nsubprocess.run(['git', '-c', 'user.name=t', 'commit', '-m', 'x'])",
    "import subprocess\nsubprocess.run(['ncu', '--import', rep, '--csv', '--page', 'details'])",
    "import subprocess\nsubprocess.run(['bash', 'scripts/test'])",
    "import subprocess\nsubprocess.run(['nvidia-smi', '--query-gpu=name', '--format=csv'])",
    "import os\nos.execv(sys.executable, [sys.executable, '-m', 'fibtui'])",
    "import os, sys\nos.execve(sys.executable, [sys.executable, '-m', 'fibtui', '--workspace', root], env)",
]


@pytest.mark.parametrize("src", SHELL_IN_ARGV)
def test_the_scanner_catches_a_shell_started_through_an_argument_list(
    tmp_path: Path, src: str
) -> None:
    """The scan run over a temporary package holding one planted shell start flags exactly it."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "planted.py").write_text(src + "\n")
    (pkg / "clean.py").write_text(
        "import subprocess, sys\nsubprocess.run([sys.executable, '-V'])\n"
    )
    calls = process_calls(pkg, tmp_path)
    problems = shell_argv_problems(calls)
    assert len(problems) == 1 and problems[0].startswith("pkg/planted.py:"), (src, problems)


def test_the_scanner_leaves_argument_lists_without_a_shell_alone(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    for i, src in enumerate(NO_SHELL_IN_ARGV):
        (pkg / f"ok_{i}.py").write_text(src + "\n")
    calls = process_calls(pkg, tmp_path)
    assert len(calls) == len(NO_SHELL_IN_ARGV)
    assert shell_argv_problems(calls) == []


# --------------------------------------------------------------------------------------------
# Solution sources: no way out of the folder they are unpacked into
# --------------------------------------------------------------------------------------------

EVIL_PATHS = [
    "../../x.py",
    "../x.py",
    "a/../../x.py",
    "/tmp/fibtui_evil.py",
    "\\\\server\\share\\x.py",
    "C:/x.py",
    ".",
    "",
    "a\x00b.py",
    "sub/../../../x.py",
]
GOOD_KERNEL = "def scale(x, alpha, y):\n    y.copy_(x * alpha)\n"


def evil_solution(path: str) -> dict:
    return {
        "name": "evil",
        "definition": "tiny_scale",
        "author": "x",
        "spec": {"language": "python", "entry_point": "kernel.py::scale"},
        "sources": [
            {"path": "kernel.py", "content": GOOD_KERNEL},
            {"path": path, "content": "PWNED = 1\n"},
        ],
    }


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
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fibtui",
            "run",
            "--backend",
            "interpreter",
            "--workloads",
            "all",
            "--solution",
            str(sol),
            "--workspace",
            str(root),
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        timeout=120,
    )
    assert (
        proc.returncode == 2
        and len(proc.stderr.splitlines()) == 1
        and "sources[1].path" in proc.stderr
    )
    assert not (root / "optimize_ops" / "runs").exists()
    assert not Path(path).exists() and not (root.parent / "pwned.py").exists()


def test_a_tampered_snapshot_or_header_cannot_point_outside_the_run(tmp_path: Path) -> None:
    """A run's solution.json snapshot edited to hold '../' sources, and a journal header whose
    snapshot folder climbs out: resume refuses both with one line."""
    from fibtui.core.workspace import open_workspace
    from fibtui.services.runs import RunOptions, prepare_resume, prepare_run

    root = make_tiny_workspace(tmp_path / "ws")
    ws = open_workspace(root)
    prepared = prepare_run(ws, RunOptions(backend="interpreter", workloads="all"))
    ref = prepared.header.solutions[0]
    snap = prepared.folder / ref.snapshot / "solution.json"
    good = snap.read_text()
    snap.write_text(
        json.dumps({**json.loads(good), "sources": evil_solution("../../../x.py")["sources"]})
    )
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


@pytest.mark.parametrize(
    "path", ["../x.py", "/tmp/fibtui_abs.py", "a/../../x.py", "C:/x.py", ".", "a\x00.py"]
)
def test_the_worker_build_refuses_paths_out(tmp_path: Path, path: str) -> None:
    from fibtui.worker.build import BuildError, build

    work = tmp_path / "work"
    sol = evil_solution(path)
    with pytest.raises(BuildError):
        build("candidate-0", sol, work)
    written = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert all(w.startswith("work/") for w in written)
    assert not Path("/tmp/fibtui_abs.py").exists()


def test_the_modal_container_refuses_paths_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Modal function's body (run here, as Function.local() would) builds nothing outside its
    work folder: the bad solution is a COMPILE_ERROR, the good one in the same slice PASSES."""
    pytest.importorskip("modal")
    from fibtui.runners.modal_app import run_slice

    monkeypatch.chdir(tmp_path)
    workload = {
        "uuid": "wl-0",
        "axes": {"n": 1},
        "inputs": {"x": {"type": "random"}, "alpha": {"type": "scalar", "value": 1.5}},
    }
    good = {
        "id": "candidate-0",
        "name": "good",
        "spec": {"language": "python", "entry_point": "kernel.py::scale"},
        "sources": [{"path": "kernel.py", "content": GOOD_KERNEL}],
    }
    evil = {
        "id": "candidate-1",
        **{
            k: v
            for k, v in evil_solution("../../../escaped.py").items()
            if k in ("name", "spec", "sources")
        },
    }
    request = {
        "config": {
            "backend": "interpreter",
            "device": "cpu",
            "correctness_trials": 1,
            "workdir": str(tmp_path / "w"),
            "cache_dir": str(tmp_path / "cache"),
            "plan": {"calls_per_block": 1, "blocks": 1, "warmup_calls": 0},
        },
        "definition": TINY_DEFINITION,
        "solutions": [good, evil],
        "jobs": [
            {
                "job_id": "0|wl-0",
                "workload": workload,
                "repeat": 0,
                "solutions": ["candidate-0", "candidate-1"],
            }
        ],
        "slice_id": 0,
    }
    out = run_slice(request)
    results = {r["solution_id"]: r for r in out["jobs"][0]["results"]}
    assert results["candidate-0"]["status"] == "PASSED"
    assert (
        results["candidate-1"]["status"] == "COMPILE_ERROR"
        and "leaves the solution folder" in results["candidate-1"]["error"]
    )
    assert not list(tmp_path.parent.glob("escaped.py")) and not (tmp_path / "escaped.py").exists()


# --------------------------------------------------------------------------------------------
# Safetensors inputs stay inside the dataset root
# --------------------------------------------------------------------------------------------


def write_safetensors(path: Path, key: str, values: list[float], shape: list[int]) -> None:
    data = struct.pack(f"<{len(values)}f", *values)
    header = json.dumps(
        {key: {"dtype": "F32", "shape": shape, "data_offsets": [0, len(data)]}}
    ).encode()
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
        workload = {
            "uuid": "u",
            "axes": {"n": 1},
            "inputs": {
                "x": {"type": "safetensors", "path": path, "tensor_key": "x"},
                "alpha": {"type": "scalar", "value": 1.0},
            },
        }
        return maker.make(workload, 0)

    assert float(make("blob/x.safetensors")[0].sum()) == 64.0
    assert (
        float(make("./blob/link_in.safetensors")[0].sum()) == 64.0
    )  # a link that stays inside is fine
    for bad in (
        "../outside/secret.safetensors",
        str(secret),
        "blob/link_out.safetensors",
        "blob/dir_out/secret.safetensors",
        "blob/../../outside/secret.safetensors",
    ):
        with pytest.raises(InputErrorW, match="leaves the dataset root"):
            make(bad)


# --------------------------------------------------------------------------------------------
# Secrets never land anywhere
# --------------------------------------------------------------------------------------------

LEAKER = PY_TEMPLATE.format(
    body=(
        "    found = {k: v for k, v in os.environ.items()\n"
        "             if any(w in k.upper() for w in ('TOKEN', 'SECRET', 'PASSW', 'KEY', 'CREDENTIAL'))}\n"
        "    print('ENV', dict(os.environ))\n"
        "    print('FOUND', found, file=sys.stderr)\n"
        "    if found:\n"
        "        raise RuntimeError('leak ' + ' '.join(found.values()))\n"
        "    y.copy_(x * alpha)"
    )
)


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
        # one of each other kind the scrubber knows (cloud keys, private keys, credential files)
        "OPENAI_API_KEY": f"sk-{uuidlib.uuid4().hex}",
        "AWS_ACCESS_KEY_ID": f"AKIA{uuidlib.uuid4().hex}",
        "GCP_PRIVATE_KEY": f"pk-{uuidlib.uuid4().hex}",
        "SOME_CREDENTIALS": f"cred-{uuidlib.uuid4().hex}",
        "minio_accesskey": f"mk-{uuidlib.uuid4().hex}",
    }
    env = dict(
        os.environ, PYTHONPATH=str(REPO), FIBTUI_CACHE_DIR=str(tmp_path / "cache"), **planted
    )
    env.pop("FIB_DATASET_PATH", None)
    outputs = []

    def fibtui(*argv: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [sys.executable, "-m", "fibtui", *argv, "--workspace", str(root)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            cwd=tmp_path,
        )
        outputs.append(proc.stdout + proc.stderr)
        assert proc.returncode in ok, (argv, proc.stderr[-2000:])
        return proc

    # a local run with a kernel that hunts for secrets (it finds none: workers never get them)
    local = json.loads(
        fibtui(
            "run",
            "--backend",
            "interpreter",
            "--workloads",
            "all",
            "--solution",
            str(leak_dir),
            "--json",
        ).stdout
    )
    assert local["summary"]["complete"], local["jobs"]
    # an in-process Modal run, a Modal plan, status, runs list, results, an archived run
    modal = json.loads(
        fibtui(
            "run", "--backend", "modal", "--modal-in-process", "--workloads", "all", "--json"
        ).stdout
    )
    assert modal["summary"]["complete"]
    fibtui("run", "--backend", "modal", "--plan")
    fibtui("run", "--backend", "modal", "--plan", "--json")
    fibtui("status", "--json")
    fibtui("runs", "list", "--json")
    run_json = root / "optimize_ops" / "runs" / local["run_id"] / "run.json"
    fibtui("results", "show", str(run_json), "--json")
    fibtui("archive", "--run-folder", str(run_json.parent), "--json", ok=(0, 1))
    fibtui(
        "run", "--resume", "no-such-run-" + planted["MODAL_TOKEN_SECRET"][:3], ok=(2,)
    )  # an error message
    logs = list((root / "optimize_ops").rglob("worker-*.log"))
    assert logs and any(
        b"ENV" in p.read_bytes() for p in logs
    )  # the kernel did print its environment
    texts = outputs + [
        p.read_text(errors="replace")
        for p in tmp_path.rglob("*")
        if p.is_file() and not p.is_symlink()
    ]
    for name, value in planted.items():
        hits = [t[:200] for t in texts if value in t]
        assert not hits, f"{name} leaked: {hits}"


def test_profiled_workers_and_parity_runs_get_no_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`fibtui ncu profile` and `fibtui parity` run the user's kernel too: same scrubbed environment."""
    import threading

    from fibtui.runners import ncu as ncu_runner
    from fibtui.runners import parity

    planted = {
        "MODAL_TOKEN_ID": "ak-planted",
        "MODAL_TOKEN_SECRET": "as-planted",
        "HF_TOKEN": "hf-planted",
        "SOME_API_KEY": "k-planted",
        "PATH": os.environ.get("PATH", ""),
    }
    for k, v in planted.items():
        monkeypatch.setenv(k, v)
    env = ncu_runner.worker_env()
    assert (
        not {"MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "HF_TOKEN", "SOME_API_KEY"} & set(env)
        and env["PATH"]
    )
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
    parity._run_logged(
        ["flashinfer-bench", "run"], tmp_path, tmp_path / "console.log", None, threading.Event(), 30
    )
    assert seen and not any(v.endswith("-planted") for v in seen.values())


# Every kind of secret name the scrubber knows, each planted under a name that ONLY that kind
# catches (checked below), so dropping any one alternative of the pattern fails a test.
SECRET_KINDS = {
    "TOKEN": ["GITHUB_TOKEN", "HF_TOKEN", "modal_token_id"],
    "SECRET": ["MY_SERVICE_SECRET", "CLIENT_SECRET_VALUE"],
    "PASSW": ["DB_PASSWORD", "PGPASSWORD", "MYSQL_PASSWD"],
    "API_?KEY": ["OPENAI_API_KEY", "SOME_APIKEY", "anthropic_api_key"],
    "ACCESS_?KEY": ["AWS_ACCESS_KEY_ID", "MINIO_ACCESSKEY", "R2_ACCESS_KEY"],
    "PRIVATE_?KEY": ["GCP_PRIVATE_KEY", "SSH_PRIVATEKEY", "JWT_PRIVATE_KEY_PEM"],
    "CREDENTIAL": ["SOME_CREDENTIALS", "GOOGLE_APPLICATION_CREDENTIALS", "aws_credential_file"],
}
SECRET_TABLE = [(kind, name) for kind, names in SECRET_KINDS.items() for name in names]


def test_each_planted_secret_name_is_caught_by_its_own_kind_only() -> None:
    """The table is honest: every name matches its kind and no other, so each kind is tested alone."""
    import re

    for kind, name in SECRET_TABLE:
        hits = [k for k in SECRET_KINDS if re.search(k, name, re.IGNORECASE)]
        assert hits == [kind], (name, hits)


SECRET_HUNTER = PY_TEMPLATE.format(
    body=(
        "    names = {names!r}\n"
        "    seen = sorted(k for k in os.environ if k in names or os.environ[k].startswith('planted-'))\n"
        "    print('ENV', dict(os.environ), file=sys.stderr)\n"
        "    if seen:\n"
        "        raise RuntimeError('the kernel sees ' + ' '.join(seen))\n"
        "    y.copy_(x * alpha)"
    )
)


def test_a_kernel_never_sees_any_kind_of_planted_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real interpreter run with one secret of every name in the table planted: the kernel looks
    for each by name and by value (its source holds the names, never the values) and finds none;
    no value lands in any file of the run, its logs or the workspace."""
    from fibtui.core.workspace import open_workspace
    from fibtui.services.runs import RunOptions, prepare_run

    planted = {name: f"planted-{uuidlib.uuid4().hex}" for _, name in SECRET_TABLE}
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    (root / "solution" / "triton" / "kernel.py").write_text(
        SECRET_HUNTER.format(names=sorted(planted))
    )
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    for name, value in planted.items():
        monkeypatch.setenv(name, value)
    prepared = prepare_run(open_workspace(root), RunOptions(backend="interpreter", workloads="all"))
    record = prepared.runner.run(lambda event: None).to_json()
    assert [j["status"] for j in record["jobs"]] == ["PASSED", "PASSED"], [
        j.get("error") for j in record["jobs"]
    ]
    logs = list(prepared.folder.rglob("*.log"))
    assert any(b"ENV" in p.read_bytes() for p in logs)  # the kernel did print what it saw
    texts = [
        p.read_text(errors="replace")
        for p in tmp_path.rglob("*")
        if p.is_file() and not p.is_symlink()
    ]
    for name, value in planted.items():
        assert not [t[:200] for t in texts if value in t], f"{name} leaked"


#: A stand-in ``ncu`` first on PATH. Profiling (``--export X``) records the environment it was
#: given (ncu hands it on to the profiled worker, which runs the user's kernel), writes a report and
#: exits 0 as ncu does; ``--import X --page P`` prints the demo's real exported page.
FAKE_NCU = r"""#!{python}
import json, os, pathlib, sys
args = sys.argv[1:]
with open(os.environ["FAKE_NCU_LOG"], "a") as fh:
    fh.write(json.dumps({{"args": args, "env": dict(os.environ)}}) + "\n")
pages = pathlib.Path({pages!r})
if "--import" in args:
    page, as_csv = args[args.index("--page") + 1], "--csv" in args
    sys.stdout.write((pages / ("demo_v1_b1_b64_" + page + (".csv" if as_csv else ".txt"))).read_text())
    sys.exit(0)
print("==PROF== Connected to process 4242 (" + " ".join(args[-6:]) + ")")
report = pathlib.Path(args[args.index("--export") + 1])
report.write_bytes(b"NCU-REP stand-in report")
print("==PROF== Report: " + str(report))
"""


def planted_secrets() -> dict[str, str]:
    """One secret of every kind in the table (the Modal pair as well), each value unique to this call."""
    return {
        name: f"planted-{uuidlib.uuid4().hex}"
        for name in [n for _, n in SECRET_TABLE] + ["MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"]
    }


def test_the_ncu_profile_verb_profiles_a_worker_that_gets_no_secrets(
    tmp_path: Path, demo_ws: Path
) -> None:
    """`fibtui ncu profile` end to end (the verb -> fibtui.runners.ncu -> ncu): the environment ncu
    hands to the profiled worker has every planted secret scrubbed, and nothing it writes or
    prints holds one."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "ncu"
    fake.write_text(
        FAKE_NCU.format(
            python=sys.executable, pages=str(REPO / "tests" / "fixtures" / "ncu" / "h200_demo")
        )
    )
    fake.chmod(0o755)
    calls_log = tmp_path / "ncu_calls.jsonl"
    planted = planted_secrets()
    env = dict(
        os.environ,
        **planted,
        PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
        PYTHONPATH=str(REPO),
        FAKE_NCU_LOG=str(calls_log),
        FIBTUI_CACHE_DIR=str(tmp_path / "cache"),
    )
    env.pop("FIB_DATASET_PATH", None)
    lines = (
        (demo_ws / "dataset" / "workloads" / "gdn" / "demo_gdn_decode_qk4_v8_d128_k_last.jsonl")
        .read_text()
        .splitlines()
    )
    uuid = json.loads(lines[0])["workload"]["uuid"]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fibtui",
            "ncu",
            "profile",
            "--workload",
            uuid,
            "--workspace",
            str(demo_ws),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["kernels"], "the report was read back"
    calls = [json.loads(line) for line in calls_log.read_text().splitlines()]
    profiling = [c for c in calls if "--export" in c["args"]]
    assert len(profiling) == 1 and len(calls) == 4  # one profile, three page exports
    args, seen = profiling[0]["args"], profiling[0]["env"]
    # it really is the worker's profile entry point that ncu starts, with this env
    assert args[-6:-1] == [sys.executable, "-m", "fibtui.worker", "profile", "--request"]
    # (lists built first: a failure names what leaked, never dumps the rest of the environment)
    leaked_names = sorted(set(planted) & set(seen))
    leaked_values = sorted(k for k, v in seen.items() if v in planted.values())
    assert not leaked_names, f"the profiled worker gets {leaked_names}"
    assert not leaked_values, f"the profiled worker gets planted values under {leaked_values}"
    assert seen["PATH"].startswith(str(bindir)) and seen["PYTHONPATH"].split(os.pathsep)[0] == str(
        REPO
    )
    texts = [proc.stdout, proc.stderr] + [
        p.read_text(errors="replace")
        for p in demo_ws.rglob("*")
        if p.is_file() and not p.is_symlink() and p.suffix != ".safetensors"
    ]
    for name, value in planted.items():
        assert not [t[:200] for t in texts if value in t], f"{name} leaked"


@pytest.mark.slow
def test_the_host_view_runs_a_kernel_that_gets_no_secrets(tmp_path: Path) -> None:
    """`fibtui ncu host` runs the user's kernel through the worker too: a kernel hunting for every
    planted secret (by name and value) finds none, so the host view completes."""
    planted = planted_secrets()
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,))
    (root / "solution" / "triton" / "kernel.py").write_text(
        SECRET_HUNTER.format(names=sorted(planted))
    )
    env = dict(
        os.environ, **planted, PYTHONPATH=str(REPO), FIBTUI_CACHE_DIR=str(tmp_path / "cache")
    )
    env.pop("FIB_DATASET_PATH", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fibtui",
            "ncu",
            "host",
            "--workload",
            "wl-000-n1",
            "--backend",
            "interpreter",
            "--calls",
            "1",
            "--json",
            "--workspace",
            str(root),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["workloads"][0]["uuid"] == "wl-000-n1"
    for name, value in planted.items():
        assert value not in proc.stdout + proc.stderr, f"{name} leaked"


#: what a kernel needs, passed on as it is (a scrubber that took these would break every run;
#: PYTHONPATH and CUDA_VISIBLE_DEVICES are set by the runner itself)
KEPT_NAMES = [
    "PATH",
    "HOME",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "TRITON_CACHE_DIR",
    "TORCH_CUDA_ARCH_LIST",
]


class _Spawned(Exception):
    """Raised by the fake Popen: the environment a process would have started with."""

    def __init__(self, argv, env) -> None:
        super().__init__(argv)
        self.argv = argv
        self.env = env


def _spawned_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start) -> dict[str, str]:
    """The ``env=`` the code under test hands to the process it starts (every process start in
    the package goes through subprocess.Popen, subprocess.run included)."""

    def fake_popen(argv, *args, **kwargs):
        raise _Spawned(argv, kwargs.get("env"))

    monkeypatch.setattr(subprocess, "Popen", fake_popen)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # a worker's scratch folder lands here
    with pytest.raises(_Spawned) as exc:
        start()
    assert exc.value.env is not None, (
        f"{exc.value.argv}: started with the whole environment (env=None)"
    )
    return exc.value.env


def _local_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    from fibtui.runners.local import WorkerPool, WorkerProcess

    pool = WorkerPool(["cpu"], {}, interpreter=True)
    return _spawned_env(
        tmp_path, monkeypatch, lambda: WorkerProcess(pool.env_for(0), tmp_path / "worker-0.log")
    )


def _gpu_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    from fibtui.runners.local import WorkerPool, WorkerProcess

    pool = WorkerPool(["cuda:0", "cuda:1"], {}, extra_env={"FIBTUI_EXTRA": "1"})
    return _spawned_env(
        tmp_path, monkeypatch, lambda: WorkerProcess(pool.env_for(1), tmp_path / "worker-1.log")
    )


def _host_view(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    from fibtui.core.workspace import open_workspace
    from fibtui.runners.hostview import host_view

    ws = open_workspace(make_tiny_workspace(tmp_path / "ws"))
    return _spawned_env(
        tmp_path, monkeypatch, lambda: host_view(ws, ["wl-000-n1"], backend="interpreter")
    )


def _build_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    from types import SimpleNamespace

    from fibtui.runners.buildcheck import check_builds

    monkeypatch.setenv("FIBTUI_BUILD_CACHE_DIR", str(tmp_path / "builds"))
    sol = SimpleNamespace(
        name="s",
        language="python",
        entry_point="kernel.py::scale",
        dps=True,
        binding=None,
        sources=[{"path": "kernel.py", "content": GOOD_KERNEL}],
    )
    return _spawned_env(tmp_path, monkeypatch, lambda: check_builds([sol], gpu=False))


def _parity_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    import threading

    from fibtui.runners import parity

    return _spawned_env(
        tmp_path,
        monkeypatch,
        lambda: parity._run_logged(
            ["flashinfer-bench", "run"],
            tmp_path,
            tmp_path / "console.log",
            None,
            threading.Event(),
            30,
        ),
    )


#: every other place the package starts a process that runs (or builds) the user's kernel
KERNEL_ENVIRONMENTS = {
    "local worker (interpreter)": _local_worker,
    "local worker (GPU slot)": _gpu_worker,
    "host view": _host_view,
    "build check": _build_check,
    "parity run": _parity_run,
}


@pytest.mark.parametrize("where", list(KERNEL_ENVIRONMENTS))
def test_no_process_that_runs_a_kernel_gets_any_kind_of_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Every kind in the table planted at once: the environment each process start hands over has
    none of them, under its name or another, and keeps what kernels need."""
    planted = planted_secrets()
    for name, value in planted.items():
        monkeypatch.setenv(name, value)
    for name in KEPT_NAMES:
        monkeypatch.setenv(name, os.environ.get(name) or f"/kept/{name.lower()}")
    env = KERNEL_ENVIRONMENTS[where](tmp_path, monkeypatch)
    leaked = sorted(f"{name} ({kind})" for kind, name in SECRET_TABLE if name in env)
    assert not leaked, f"{where} gets {leaked}"
    assert not sorted(k for k, v in env.items() if v in planted.values()), (
        f"{where}: a planted value under another name"
    )
    lost = [k for k in KEPT_NAMES if env.get(k) != os.environ[k]]
    assert not lost, f"{where} lost what kernels need: {lost}"
