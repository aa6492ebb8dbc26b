"""Shared fixtures. Tests that read ../shared skip when it is absent (a user's clone lacks it);
everything else makes its own data."""

from __future__ import annotations

import atexit
import os
import shutil
from pathlib import Path

import pytest

# The tests run without a GPU: any Triton this process imports must be the CPU interpreter's.
# Triton reads the variable once, when it is first imported; a test that imports flashinfer-bench's
# builders (which import triton) would otherwise leave a compiled-mode Triton behind for the
# in-process Modal and interpreter tests of the same xdist worker.
os.environ.setdefault("TRITON_INTERPRET", "1")
# Runs in tests start their own workers: a worker service (which outlives the command that starts
# it) is started only by the tests of tests/test_worker_service.py, each in a folder of its own.
os.environ["FIBTUI_WORKERS_DAEMON"] = "0"


def _quiet_nanobind_at_exit() -> None:
    """Triton's compiler bindings are nanobind modules: at interpreter exit nanobind lists every
    instance still alive (``nanobind: leaked 2 instances!`` and a line per object, about 54 lines
    under the whole suite, from Triton objects a daemon thread or a cache still holds). They say
    nothing about fibtui, and they land above pytest's summary (an xdist worker exits before it
    is printed). Triton exposes no ``set_leak_warnings``, so this hook, run by ``atexit`` after
    pytest is done (registered first: it runs last of the atexit hooks), points stderr at
    /dev/null for the rest of the exit when Triton's bindings were loaded; an error an atexit
    hook of the tests writes still shows, as it runs before this one."""
    import sys

    if "triton._C.libtriton" not in sys.modules:
        return
    try:
        sys.stderr.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
    except OSError:
        pass


atexit.register(_quiet_nanobind_at_exit)

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("FIBTUI_SHARED", REPO.parent / "shared"))
DEMO = REPO / "kernels" / "gdn_decode_demo"
DEMO_DEFINITION = "demo_gdn_decode_qk4_v8_d128_k_last"


def shared_path(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared fixture {path} is absent (only the project's own data is used here)")
    return path


@pytest.fixture
def shared():
    return shared_path


@pytest.fixture
def demo_ws(tmp_path: Path) -> Path:
    """A fresh copy of the bundled demo workspace (no git, no history) in a temp folder."""
    target = tmp_path / "demo"
    shutil.copytree(DEMO, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.fixture(autouse=True)
def _no_dataset_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's FIB_DATASET_PATH must not leak into tests."""
    monkeypatch.delenv("FIB_DATASET_PATH", raising=False)


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """``fibtui ARGV`` in this process: exit code (argparse's exits included), stdout, stderr."""
    from fibtui.cli import main

    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err
