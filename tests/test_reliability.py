"""Reliability: nothing lost, nothing crashes.

- Kill at any moment: a `python -m fibtui run` process SIGKILLed at 20+ points of an interpreter
  sweep (from start-up to mid-journal-write) always resumes to a complete run, every job exactly
  once; torn journal tails fuzzed with hypothesis; the TUI killed mid-gate shows the run as
  interrupted (CLI and app) and `fibtui run --resume` finishes it.
- Hostile kernels (raise, os._exit, segfault, out of memory, endless loop, megabytes on stdout,
  writing into the journal) are contained to their job with a clear status; the app stays
  responsive while one runs.
- The archive: atomic writes only, never an overwrite (also under concurrent writers), reject
  archives the rejected kernel before restoring, a full disk fails the step with one line and
  leaves existing files whole.
- Load: a 400-job interpreter sweep with the TUI attached: every job once, the app answers keys
  (scripts/bench/bench_load.py measures the 2,000-job version); the Runs pane's cost per finished job
  (handler and table flushes) is bounded against an idle message-dispatch baseline of the same app.

Processes this module starts carry FIBTUI_TEST_MARK in their environment; the worker processes
they spawn inherit it, which is how a test finds (by pid) the workers a killed runner left
behind and checks that they go away by themselves.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid as uuidlib
from collections import Counter
from pathlib import Path

import pytest

from fibtui.core.runs import list_runs, read_journal
from fibtui.core.workspace import open_workspace
from fibtui.runners.events import LogLine
from fibtui.services.runs import RunOptions, prepare_resume, prepare_run
from tests.runner_helpers import PY_TEMPLATE, make_candidate, make_tiny_workspace

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


# --------------------------------------------------------------------------------------------
# Helpers: processes by mark, kernels
# --------------------------------------------------------------------------------------------


def marked_pids(mark: str) -> list[int]:
    """Live processes whose environment carries FIBTUI_TEST_MARK=mark (ours: started by this test)."""
    needle = f"FIBTUI_TEST_MARK={mark}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def wait_gone(mark: str, timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = marked_pids(mark)
        if not left:
            return []
        time.sleep(0.1)
    return marked_pids(mark)


def kill_marked(mark: str) -> None:
    for pid in marked_pids(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def kernel(body: str) -> str:
    return PY_TEMPLATE.format(body=body)


def add_kernel(root: Path, name: str, body: str) -> Path:
    folder = root / "candidates" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.py").write_text(kernel(body))
    return folder


HOSTILE = {
    # a C-level crash: the worker process dies with SIGSEGV
    "segfault": "    import ctypes\n    ctypes.string_at(0)",
    # allocate until the worker's address-space cap (FIBTUI_WORKER_MEMORY_MB) says no
    "hog": "    import torch\n    keep = []\n    while True:\n        keep.append(torch.ones(2**25, dtype=torch.uint8))",
    # a Python loop that never returns: the job timeout stops it
    "spin": "    while True:\n        pass",
    # 8 MB on stdout (from Python) and 1 MB on fd 1 directly (as C code would), then a correct result
    "flood": (
        "    sys.stdout.write('y' * 8_000_000)\n    sys.stdout.flush()\n    os.write(1, b'z' * 1_000_000)\n"
        "    y.copy_(x * alpha)"
    ),
    # where does a kernel run? (its error message says)
    "where": "    raise RuntimeError('cwd=' + os.getcwd())",
}


def run_in_process(root: Path, **opts):
    ws = open_workspace(root)
    prepared = prepare_run(ws, RunOptions(backend="interpreter", workloads="all", **opts))
    events: list[object] = []
    record = prepared.runner.run(events.append).to_json()
    return record, events, prepared


def valid_result_keys(journal: Path) -> Counter:
    """Result lines that parse, per job key (a torn line does not count)."""
    keys: Counter = Counter()
    for raw in journal.read_bytes().split(b"\n"):
        try:
            obj = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(obj, dict) and obj.get("kind") == "result":
            keys[f"{obj['repeat']}|{obj['role']}|{obj['solution']}|{obj['uuid']}"] += 1
    return keys


# --------------------------------------------------------------------------------------------
# 2. Hostile kernels
# --------------------------------------------------------------------------------------------


def test_hostile_kernels_are_contained_to_their_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """segfault, out of memory, an endless loop, a stdout flood and a cwd probe in one paired run
    beside a good kernel: each gets its own clear status, the good one PASSES every time."""
    mark = uuidlib.uuid4().hex
    monkeypatch.setenv("FIBTUI_TEST_MARK", mark)
    monkeypatch.setenv("FIBTUI_WORKER_MEMORY_MB", "768")  # the cap the hog runs into
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,))
    sols = [str(add_kernel(root, name, body)) for name, body in HOSTILE.items()]
    base = make_candidate(root, "base_py", "good_py")
    record, events, prepared = run_in_process(
        root, solutions=sols, baseline=str(base), job_timeout_s=4
    )
    status = {(j["solution"], j["uuid"]): j["status"] for j in record["jobs"]}
    error = {(j["solution"], j["uuid"]): j["error"] or "" for j in record["jobs"]}
    assert record["summary"]["done"] == record["summary"]["total"] == 6
    for u in ("wl-000-n1",):
        assert status[("base_py", u)] == "PASSED"
        assert status[("segfault", u)] == "RUNTIME_ERROR" and "SIGSEGV" in error[("segfault", u)]
        assert status[("hog", u)] == "RUNTIME_ERROR" and "allocate" in error[("hog", u)]
        assert status[("spin", u)] == "TIMEOUT"
        assert status[("flood", u)] == "PASSED"
        assert status[("where", u)] == "RUNTIME_ERROR"
        cwd = Path(error[("where", u)].split("cwd=", 1)[1].strip())
        # the kernel runs outside the run folder and the workspace: relative writes cannot reach them
        assert prepared.folder.resolve() not in (cwd, *cwd.parents)
        assert root.resolve() not in (cwd, *cwd.parents)
    logs = b"".join(p.read_bytes() for p in prepared.folder.glob("worker-*.log"))
    # the flood went to the log, not the results, cut to its first and last 64 KiB
    assert b"y" * 60_000 in logs and b"z" * 60_000 in logs and b"y" * 100_000 not in logs
    assert b"bytes of this job's output left out" in logs
    contents = read_journal(prepared.folder / "journal.jsonl")
    assert not contents.corrupt_lines and not contents.duplicate_lines
    assert wait_gone(mark) == []  # every worker was stopped, none left behind


JOURNAL_FORGER = """    import json, glob
    y.copy_(x * alpha)  # its own result is right: only the journal writes are hostile
    try:
        journal = sorted(glob.glob(os.environ['FIBTUI_TEST_JOURNAL_GLOB']))[-1]
        lines = open(journal).read().splitlines()
        mode = os.environ['FIBTUI_TEST_FORGE']
        if mode == 'forge':  # a PASSED line with a dream latency for every job, itself included
            header = json.loads(lines[0])
            with open(journal, 'a') as fh:
                for job in header['jobs']:
                    fh.write(json.dumps({'kind': 'result', 'status': 'PASSED', 'latency_ms': 1e-9, **job}) + '\\n')
        elif mode == 'truncate':  # throw away every finished job
            open(journal, 'w').write(lines[0] + '\\n')
        else:  # replace it wholesale
            with open(journal, 'w') as fh:
                fh.write('garbage\\n' * 3)
    except (OSError, ValueError, IndexError):
        pass"""


@pytest.mark.parametrize("mode", ["forge", "truncate", "replace"])
def test_a_kernel_writing_into_the_journal_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """A kernel that knows where the journal is (the test tells it) forges PASSED lines, truncates
    the journal, or replaces it: the runner notices, restores the journal from what it wrote, and
    records the real results only."""
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2, 3))
    monkeypatch.setenv(
        "FIBTUI_TEST_JOURNAL_GLOB", str(root / "optimize_ops" / "runs" / "*" / "journal.jsonl")
    )
    monkeypatch.setenv("FIBTUI_TEST_FORGE", mode)
    forger = add_kernel(root, "forger", JOURNAL_FORGER)
    base = make_candidate(root, "base_py", "good_py")
    record, events, prepared = run_in_process(root, solutions=[str(forger)], baseline=str(base))
    journal = prepared.folder / "journal.jsonl"
    contents = read_journal(journal)
    assert len(contents.results) == 6 and record["summary"]["passed"] == 6
    assert all(r.latency_ms is not None and r.latency_ms > 1e-6 for r in contents.results.values())
    assert not contents.corrupt_lines and not contents.duplicate_lines
    assert set(valid_result_keys(journal).values()) == {1}  # one line per job, nothing forged left
    warnings = [e.text for e in events if isinstance(e, LogLine) and "journal" in e.text]
    assert warnings and "restored" in warnings[0]


# --------------------------------------------------------------------------------------------
# 1. Kill at any moment
# --------------------------------------------------------------------------------------------

#: Imported by every Python process of the kill test (it is on their PYTHONPATH as sitecustomize):
#: with FIBTUI_TEST_TEAR_AT=N, the runner's Nth result append writes part of its line, then
#: sleeps until the test SIGKILLs it: a real process killed in the middle of a journal write.
TEAR_HOOK = """
import os
_at = os.environ.get("FIBTUI_TEST_TEAR_AT")
if _at:
    import time
    import fibtui.core.fsio as _fsio

    _real = _fsio.append_line
    _seen = [0]

    def _torn_append(path, line):
        if str(path).endswith("journal.jsonl") and '"kind":"result"' in line:
            _seen[0] += 1
            if _seen[0] == int(_at):
                data = (line + "\\n").encode()
                cut = max(1, min(len(data) - 1, int(len(data) * float(os.environ["FIBTUI_TEST_TEAR_FRACTION"]))))
                with open(path, "rb") as fh:  # like append_line: start on a fresh line
                    size = fh.seek(0, 2)
                    fresh = size == 0 or (fh.seek(size - 1) == size - 1 and fh.read(1) == b"\\n")
                fd = os.open(path, os.O_WRONLY | os.O_APPEND)
                os.write(fd, (b"" if fresh else b"\\n") + data[:cut])
                os.fsync(fd)
                os.close(fd)
                time.sleep(3600)
        return _real(path, line)

    _fsio.append_line = _torn_append
