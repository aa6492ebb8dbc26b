"""A suite of hostile candidates: each tries to win the gate without doing the work, and each is
caught with a named status that never promotes (docs/measurement.md, "A gate no candidate can
game"). They run through ``fibtui run`` on Triton's CPU interpreter, where their honest path is a
real Triton kernel (milliseconds) and their cheat a copy (microseconds). The attacks that need a
GPU (work hidden on a side stream, CUDA-graph replay, the CUPTI timer) are run by
``scripts/device/h200_gate.sh`` and ``scripts/device/h200_session_end.sh``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.runner_helpers import GOOD_TRITON, TINY, make_tiny_workspace

# every hostile kernel computes honestly through this Triton kernel when it does compute
HONEST = GOOD_TRITON.replace("def scale(x, alpha, y):", "def honest(x, alpha, y):")


def value_cache(miss: str, imports: str = "") -> str:
    """A kernel that keeps its answer per input value: an earlier call's saved output when the
    values come again, else ``miss`` (the body that computes into ``y``) and the answer saved."""
    return (
        f"\n{imports}import torch\n\n_saved = []\n\n\ndef scale(x, alpha, y):\n"
        "    for xs, a, ys in _saved:\n"
        "        if a == alpha and xs.shape == x.shape and torch.equal(xs, x):\n"
        "            y.copy_(ys)\n"
        "            return\n"
        f"{miss}"
        "    _saved.append((x.clone(), alpha, y.clone()))\n"
    )


ATTACKS: dict[str, str] = {
    # an answer saved per input buffer, copied back on every later call on that buffer
    "cache_by_address": """
_saved = {}


def scale(x, alpha, y):
    key = (x.data_ptr(), y.data_ptr())
    if key in _saved:
        y.copy_(_saved[key])
        return
    honest(x, alpha, y)
    _saved[key] = y.clone()
""",
    # an answer saved per input value, returned when the same values come again
    "cache_by_value": value_cache("    honest(x, alpha, y)\n"),
    # the same, with the work of a miss done on another thread: the calling thread only waits,
    # so its own CPU time would not show the work (the check counts the whole process's)
    "cache_by_value_threaded": value_cache(
        "    worker = threading.Thread(target=honest, args=(x, alpha, y))\n"
        "    worker.start()\n"
        "    worker.join()\n",
        imports="import threading\n",
    ),
    # computes, then scribbles over its input (a later call, or the baseline, would read it)
    "mutates_input": """
def scale(x, alpha, y):
    honest(x, alpha, y)
    x.mul_(0.5)
""",
    # honest on the correctness calls (new buffers), writes into its inputs once it sees the
    # same buffer again (timed calls)
    "mutates_when_timed": """
_seen = set()


def scale(x, alpha, y):
    honest(x, alpha, y)
    if x.data_ptr() in _seen:
        x.add_(1.0)
    _seen.add(x.data_ptr())
""",
    # does the work once, then nothing at all: its output buffer keeps the last answer
    "nothing_after_first": """
_calls = [0]


def scale(x, alpha, y):
    _calls[0] += 1
    if _calls[0] == 1:
        honest(x, alpha, y)
""",
    # an error message that would retitle the terminal, write the clipboard and clear the screen
    "escapes": """
def scale(x, alpha, y):
    raise RuntimeError("\\x1b]0;pwned\\x07\\x1b]52;c;SGVsbG8=\\x07\\x1b[2J\\x1b[31mboom")
""",
}

TAMPERING: dict[str, str] = {
    # the CPU timer's clock replaced by one that stands still
    "patches_the_clock": """
import time


def scale(x, alpha, y):
    time.perf_counter = lambda: 0.0
    honest(x, alpha, y)
""",
    # the median that turns samples into a latency, replaced by one that undoes itself once
    # the harness calls it (checked before the harness calls it)
    "patches_the_median_once": """
import statistics

_real = statistics.median


def _fake(values):
    statistics.median = _real
    return 1e-9


def scale(x, alpha, y):
    statistics.median = _fake
    honest(x, alpha, y)
""",
    # fibtui's own timer swapped for one that reports every call as free
    "patches_fibtui_timing": """
import sys


def scale(x, alpha, y):
    timing = sys.modules["fibtui.worker.timing"]
    timing.statistics = None
    timing.time_wall.__code__ = (lambda *a, **k: {}).__code__
    honest(x, alpha, y)
""",
    # a tracer that could rewrite the harness's frames
    "sets_a_tracer": """
import sys


def scale(x, alpha, y):
    sys.settrace(lambda *a: None)
    honest(x, alpha, y)
