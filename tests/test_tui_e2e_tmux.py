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

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


SOCKET = f"fibtui-e2e-{os.getpid()}"  # a private tmux server: nothing else's sessions or sizes


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=False).stdout


def screen(session: str) -> str:
    return tmux("capture-pane", "-t", session, "-p")


def wait_for(session: str, text: str, timeout: float = 120.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = screen(session)
        if text in shown:
            return shown
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared; the screen shows:\n{screen(session)}")


def test_gate_in_a_real_terminal(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    # a promoted best solution: the gate is paired against it, so the Promotion pane has a verdict
    best = root / "optimize_ops" / "best_solution_triton"
    shutil.copytree(make_candidate(root, "best", "good_py"), best)
    session = f"fibtui-e2e-{os.getpid()}"
    env_cmd = (f"FIBTUI_CONFIG_DIR={tmp_path / 'config'} TERM=xterm-256color "
               f"{sys.executable} -m fibtui --workspace {root}; echo EXITED:$?; sleep 30")
    tmux("kill-session", "-t", session)
    subprocess.run(["tmux", "-L", SOCKET, "new-session", "-d", "-s", session, "-x", "120", "-y", "36", env_cmd], check=True)
    try:
        wait_for(session, "Regimes")
        wait_for(session, "tiny_scale")  # the header names the definition
        tmux("send-keys", "-t", session, "3")
        wait_for(session, "g starts a representative gate")
        tmux("send-keys", "-t", session, "g")
        wait_for(session, "No recon note for this round")
        tmux("send-keys", "-t", session, "y")
        shown = wait_for(session, "4 passed")
        assert "PASSED" in shown and "CPU-interpreter timings" in shown
        tmux("send-keys", "-t", session, "5")
        shown = wait_for(session, "verdict")
        assert any(f"verdict {v}" in shown for v in ("PROMOTE", "REJECT", "INCONCLUSIVE", "BLOCKED", "INCOMPLETE")), shown
        assert "tau" in shown and "G = " in shown
        tmux("send-keys", "-t", session, "q")
        wait_for(session, "EXITED:0", timeout=20)
    finally:
        tmux("kill-server")