"""

SLOW_GOOD = "    time.sleep(0.02)\n    y.copy_(x * alpha)"


def result_snapshot(journal: Path) -> dict[str, dict]:
    return {k: r.to_json() for k, r in read_journal(journal).results.items()}


def header_complete(journal: Path) -> bool:
    try:
        data = journal.read_bytes()
    except FileNotFoundError:
        return False
    return b"\n" in data and data.split(b"\n", 1)[0].startswith(b"{")


def test_sigkill_at_random_points_always_resumes_to_a_complete_run(tmp_path: Path) -> None:
    import random

    rng = random.Random(1129)
    mark = uuidlib.uuid4().hex
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=tuple(range(1, 17)))
    (root / "solution" / "triton" / "kernel.py").write_text(kernel(SLOW_GOOD))
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(TEAR_HOOK)
    base_env = dict(
        os.environ,
        PYTHONPATH=f"{hook}{os.pathsep}{REPO}",
        FIBTUI_TEST_MARK=mark,
        FIBTUI_CACHE_DIR=str(tmp_path / "cache"),
    )
    base_env.pop("FIB_DATASET_PATH", None)
    total = 16 * 3
    plan = (
        [("time", rng.uniform(0.0, 1.6)) for _ in range(7)]
        + [("count", rng.randint(1, 2)) for _ in range(10)]
        + [("torn", rng.randint(1, 2)) for _ in range(7)]
    )
    rng.shuffle(plan)
    plan.insert(0, ("time", 0.05))  # killed while Python starts: not even a run folder yet
    runs_dir = root / "optimize_ops" / "runs"
    run_id: str | None = None
    accepted: dict[str, dict] = {}
    torn_kills = 0
    phases: Counter = Counter()

    def journal_path() -> Path | None:
        if run_id is not None:
            return runs_dir / run_id / "journal.jsonl"
        found = sorted(runs_dir.glob("*/journal.jsonl")) if runs_dir.is_dir() else []
        fresh = [p for p in found if p.parent.name not in abandoned]
        return fresh[-1] if fresh else None

    abandoned: set[str] = set()
    try:
        for i, (kind, arg) in enumerate(plan):
            argv = (
                ["run", "--backend", "interpreter", "--workloads", "all", "--repeats", "3"]
                if run_id is None
                else ["run", "--resume", run_id]
            )
            env = dict(base_env)
            if kind == "torn":
                env["FIBTUI_TEST_TEAR_AT"] = str(arg)
                env["FIBTUI_TEST_TEAR_FRACTION"] = f"{rng.uniform(0.05, 0.95):.3f}"
            before = len(accepted)
            jp0 = journal_path()
            size0 = jp0.stat().st_size if jp0 is not None and jp0.is_file() else 0
            with open(tmp_path / f"cycle{i}.log", "wb") as log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "fibtui", *argv, "--workspace", str(root)],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            deadline = time.monotonic() + 60
            t0 = time.monotonic()
            while proc.poll() is None and time.monotonic() < deadline:
                jp = journal_path()
                if kind == "time" and time.monotonic() - t0 >= arg:
                    break
                if kind == "count" and jp is not None and header_complete(jp):
                    done = sum(1 for _ in valid_result_keys(jp).elements())
                    if done >= before + arg:
                        if not phases[
                            "seen running"
                        ]:  # while its runner lives, the run is "running"
                            states = {r.run_id: r.state for r in list_runs(root / "optimize_ops")}
                            phases["seen running"] += states.get(jp.parent.name) == "running"
                        time.sleep(rng.uniform(0, 0.03))
                        break
                if kind == "torn" and jp is not None and jp.is_file():
                    data = jp.read_bytes()
                    if len(data) > size0 and not data.endswith(b"\n"):
                        break
                time.sleep(0.005)
            assert proc.poll() is None, (
                f"cycle {i} ({kind}) ended by itself: {(tmp_path / f'cycle{i}.log').read_text()[-800:]}"
            )
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            jp = journal_path()
            if jp is None or not header_complete(jp):
                phases["before the run's header"] += 1
                if jp is not None:
                    abandoned.add(jp.parent.name)
                continue
            run_id = jp.parent.name
            if kind == "torn":
                torn_kills += 1
                phases["mid-journal-write"] += 1
                assert not jp.read_bytes().endswith(b"\n")
            else:
                phases[
                    "mid-run"
                    if len(read_journal(jp).results) > before
                    else "start-up (no job finished)"
                ] += 1
            contents = read_journal(jp)
            now = {k: r.to_json() for k, r in contents.results.items()}
            # nothing finished is ever lost or rewritten; nothing is there twice; no torn line accepted
            assert all(now.get(k) == v for k, v in accepted.items()), (
                f"cycle {i}: a finished result changed or vanished"
            )
            assert not contents.duplicate_lines
            assert len(contents.corrupt_lines) >= torn_kills
            assert set(valid_result_keys(jp).values()) <= {1}
            assert len(now) < total, "the plan has more kills than jobs: make the sweep longer"
            listing = {r.run_id: r for r in list_runs(root / "optimize_ops")}
            assert listing[run_id].state == "interrupted"
            accepted = now
        kills = len(plan)
        print(
            f"kill points: {kills}; phases: {dict(phases)}; results before the last resume: {len(accepted)}/{total}"
        )
        assert (
            kills >= 20
            and torn_kills >= 5
            and phases["mid-run"] >= 5
            and phases["start-up (no job finished)"] >= 2
        ), phases
        assert phases["seen running"] == 1
        # the last resume, not killed, finishes the run
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "fibtui",
                "run",
                "--resume",
                run_id,
                "--json",
                "--workspace",
                str(root),
            ],
            env=base_env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        record = json.loads(proc.stdout)
        assert record["state"] == "complete" and record["summary"]["passed"] == total
        jp = runs_dir / run_id / "journal.jsonl"
        assert (
            valid_result_keys(jp) == Counter({k: 1 for k in valid_result_keys(jp)})
            and len(valid_result_keys(jp)) == total
        )
        final = result_snapshot(jp)
        assert all(final[k] == v for k, v in accepted.items())
        listed = json.loads(
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "fibtui",
                    "runs",
                    "list",
                    "--json",
                    "--workspace",
                    str(root),
                ],
                env=base_env,
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout
        )["runs"]
        mine = next(r for r in listed if r["run_id"] == run_id)
        assert mine["state"] == "complete" and mine["jobs_done"] == mine["jobs_total"] == total
        assert {"run_id", "state", "jobs_done", "jobs_total", "backend", "started"} <= set(mine)
        # workers of killed runners do not outlive them
        assert wait_gone(mark) == []
    finally:
        kill_marked(mark)


def _fresh_run(folder: Path, n_jobs: int = 6):
    """A run folder with a header of ``n_jobs`` jobs (one solution), written through the API."""
    from fibtui.core.runs import JobSpec, Journal, RunHeader, SolutionRef

    folder.mkdir(parents=True)
    header = RunHeader(
        run_id=folder.name,
        definition="tiny_scale",
        backend="interpreter",
        timing_kind="cpu-interpreter",
        l2_policy="n/a",
        solutions=[SolutionRef("k", "candidate", "snapshots/candidate-k")],
        jobs=[JobSpec(f"wl-{i}", {"n": i + 1}, "k", "candidate", 0) for i in range(n_jobs)],
        repeats=1,
        workload_selection="all",
        started="2026-01-01T00:00:00+00:00",
    )
    Journal(folder).write_header(header)
    return header


def _record_jobs(folder: Path, header, keys: set[str] | None = None, latency: float = 0.5) -> None:
    from fibtui.runners.journaling import JobRecorder, SolutionIds

    ids = SolutionIds(header, {ref.key: {} for ref in header.solutions})
    recorder = JobRecorder(folder, header, ids.ref_of)
    done = recorder.resume()
    for i, job in enumerate(header.jobs):
        if job.key in done or (keys is not None and job.key not in keys):
            continue
        recorder.record(
            "candidate-0",
            job.uuid,
            job.repeat,
            1,
            {"status": "PASSED", "latency_ms": latency + i / 100},
            lambda e: None,
        )
    if keys is None:
        recorder.finish(False, lambda e: None)


def test_resume_after_any_torn_tail(tmp_path_factory) -> None:
    """Crash damage anywhere in a journal (cut at any byte, plus a partial line of junk): the lines
    written whole before the cut are kept as they were, no partial line is ever accepted, and a
    resume ends with every job exactly once."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(
        max_examples=int(os.environ.get("FIBTUI_FUZZ_EXAMPLES", "60")),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(
        cut=st.integers(0, 10**6),
        before_newline=st.booleans(),
        junk=st.one_of(
            st.just(b""),
            st.binary(max_size=30),
            st.sampled_from(
                [
                    b'{"kind":"result","uuid":"wl-5"',
                    b'{"kind":',
                    b"\xff\xfe",
                    b'{"kind":"end"',
                    b"\x00\x00",
                ]
            ),
        ),
    )
    def check(cut: int, before_newline: bool, junk: bytes) -> None:
        folder = tmp_path_factory.mktemp("torn") / "run"
        header = _fresh_run(folder)
        _record_jobs(folder, header, keys={j.key for j in header.jobs[:4]})
        journal = folder / "journal.jsonl"
        data = journal.read_bytes()
        cut_at = cut % (len(data) + 1)
        if before_newline:  # the crash lost only a line's newline: the line itself is whole
            ends = [i for i, b in enumerate(data) if b == 0x0A]
            cut_at = ends[cut % len(ends)]
            junk = b""
        damaged = data[:cut_at] + junk.replace(b"\n", b"")
        journal.write_bytes(damaged)
        pieces = damaged.split(b"\n")
        whole = [line for line in pieces[:-1] if line]  # lines that ended with a newline
        try:  # a last line that lacks only its newline is whole too
            if isinstance(json.loads(pieces[-1]), dict):
                whole.append(pieces[-1])
        except (ValueError, UnicodeDecodeError):
            pass
        if not whole:
            with pytest.raises(Exception) as exc:
                read_journal(journal)
            assert type(exc.value).__name__ == "InputError"  # no header: the run never started
            return
        before = read_journal(journal)
        intact = {
            json.loads(line)["uuid"]
            for line in whole[1:]
            if json.loads(line).get("kind") == "result"
        }
        assert {
            r.uuid for r in before.results.values()
        } == intact  # every whole line, and nothing else
        _record_jobs(folder, header)
        after = read_journal(journal)
        assert len(after.results) == 6 and not after.duplicate_lines
        assert all(after.results[k].to_json() == r.to_json() for k, r in before.results.items())
        assert set(valid_result_keys(journal).values()) == {1}
        assert after.end is not None and after.end["state"] == "finished"

    check()


