"""End to end in a real terminal: tmux starts `fibtui` on a workspace, send-keys switches panes,
starts an interpreter gate, waits for its verdict, quits; capture-pane checks what a person sees."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.runner_helpers import make_candidate, make_tiny_workspace

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


SOCKET = f"fibtui-e2e-{os.getpid()}"  # a private tmux server: nothing else's sessions or sizes


def tmux(*args: str, socket: str = SOCKET) -> str:
    return subprocess.run(
        ["tmux", "-L", socket, *args], capture_output=True, text=True, check=False
    ).stdout


def screen(session: str, socket: str = SOCKET) -> str:
    return tmux("capture-pane", "-t", session, "-p", socket=socket)


def wait_for(session: str, text: str, timeout: float = 120.0, socket: str = SOCKET) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = screen(session, socket)
        if text in shown:
            return shown
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared; the screen shows:\n{screen(session, socket)}")


def test_gate_in_a_real_terminal(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    # a promoted best solution: the gate is paired against it, so the Promotion pane judges the pair
    best = root / "optimize_ops" / "best_solution_triton"
    shutil.copytree(make_candidate(root, "best", "good_py"), best)
    # a reference repo: the first gate asks about the round's recon note
    subprocess.run(["git", "init", "-q", str(root / "reference" / "flashinfer")], check=True)
    session = f"fibtui-e2e-{os.getpid()}"
    env_cmd = (
        f"FIBTUI_CONFIG_DIR={tmp_path / 'config'} TERM=xterm-256color "
        f"{sys.executable} -m fibtui --workspace {root}; echo EXITED:$?; sleep 30"
    )
    tmux("kill-session", "-t", session)
    subprocess.run(
        [
            "tmux",
            "-L",
            SOCKET,
            "new-session",
            "-d",
            "-s",
            session,
            "-x",
            "120",
            "-y",
            "36",
            env_cmd,
        ],
        check=True,
    )
    try:
        wait_for(session, "Regimes")
        wait_for(session, "tiny_scale")  # the header names the definition
        tmux("send-keys", "-t", session, "3")
        wait_for(session, "g starts a representative gate")
        tmux("send-keys", "-t", session, "g")
        wait_for(session, "No recon note for this round")
        tmux("send-keys", "-t", session, "y")
        wait_for(session, "4 passed")
        shown = wait_for(session, "CPU-interpreter timings")
        assert "PASSED" in shown
        tmux("send-keys", "-t", session, "5")
        # CPU-interpreter wall times carry no speed verdict: correctness only, and the pane says
        # why (wait for the verdict line itself: the pane's list header says "verdict" before the
        # run is loaded into it)
        shown = wait_for(session, "verdict NO_SPEED_VERDICT", timeout=60)
        assert "interpreter" in shown and "candidate 2/2 PASSED" in shown.replace("\n", " "), shown
        assert "G = " not in shown and "tau" not in shown, shown
        tmux("send-keys", "-t", session, "q")
        wait_for(session, "EXITED:0", timeout=20)
    finally:
        tmux("kill-server")


def test_control_characters_from_files_are_shown_never_obeyed(tmp_path: Path) -> None:
    """A solution name holding an OSC window-title sequence, a colour escape, a bell and a
    carriage return (config.toml allows them as \\u escapes): in a real terminal the title bar
    shows ␛ where each ESC was (Textual itself drops the bell and the carriage return), tmux's pane
    title stays as it was and no text turns red."""
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    cfg = root / "config.toml"
    cfg.write_text(
        cfg.read_text().replace(
            'name = "tiny_v1"', 'name = "evil\\u001b]2;PWNED\\u0007\\u001b[31mRED\\rX"'
        )
    )
    session = f"fibtui-ctl-{os.getpid()}"
    env_cmd = (
        f"FIBTUI_CONFIG_DIR={tmp_path / 'config'} TERM=xterm-256color "
        f"{sys.executable} -m fibtui --workspace {root}; echo EXITED:$?; sleep 30"
    )
    # a tmux server of its own: another test's kill-server of the shared one may still be under way
    sock = f"{SOCKET}-ctl"
    subprocess.run(
        ["tmux", "-L", sock, "new-session", "-d", "-s", session, "-x", "120", "-y", "30", env_cmd],
        check=True,
    )
    try:
        wait_for(session, "tiny_scale", socket=sock)
        wait_for(session, "evil␛]2;PWNED␛[31mREDX", timeout=30, socket=sock)
        assert "PWNED" not in tmux(
            "display-message", "-p", "-t", session, "#{pane_title}", socket=sock
        )
        coloured = tmux(
            "capture-pane", "-t", session, "-p", "-e", socket=sock
        )  # with the SGR codes tmux keeps
        line = next(ln for ln in coloured.splitlines() if "PWNED" in ln)
        assert "\x1b[31m" not in line and "\x1b[31mRED" not in line, repr(line)
        tmux("send-keys", "-t", session, "q", socket=sock)
        wait_for(session, "EXITED:0", timeout=20, socket=sock)
    finally:
        tmux("kill-server", socket=sock)


def test_keys_at_80x24_in_a_real_terminal(tmp_path: Path) -> None:
    """At 80x24 in tmux, on the demo with a paired run: from every pane, after Tab into its
    tables, every pane key works (no focus trap); Escape leaves the search box; the Regimes chart
    and the Promotion per-band table are on screen; the footer keeps q and ?; q during a run asks
    and "back" keeps the run."""
    from tests.conftest import DEMO
    from tests.tui_helpers import synthetic_gpu_run, write_round

    root = tmp_path / "demo"
    shutil.copytree(DEMO, root, ignore=shutil.ignore_patterns("__pycache__"))
    synthetic_gpu_run(root)
    write_round(root)
    # a slow kernel for the gate that q interrupts (the demo's own gate ends in seconds on the CPU)
    kernel = root / "solution" / "triton" / "kernel.py"
    kernel.write_text(
        kernel.read_text() + "\n\nimport time as _time\n_fast = gdn_decode\n\n\n"
        "def gdn_decode(*args, **kwargs):\n    _time.sleep(1.0)\n    return _fast(*args, **kwargs)\n"
    )
    session = f"fibtui-80-{os.getpid()}"
    sock = f"{SOCKET}-80"
    env_cmd = (
        f"FIBTUI_CONFIG_DIR={tmp_path / 'config'} TERM=xterm-256color "
        f"{sys.executable} -m fibtui --workspace {root}; echo EXITED:$?; sleep 30"
    )
    subprocess.run(
        ["tmux", "-L", sock, "new-session", "-d", "-s", session, "-x", "80", "-y", "24", env_cmd],
        check=True,
    )
    markers = {
        "1": "repo(s)",
        "2": "representative",
        "3": "judged by",
        "4": "NCU reports",
        "5": "verdict",
        "6": "round summary",
    }

    def key(k: str) -> None:
        tmux("send-keys", "-t", session, k, socket=sock)

    try:
        shown = wait_for(session, "latency vs batch_size", socket=sock)
        # the Regimes chart has rows, not a collapsed box: its axis labels and a plotted series
        assert "┤" in shown and "batch_size=1" in shown, shown
        footer = shown.splitlines()[-1]
        assert "q Quit" in footer and "? Keys" in footer and "g Gate" in footer, footer
        for source in "123456":
            for _ in range(2):
                key(source)
                key("Tab")
                time.sleep(0.3)
                for target in "123456":
                    if target == source:
                        continue
                    for k in (target, source):
                        key(k)
                        try:
                            wait_for(session, markers[k], timeout=15, socket=sock)
                        except AssertionError as exc:
                            raise AssertionError(
                                f"pane {source}, Tab, {target}, {source}: key {k} did not show its pane; {exc}"
                            ) from None
        key("5")
        # the verdict and the per-band table with its first band, under the list of paired runs
        wait_for(session, "verdict PROMOTE", socket=sock)
        shown = wait_for(session, "batch_size=", socket=sock)
        assert "verdict PROMOTE" in shown, shown
        key("1")
        wait_for(session, "repo(s)", socket=sock)
        key("f")
        time.sleep(0.3)
        key("Escape")
        time.sleep(0.3)
        key("3")
        wait_for(session, "judged by", timeout=15, socket=sock)
        key("g")
        wait_for(session, "running", timeout=120, socket=sock)  # the runs list's state
        key("q")
        wait_for(session, "A run is in flight", timeout=15, socket=sock)
        key("b")
        time.sleep(0.5)
        shown = screen(session, sock)
        assert "A run is in flight" not in shown and "EXITED" not in shown, shown
        key("q")
        wait_for(session, "A run is in flight", timeout=15, socket=sock)
        key("c")
        wait_for(session, "EXITED:0", timeout=60, socket=sock)
    finally:
        tmux("kill-server", socket=sock)