""",
}


def _candidate(root: Path, name: str, body: str) -> Path:
    folder = root / "candidates" / name
    (folder / "solution" / "triton").mkdir(parents=True)
    (folder / "solution" / "triton" / "kernel.py").write_text(HONEST + body)
    (folder / "config.toml").write_text(
        f'[solution]\nname = "{name}"\ndefinition = "{TINY}"\nauthor = "hostile"\n'
        '[build]\nlanguage = "triton"\nentry_point = "kernel.py::scale"\n'
    )
    return folder


def _run(capsys, root: Path, names: list[str], text: bool = False) -> tuple[int, dict | str, str]:
    args = ["run", "--workspace", str(root), "--backend", "interpreter", "--no-daemon"]
    args += ["--workloads", "all", "--baseline", str(root)]
    for name in names:
        args += ["--solution", str(root / "candidates" / name)]
    if not text:
        args.append("--json")
    code, out, err = run_cli(capsys, *args)
    return code, (out if text else json.loads(out)), err


def _by_candidate(record: dict) -> dict[str, dict]:
    return {j["solution"]: j for j in record["jobs"] if j["role"] == "candidate"}


def _verdicts(record: dict) -> set[str]:
    """Every candidate's verdict (a run of several candidates compares each with the baseline)."""
    comparison = record["comparison"]
    return {c["verdict"] for c in comparison.get("comparisons", [comparison])}


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(2,))
    for name, body in {**ATTACKS, **TAMPERING}.items():
        _candidate(root, name, body)
    return root


@pytest.mark.slow
def test_each_attack_is_caught_with_a_named_status_and_never_promotes(
    hostile: Path, capsys
) -> None:
    code, record, err = _run(capsys, hostile, list(ATTACKS))
    assert code == 1, err
    got = _by_candidate(record)
    expected = {
        "cache_by_address": ("INCORRECT_TIMED", "gave a wrong output"),
        "cache_by_value": ("CACHED_TIMING", "a call on unseen inputs"),
        "cache_by_value_threaded": ("CACHED_TIMING", "a call on unseen inputs"),
        "mutates_input": ("INPUT_MUTATED", "wrote into its input(s) x"),
        "mutates_when_timed": ("INPUT_MUTATED", "timed call"),
        "nothing_after_first": ("INCORRECT_TIMED", "gave a wrong output"),
        "escapes": ("RUNTIME_ERROR", "boom"),
    }
    for name, (status, words) in expected.items():
        assert got[name]["status"] == status, (name, got[name]["status"], got[name]["error"])
        assert words in got[name]["error"], (name, got[name]["error"])
    # the record keeps the message as it was (JSON escapes it); the baseline is untouched
    assert "\x1b]52;" in got["escapes"]["error"]
    assert {j["status"] for j in record["jobs"] if j["role"] == "baseline"} == {"PASSED"}
    assert "PROMOTE" not in _verdicts(record) and _verdicts(record) == {"INCORRECT"}


@pytest.mark.slow
def test_a_candidate_that_changes_the_harness_is_caught_before_the_harness_uses_it(
    hostile: Path, capsys
) -> None:
    code, record, err = _run(capsys, hostile, list(TAMPERING))
    assert code == 1, err
    got = _by_candidate(record)
    for name, words in {
        "patches_the_clock": "time.perf_counter was replaced",
        "patches_the_median_once": "statistics.median was replaced",
        "patches_fibtui_timing": "fibtui.worker.timing.time_wall's code was replaced",
        "sets_a_tracer": "a trace function was set",
    }.items():
        assert got[name]["status"] == "HARNESS_TAMPERED", (name, got[name])
        assert words in got[name]["error"], (name, got[name]["error"])
    # the baseline was measured in a worker no candidate had touched
    assert {j["status"] for j in record["jobs"] if j["role"] == "baseline"} == {"PASSED"}
    assert "PROMOTE" not in _verdicts(record) and _verdicts(record) == {"INCORRECT"}


@pytest.mark.slow
def test_escape_sequences_in_a_kernels_error_print_as_text(hostile: Path, capsys) -> None:
    code, out, _ = _run(capsys, hostile, ["escapes"], text=True)
    assert code == 1
    assert "boom" in out
    assert "\x1b]" not in out and "\x1b[2J" not in out and "\x07" not in out
    assert "␛]52;c;SGVsbG8=" in out  # shown, as text


def test_an_honest_kernel_passes_every_check(tmp_path: Path, capsys, monkeypatch) -> None:
    """The checks cost an honest kernel nothing: the tiny workspace's Triton kernel against
    itself passes, with the rotation and probes recorded in its timing."""
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(2,))
    _candidate(root, "honest_copy", "\n\ndef scale(x, alpha, y):\n    honest(x, alpha, y)\n")
    code, record, err = _run(capsys, root, ["honest_copy"])
    assert code == 0, err
    checks = [j["timing"]["checks"] for j in record["jobs"]]
    assert all(
        c["rotation"] and c["checked_calls"] == 2 and len(c["probe_ms"]) == 2 for c in checks
    )