class PtyApp:
    """``python -m fibtui --workspace WS`` in a pseudo-terminal (120x40), its screen bytes drained by
    a thread; the child leads its own session, so its process group is its pid."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        import fcntl
        import pty
        import struct
        import termios
        import threading

        self.buf = bytearray()
        self.lock = threading.Lock()
        pid, fd = pty.fork()
        if pid == 0:  # the child: size the terminal, then become the app
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
            os.execve(
                sys.executable, [sys.executable, "-m", "fibtui", "--workspace", str(root)], env
            )
        self.pid, self.fd = pid, fd
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            with self.lock:
                self.buf += chunk

    def wait_for(self, text: bytes, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if text in self.buf:
                    return
            time.sleep(0.02)
        raise AssertionError(f"{text!r} never appeared on the screen")

    def wait_for_new(self, text: bytes, since: int, timeout: float = 60.0) -> None:
        """Wait for ``text`` in what the terminal received after byte ``since``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if self.buf.find(text, since) >= 0:
                    return
            time.sleep(0.002)
        raise AssertionError(f"{text!r} never appeared on the screen")

    def press(self, key: bytes) -> None:
        os.write(self.fd, key)

    def kill(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)
        os.close(self.fd)


async def test_the_tui_killed_mid_run_shows_it_interrupted_and_resume_finishes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from textual.widgets import DataTable

    from fibtui.ui.app import make_app
    from fibtui.ui.panes.runs import RunsPane

    mark = uuidlib.uuid4().hex
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2, 3, 4, 5, 6))
    (root / "solution" / "triton" / "kernel.py").write_text(
        kernel("    time.sleep(0.3)\n    y.copy_(x * alpha)")
    )
    env = dict(
        os.environ,
        TERM="xterm-256color",
        COLUMNS="120",
        LINES="40",
        PYTHONPATH=str(REPO),
        FIBTUI_CONFIG_DIR=str(tmp_path / "config"),
        FIBTUI_CACHE_DIR=str(tmp_path / "cache"),
        FIBTUI_TEST_MARK=mark,
    )
    env.pop("FIB_DATASET_PATH", None)
    app_proc = PtyApp(root, env)
    try:
        app_proc.wait_for(b"Regimes")
        app_proc.press(b"3")
        app_proc.wait_for(b"g starts a representative gate")
        app_proc.press(b"g")  # no reference repos in this workspace: no recon-note question
        runs_dir = root / "optimize_ops" / "runs"
        deadline = time.monotonic() + 90
        journal = None
        while time.monotonic() < deadline:
            found = list(runs_dir.glob("*/journal.jsonl")) if runs_dir.is_dir() else []
            if found and sum(valid_result_keys(found[0]).values()) >= 1:
                journal = found[0]
                break
            time.sleep(0.02)
        assert journal is not None, "the gate never finished a job"
    finally:
        app_proc.kill()  # SIGKILL to the whole process group: the app and its runner thread
    run_id = journal.parent.name
    cli_env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
    listed = json.loads(
        subprocess.run(
            [sys.executable, "-m", "fibtui", "runs", "list", "--json", "--workspace", str(root)],
            env=cli_env,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    )["runs"]
    mine = next(r for r in listed if r["run_id"] == run_id)
    assert mine["state"] == "interrupted" and mine["backend"] == "interpreter" and mine["started"]
    assert 1 <= mine["jobs_done"] < mine["jobs_total"]
    # reopened, the app lists it as interrupted
    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(tmp_path / "config"))
    app = make_app(open_workspace(root))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("3")
        table = app.query_one(RunsPane).query_one("#runs-list", DataTable)
        row = table.get_row(run_id)
        assert (
            str(row[1]) == "interrupted"
            and str(row[2]) == f"{mine['jobs_done']}/{mine['jobs_total']}"
        )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fibtui",
            "run",
            "--resume",
            run_id,
            "--json",
            "--workspace",
            str(root),
        ],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads(proc.stdout)
    assert record["state"] == "complete" and record["summary"]["done"] == mine["jobs_total"]
    assert (
        set(valid_result_keys(journal).values()) == {1}
        and len(valid_result_keys(journal)) == mine["jobs_total"]
    )
    assert wait_gone(mark) == []


async def timed_key(pilot, key: str) -> float:
    """Seconds from a key press to the repaint it causes (Pilot: the key is handled, then the
    screen is refreshed)."""
    t0 = time.monotonic()
    await pilot.press(key)
    await pilot.pause()
    return time.monotonic() - t0


async def test_the_app_stays_responsive_while_a_hostile_kernel_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workspace's kernel floods stdout, stalls, then segfaults the worker, on every workload
    of the gate: pane keys keep answering throughout, and each job ends RUNTIME_ERROR."""
    from textual.widgets import TabbedContent

    from fibtui.runners.events import RunFinished
    from fibtui.ui import messages
    from fibtui.ui.app import make_app

    mark = uuidlib.uuid4().hex
    monkeypatch.setenv("FIBTUI_TEST_MARK", mark)
    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(tmp_path / "config"))
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    (root / "solution" / "triton" / "kernel.py").write_text(
        kernel(
            # the stall keeps the gate going long enough for the >= 10 timed keys below even on a
            # loaded machine (with 1 s it ended after exactly 10 keys when alone, fewer under -n 2)
            "    sys.stdout.write('x' * 2_000_000)\n    sys.stdout.flush()\n    time.sleep(2.5)\n"
            "    import ctypes\n    ctypes.string_at(0)"
        )
    )
    events: list = []
    app = make_app(open_workspace(root))
    app.run_control.note_acknowledged = True
    latencies: list[float] = []
    async with app.run_test(size=(120, 40), message_hook=events.append) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("g")
        tabs = app.query_one("#main-tabs", TabbedContent)
        deadline = time.monotonic() + 120

        def finished() -> list:
            return [
                m.event
                for m in events
                if isinstance(m, messages.RunEvent) and isinstance(m.event, RunFinished)
            ]

        keys = ["1", "2", "4", "6", "3"]
        i = 0
        while not finished():
            assert time.monotonic() < deadline, "the gate never finished"
            key = keys[i % len(keys)]
            latencies.append(await timed_key(pilot, key))
            assert (
                tabs.active
                == {"1": "recon", "2": "regimes", "3": "runs", "4": "ncu", "6": "history"}[key]
            )
            i += 1
        record = finished()[0].record
    statuses = {j.status for j in record.jobs}
    assert statuses == {"RUNTIME_ERROR"} and all("SIGSEGV" in (j.error or "") for j in record.jobs)
    print(
        f"key-to-repaint while the hostile kernel ran: n={len(latencies)} max {max(latencies) * 1000:.0f} ms"
    )
    assert len(latencies) >= 10
    assert max(latencies) < 2.0, f"a key took {max(latencies):.2f} s while the kernel ran"
    assert wait_gone(mark) == []


# --------------------------------------------------------------------------------------------
# 4. No data loss in the archive
# --------------------------------------------------------------------------------------------

#: Every raw (non-atomic) write in the package, and why it is allowed. Records (journals, run.json,
#: settings, archive entries, round files, the checked-in kernel on restore) are written only
#: through fibtui.core.fsio: temp file + fsync + rename, or one fsynced line per append.
RAW_WRITES_ALLOWED = {
    ("fibtui/core/fsio.py", "_write_via_temp"): "the atomic writer itself (fills the temp file)",
    (
        "fibtui/core/demo.py",
        "create_demo_workspace",
    ): "creates a brand-new demo folder (nothing to lose)",
    (
        "fibtui/runners/local.py",
        "_attach",
    ): "a worker's log, opened for append (logs, not records)",
    ("fibtui/runners/local.py", "switch_log"): "a worker's log, opened for append",
    (
        "fibtui/runners/service/client.py",
        "__init__",
    ): "the stdin pipe of a worker the worker service handed over (a pipe, not a file)",
    (
        "fibtui/runners/service/server.py",
        "_take_back",
    ): "the stdin pipe of a worker given back to the worker service (a pipe, not a file)",
    (
        "fibtui/runners/parity.py",
        "_run_logged",
    ): "flashinfer-bench's console log, appended as it runs",
    (
        "fibtui/runners/parity.py",
        "prepare_dataset_dir",
    ): "a scratch dataset folder made for one parity run",
    (
        "fibtui/worker/build_job.py",
        "write_sources",
    ): "the worker's private build folder (a temp folder)",
    (
        "fibtui/runners/modal_app.py",
        "run",
    ): "a Modal container's request file for its child worker, in the container's temp folder",
    (
        "fibtui/runners/modal_app.py",
        "profile_slice",
    ): "a Modal container's request file for ncu's child process, in the container's temp folder",
    ("fibtui/worker/protocol.py", "claim_stdout"): "the worker's own stdout pipe",
    (
        "fibtui/worker/native.py",
        "_compile",
    ): "the build cache: sources for the compiler, the marker via temp + rename",
    (
        "fibtui/worker/native.py",
        "_locked",
    ): "the build cache's lock file, opened for append (never written)",
    ("fibtui/worker/native.py", "_write_log"): "the compiler's log in the build cache",
    (
        "fibtui/runners/buildcheck.py",
        "check_builds",
    ): "the request file in a temp folder of its own",
}


def raw_write_sites() -> set[tuple[str, str]]:
    """(file, function) of every open() for writing, write_text/write_bytes and shutil copy."""
    import ast

    sites = set()
    for path in sorted((REPO / "fibtui").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        owner: dict[int, str] = {}
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    owner[id(node)] = fn.name
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            raw = False
            if name in ("open", "fdopen"):
                mode = (
                    node.args[1]
                    if len(node.args) > 1
                    else next((k.value for k in node.keywords if k.arg == "mode"), None)
                )
                raw = (
                    isinstance(mode, ast.Constant)
                    and isinstance(mode.value, str)
                    and any(c in mode.value for c in "wax+")
                )
            elif name in (
                "write_text",
                "write_bytes",
                "copyfile",
                "copy",
                "copy2",
                "copytree",
                "copyfileobj",
            ):
                module = (
                    func.value.id
                    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                    else None
                )
                raw = not (
                    (module == "shutil" and name == "copyfileobj" and path.name == "fsio.py")
                    or module == "copy"
                )  # copy.copy: an object, not a file
            if raw:
                sites.add((path.relative_to(REPO).as_posix(), owner.get(id(node), "<module>")))
    return sites


def test_every_record_is_written_atomically() -> None:
    sites = raw_write_sites()
    unexplained = sorted(sites - set(RAW_WRITES_ALLOWED))
    assert not unexplained, (
        f"raw writes outside fibtui.core.fsio (use atomic_write_* / atomic_copy_file): {unexplained}"
    )
    assert ("fibtui/core/fsio.py", "_write_via_temp") in sites  # the scan sees writes at all
    stale = sorted(set(RAW_WRITES_ALLOWED) - sites)
    assert not stale, f"allowed raw writes that no longer exist (drop them from the list): {stale}"
    for module in (
        "archive/",
        "runs.py",
        "settings.py",
        "plan.py",
        "recon.py",
        "stats/",
        "submission.py",
    ):
        assert not any(f.startswith(f"fibtui/core/{module}") for f, _ in sites), module


def test_archiving_never_overwrites_under_random_collisions(tmp_path_factory) -> None:
    """Random archive names (many the same, some already taken as ``_runN``), archived by racing
    threads: every file lands exactly once under its own name, nothing existing is touched."""
    import threading

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from fibtui.services.archive import archive_file

    names = st.sampled_from(
        ["a.json", "a.json", "a.json", "b.ncu-rep", "a", "a_run2.json", "x.tar.gz", "run", "r.log"]
    )

    @settings(max_examples=int(os.environ.get("FIBTUI_FUZZ_EXAMPLES", "25")), deadline=None)
    @given(
        batch=st.lists(names, min_size=1, max_size=24),
        taken=st.lists(names, max_size=4),
        threads=st.integers(1, 8),
    )
    def check(batch: list[str], taken: list[str], threads: int) -> None:
        root = tmp_path_factory.mktemp("arch")
        bench = root / "archive" / "benchmarks"
        bench.mkdir(parents=True)
        existing = {}
        for i, name in enumerate(dict.fromkeys(taken)):
            (bench / name).write_text(f"existing {i}")
            existing[name] = f"existing {i}"
        sources = []
        for i, name in enumerate(batch):
            src = root / "src" / str(i) / name
            src.parent.mkdir(parents=True)
            src.write_text(f"payload {i}")
            sources.append(src)
        chunks = [sources[k::threads] for k in range(threads)]
        errors: list[BaseException] = []

        def work(chunk: list[Path]) -> None:
            try:
                for src in chunk:
                    archive_file(root / "archive", src)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        ts = [threading.Thread(target=work, args=(c,)) for c in chunks]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors
        contents = Counter(p.read_text() for p in bench.iterdir() if p.is_file())
        assert all(contents[f"payload {i}"] == 1 for i in range(len(batch)))
        assert all((bench / n).read_text() == text for n, text in existing.items())
        assert sum(contents.values()) == len(batch) + len(existing)
        assert not [
            p for p in bench.iterdir() if p.name.startswith(".")
        ]  # no temp file left behind

    check()


def test_concurrent_archiving_processes_never_overwrite(tmp_path: Path) -> None:
    """Four processes archive 15 files each under the same three names at the same time."""
    code = (
        "import sys; from pathlib import Path; from fibtui.services.archive import archive_file\n"
        "root, me = Path(sys.argv[1]), sys.argv[2]\n"
        "for i in range(15):\n"
        "    src = root / 'src' / f'{me}-{i}.json'\n"
        "    src.parent.mkdir(parents=True, exist_ok=True)\n"
        "    src.write_text(f'{me}-{i}')\n"
        "    archive_file(root / 'archive', src, name=['a.json', 'b.json', 'a'][i % 3])\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(tmp_path), f"p{k}"], env=env)
        for k in range(4)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    files = [p for p in (tmp_path / "archive" / "benchmarks").iterdir()]
    assert sorted(p.read_text() for p in files) == sorted(
        f"p{k}-{i}" for k in range(4) for i in range(15)
    )


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def test_reject_archives_the_rejected_kernel_before_restoring(tmp_path: Path) -> None:
    """A real git workspace: the edited kernel is gated against the committed one, then `fibtui
    reject` archives the run's candidate snapshot and the edited kernel, then restores HEAD's."""
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2), kernel="good_py")
    (root / ".gitignore").write_text("optimize_ops/runs/\n.fibtui/\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "the previous best")
    kernel_file = root / "solution" / "triton" / "kernel.py"
    committed = kernel_file.read_text()
    edited = committed.replace("y.copy_(x * alpha)", "y.copy_(x * alpha * 1.0)  # v3 idea")
    kernel_file.write_text(edited)
    (root / "solution" / "triton" / "helper.py").write_text("# added by the candidate\n")
    base = tmp_path / "base"
    base.mkdir()
    (base / "kernel.py").write_text(committed)
    env = dict(os.environ, PYTHONPATH=str(REPO), FIBTUI_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("FIB_DATASET_PATH", None)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "fibtui",
            "run",
            "--backend",
            "interpreter",
            "--workloads",
            "all",
            "--baseline",
            str(base),
            "--json",
            "--workspace",
            str(root),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    proc = subprocess.run(
        [sys.executable, "-m", "fibtui", "reject", "--json", "--workspace", str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (
        kernel_file.read_text() == committed
        and not (root / "solution" / "triton" / "helper.py").exists()
    )
    kept = [p for p in (root / "optimize_ops").rglob("kernel.py") if p.read_text() == edited]
    assert any("_workspace" in str(p) for p in kept), "the edited workspace kernel was archived"
    assert any((p.parent / "helper.py").is_file() for p in kept if "_workspace" in str(p))
    rounds = (root / "optimize_ops" / "docs" / "rounds.jsonl").read_text()
    assert '"decision": "rejected"' in rounds


def test_reject_archives_first_even_when_the_restore_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The order matters: when restoring blows up, the rejected kernel is already in the archive."""
    from fibtui.services import archive
    from fibtui.services.archive import decide

    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,), kernel="good_py")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "best")
    src = root / "solution" / "triton"
    (src / "kernel.py").write_text("# edited\n" + (src / "kernel.py").read_text())
    seen: list[list[Path]] = []

    def failing_restore(*args, **kwargs):
        seen.append(list((root / "optimize_ops").rglob("kernel.py")))
        raise OSError("the disk went away")

    monkeypatch.setattr(decide, "restore_kernel", failing_restore)  # what reject calls
    with pytest.raises(OSError):
        archive.reject(
            None,
            workspace_root=root,
            source_dir=src,
            archive_root=root / "optimize_ops",
            language="triton",
            candidate_name="v3_x_y",
        )
    assert seen and any(p.read_text().startswith("# edited") for p in seen[0])


class FullDiskOS:
    """``os`` for fibtui.core.fsio on a disk that takes ``room`` more writes: the next one writes
    half its bytes, then fails with ENOSPC (as a filling disk does)."""

    def __init__(self, room: int) -> None:
        self.room = room

    def __getattr__(self, name: str):
        return getattr(os, name)

    @staticmethod
    def _full() -> OSError:
        import errno

        return OSError(errno.ENOSPC, "No space left on device")

    def write(self, fd: int, data) -> int:
        if self.room > 0:
            self.room -= 1
            return os.write(fd, data)
        os.write(fd, bytes(data[: max(1, len(data) // 2)]))
        raise self._full()

    def fdopen(self, fd: int, mode: str = "r", *args, **kwargs):
        fh = os.fdopen(fd, mode, *args, **kwargs)
        outer = self

        class Guarded:
            def __getattr__(self, name: str):
                return getattr(fh, name)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                fh.close()

            def write(self, data):
                if outer.room > 0:
                    outer.room -= 1
                    return fh.write(data)
                fh.write(bytes(data[: max(1, len(data) // 2)]))
                raise outer._full()

        return Guarded()


def one_line_failure(argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    from tests.test_malformed_corpus import run_cli_in_process

    code, _, err = run_cli_in_process(argv, monkeypatch, tmp_path)
    assert code == 1, (code, err)
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "No space left on device" in lines[0] and "nothing there was changed" in lines[0]
    return lines[0]


def snapshot_tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_a_full_disk_fails_each_step_with_one_line_and_truncates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Settings, archive entries and the run journal on a disk that fills up (a patched writer):
    one line, exit 1, every existing file byte for byte as it was, no half-made archive entry."""
    from fibtui.core import fsio
    from fibtui.core.workspace import open_workspace as open_ws

    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2, 3, 4), kernel="good_py")
    (root / "fibtui.toml").write_text("# mine\n[regimes]\npinned = []\n")
    result_file = tmp_path / "retained_run.json"
    result_file.write_text(
        json.dumps(
            {"results": {"tiny_scale": {"wl-000-n1": {"status": "PASSED", "latency_ms": 0.1}}}}
        )
    )
    ws = str(root)
    # a finished run to archive later, and everything as it is now
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    first = prepare_run(open_ws(root), RunOptions(backend="interpreter", workloads="all"))
    first.runner.run(lambda e: None)
    before = snapshot_tree(root)

    monkeypatch.setattr(fsio, "os", FullDiskOS(room=0))
    line = one_line_failure(
        ["regimes", "--pin", "wl-001-n2", "--workspace", ws], tmp_path, monkeypatch
    )
    assert "fibtui.toml" in line
    one_line_failure(
        ["archive", "--file", str(result_file), "--workspace", ws], tmp_path, monkeypatch
    )
    one_line_failure(
        ["archive", "--run-folder", str(first.folder), "--workspace", ws], tmp_path, monkeypatch
    )
    assert snapshot_tree(root) == before
    assert not [p for p in root.rglob("*") if p.name.startswith(".") and ".tmp" in p.name]

    # a run whose journal fills up after the header and two results: it stops, resumable
    monkeypatch.setattr(fsio, "os", os)
    second = prepare_run(open_ws(root), RunOptions(backend="interpreter", workloads="all"))
    journal = second.folder / "journal.jsonl"
    monkeypatch.setattr(fsio, "os", FullDiskOS(room=3))  # the lock file, then two results
    from fibtui.core.errors import WriteFailed

    with pytest.raises(WriteFailed) as exc:
        second.runner.run(lambda e: None)
    assert (
        f"fibtui run --resume {second.run_id}" in exc.value.one_line()
        and "\n" not in exc.value.one_line()
    )
    assert journal.read_bytes().endswith(b"\n")  # the refused append left no fragment
    kept = read_journal(journal)
    assert len(kept.results) == 2 and not kept.corrupt_lines
    assert snapshot_tree(first.folder) == {
        k[len(f"optimize_ops/runs/{first.run_id}/") :]: v
        for k, v in before.items()
        if k.startswith(f"optimize_ops/runs/{first.run_id}/")
    }
    monkeypatch.setattr(fsio, "os", os)
    record = prepare_resume(open_ws(root), second.run_id).runner.run(lambda e: None).to_json()
    assert record["state"] == "complete" and set(valid_result_keys(journal).values()) == {1}
    assert {k: v.to_json() for k, v in kept.results.items()} == {
        k: v.to_json() for k, v in read_journal(journal).results.items() if k in kept.results
    }


@pytest.fixture
def tiny_disk(tmp_path: Path):
    """A real 2 MiB tmpfs (root only, where mounting is allowed); skipped elsewhere."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_really_full_disk(tiny_disk: Path, tmp_path: Path) -> None:
    """The same on a real full file system (a 2 MiB tmpfs filled to the last block)."""
    root = make_tiny_workspace(tiny_disk / "ws", batch_sizes=(1, 2), kernel="good_py")
    (root / "fibtui.toml").write_text("# mine\n[regimes]\npinned = []\n")
    env = dict(os.environ, PYTHONPATH=str(REPO), FIBTUI_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("FIB_DATASET_PATH", None)
    big = tmp_path / "big.json"
    big.write_text(
        json.dumps(
            {
                "results": {
                    "tiny_scale": {
                        f"wl-{i}": {"status": "PASSED", "latency_ms": 0.1} for i in range(20000)
                    }
                }
            }
        )
    )
    with open(tiny_disk / "filler", "wb") as fh:  # fill the disk
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass
    before = snapshot_tree(root)
    for argv in (
        ["regimes", "--pin", "wl-001-n2"],
        ["archive", "--file", str(big)],
        ["run", "--backend", "interpreter", "--workloads", "all"],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "fibtui", *argv, "--workspace", str(root)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 1, (argv, proc.stderr[-1500:])
        assert len(proc.stderr.splitlines()) == 1 and "No space left on device" in proc.stderr, (
            argv,
            proc.stderr,
        )
    after = snapshot_tree(root)
    assert {k: v for k, v in after.items() if k in before} == before


# --------------------------------------------------------------------------------------------
# 6. Load: a long sweep with the TUI attached
# --------------------------------------------------------------------------------------------


#: pane key -> text that appears only once that pane is painted (the tiny workspace)
PANE_MARKERS = {
    b"1": b"never stash",
    b"2": b"varying",
    b"4": b"no NCU reports yet",
    b"6": b"round summary",
    b"3": b"CPU-interpreter timings",
}


def test_a_400_job_sweep_with_the_tui_attached(tmp_path: Path) -> None:
    """400 interpreter jobs streaming into the app in a real terminal: the sweep is started with the
    user's keys, pane keys are answered all along (key written -> the new pane's text on the
    terminal; a generous bound here, scripts/bench/bench_load.py reports the real 2,000-job figures),
    and every job lands in the journal exactly once."""
    n = 400
    mark = uuidlib.uuid4().hex
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=tuple(range(1, n + 1)))
    (root / "solution" / "triton" / "kernel.py").write_text(
        kernel("    time.sleep(0.005)\n    y.copy_(x * alpha)")
    )
    env = dict(
        os.environ,
        TERM="xterm-256color",
        COLUMNS="120",
        LINES="40",
        PYTHONPATH=str(REPO),
        FIBTUI_CONFIG_DIR=str(tmp_path / "config"),
        FIBTUI_CACHE_DIR=str(tmp_path / "cache"),
        FIBTUI_TEST_MARK=mark,
    )
    env.pop("FIB_DATASET_PATH", None)
    runs_dir = root / "optimize_ops" / "runs"

    def done() -> tuple[int, bool]:
        found = sorted(runs_dir.glob("*/journal.jsonl")) if runs_dir.is_dir() else []
        if not found:
            return 0, False
        data = found[-1].read_bytes()
        return data.count(b'"kind":"result"'), b'"kind": "end"' in data

    term = PtyApp(root, env)
    latencies: list[float] = []
    try:
        term.wait_for(b"Regimes")
        term.press(b"3")
        term.wait_for(b"g starts a representative gate")
        since = len(term.buf)
        term.press(b"s")  # no reference repos in this workspace: no recon-note question
        term.wait_for_new(b"Start it?", since)  # more than 40 workloads: it asks first
        term.press(b"y")
        deadline = time.monotonic() + 300
        while done()[0] == 0:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        order = [b"2", b"3", b"1", b"3", b"4", b"3", b"6", b"3"]
        i = 0
        while not done()[1]:
            assert time.monotonic() < deadline, "the sweep never finished"
            key = order[i % len(order)]
            i += 1
            since = len(term.buf)
            t0 = time.monotonic()
            term.press(key)
            term.wait_for_new(PANE_MARKERS[key], since, timeout=10)
            latencies.append(time.monotonic() - t0)
            time.sleep(0.3)  # the tab underline animation
        while not list(runs_dir.glob("*/run.json")):
            assert time.monotonic() < deadline, "run.json never written"
            time.sleep(0.02)
        term.press(b"q")
    finally:
        term.kill()
    record = json.loads(next(runs_dir.glob("*/run.json")).read_text())
    assert record["state"] == "complete" and record["summary"]["passed"] == n
    keys_seen = valid_result_keys(next(runs_dir.glob("*/journal.jsonl")))
    assert len(keys_seen) == n and set(keys_seen.values()) == {1}
    from fibtui.core.numbers import median, p95

    print(
        f"{n}-job sweep, key-to-repaint while streaming: n={len(latencies)} median "
        f"{median(latencies) * 1000:.0f} ms p95 {p95(latencies) * 1000:.0f} ms max {max(latencies) * 1000:.0f} ms"
    )
    assert len(latencies) >= 5
    assert max(latencies) < 3.0, f"a key took {max(latencies):.2f} s while the sweep streamed"
    assert wait_gone(mark) == []


async def test_the_runs_pane_spends_little_per_finished_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The UI cost of one finished job, measured against an idle baseline in the same app: the same
    200 JobFinished messages posted for a run that is not shown (dispatch only) versus for the shown
    run (the handler, plus every flush that brings the rows to the table). At the README's 150 jobs/s
    a job may cost the event loop well under 6.7 ms; here it may cost at most ten idle dispatches,
    never less than 1 ms nor more than 5 ms (a 15 ms stall per job fails on any machine)."""
    import asyncio
    import statistics

    from textual.widgets import DataTable

    from fibtui.core.runs import JobResult
    from fibtui.runners.events import JobFinished, RunStarted
    from fibtui.ui import messages
    from fibtui.ui.app import make_app
    from fibtui.ui.panes.runs import RunsPane

    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(tmp_path / "config"))
    n = 200
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=tuple(range(1, n + 1)))
    ws = open_workspace(root)
    prepared = prepare_run(ws, RunOptions(backend="interpreter", workloads="all"))
    header = prepared.header
    assert len(header.jobs) == n
    results = [
        JobResult(
            uuid=j.uuid,
            axes=j.axes,
            solution=j.solution,
            role=j.role,
            repeat=j.repeat,
            status="PASSED",
            latency_ms=0.01 + i * 1e-5,
            reference_latency_ms=0.02,
            timing={"kind": "cpu-interpreter"},
        )
        for i, j in enumerate(header.jobs)
    ]
    app = make_app(ws)
    app.run_control.note_acknowledged = True
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("3")
        pane = app.query_one(RunsPane)
        table = pane.query_one("#jobs-table", DataTable)
        in_flush: list[float] = []
        real_flush = pane.flush

        def timed_flush(force: bool = False) -> None:  # the pane's timers look flush up on the pane
            t0 = time.perf_counter()
            try:
                real_flush(force)
            finally:
                in_flush.append(time.perf_counter() - t0)

        pane.flush = timed_flush

        async def settle() -> None:
            await app.workers.wait_for_complete()
            await pilot.pause()
            while pane._dirty or pane._flush_scheduled:
                await asyncio.sleep(0.01)

        async def post_all(run_id: str) -> float:
            """Seconds until the pane has handled n JobFinished messages for ``run_id``."""
            handled = asyncio.Event()
            t0 = time.perf_counter()
            for i, r in enumerate(results):
                pane.post_message(
                    messages.RunEvent(run_id, JobFinished(r, i + 1, n, i + 1, 0, None))
                )
            pane.call_later(handled.set)  # queued behind them: set once every one was handled
            await handled.wait()
            return time.perf_counter() - t0

        per_job, idle_per_message = [], []
        for _ in range(3):
            pane.post_message(
                messages.RunEvent(header.run_id, RunStarted(header, str(prepared.folder), False, 0))
            )
            await settle()
            assert str(table.get_row_at(n - 1)[0]) == "QUEUED"
            idle = statistics.median(
                [await post_all("20000101-000000_not_shown") for _ in range(3)]
            )
            in_flush.clear()
            busy = await post_all(header.run_id)
            await settle()  # every row reached the table
            busy += sum(in_flush)
            assert str(table.get_row_at(n - 1)[0]) == "PASSED"
            per_job.append(max(0.0, busy - idle) / n)
            idle_per_message.append(idle / n)
    cost, idle_cost = min(per_job), statistics.median(idle_per_message)
    budget = min(max(10 * idle_cost, 0.001), 0.005)
    print(
        f"Runs pane: {cost * 1000:.3f} ms per finished job (idle dispatch {idle_cost * 1000:.3f} ms/message, "
        f"budget {budget * 1000:.2f} ms)"
    )
    assert cost < budget, (
        f"each finished job costs the UI {cost * 1000:.2f} ms, over {budget * 1000:.2f} ms "
        f"(idle dispatch: {idle_cost * 1000:.3f} ms per message)"
    )


def test_a_runs_lock_is_written_whole_but_not_fsynced_and_records_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock of a run means nothing after a crash (its pid is dead), so its write skips the
    fsync pair a record's write pays; it is still whole or absent (temp file and rename)."""
    from fibtui.core import fsio
    from fibtui.core.runs import lock_holder, take_lock

    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(fsio.os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    folder = tmp_path / "run"
    folder.mkdir()
    take_lock(folder)
    assert lock_holder(folder) == os.getpid()
    assert synced == []
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]
    fsio.atomic_write_text(folder / "run.json", "{}\n")
    assert len(synced) == 2  # the file and its folder
