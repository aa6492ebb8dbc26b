"""fibtui.core.locations: every per-user and workspace path is built there, with the standard
library only, and the user's folders are the ones platformdirs gives."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import platformdirs
import pytest

from fibtui.core import locations

REPO = Path(__file__).resolve().parent.parent
USER_VARS = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME")
OWN_VARS = ("FIBTUI_CACHE_DIR", "FIBTUI_BUILD_CACHE_DIR", "FIBTUI_CONFIG_DIR")


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"XDG_CACHE_HOME": "/x/cache", "XDG_CONFIG_HOME": "/x/config", "XDG_DATA_HOME": "/x/data"},
        {"XDG_CACHE_HOME": "relative/cache", "XDG_CONFIG_HOME": "", "XDG_DATA_HOME": "rel"},
    ],
)
def test_the_user_folders_are_platformdirs_ones(monkeypatch, env: dict[str, str]) -> None:
    for var in (*USER_VARS, *OWN_VARS):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    assert locations.user_cache_root() == platformdirs.user_cache_path("fibtui")
    assert locations.user_config_root() == platformdirs.user_config_path("fibtui")
    assert locations.user_data_root() == platformdirs.user_data_path("fibtui")
    assert locations.cache_dir() == platformdirs.user_cache_path("fibtui")
    assert locations.cache_folder("runs") == platformdirs.user_cache_path("fibtui") / "runs"
    assert locations.reference_cache_dir() == platformdirs.user_cache_path("fibtui") / "reference"
    assert locations.build_cache_dir() == platformdirs.user_cache_path("fibtui") / "builds"
    assert locations.config_dir() == platformdirs.user_config_path("fibtui")
    assert (
        locations.demo_workspace_dir() == platformdirs.user_data_path("fibtui") / "demo-workspace"
    )


def test_fibtui_own_variables_move_its_folders(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv("FIBTUI_BUILD_CACHE_DIR", raising=False)
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(tmp_path / "f"))
    assert locations.cache_folder("gpus") == tmp_path / "c" / "gpus"
    assert locations.reference_cache_dir() == tmp_path / "c"  # the reference cache is the folder
    assert locations.build_cache_dir() == tmp_path / "c" / "builds"
    assert locations.torchinductor_dir() == tmp_path / "c" / "torchinductor"
    assert locations.config_dir() == tmp_path / "f"
    monkeypatch.setenv("FIBTUI_BUILD_CACHE_DIR", str(tmp_path / "b"))
    assert locations.build_cache_dir() == tmp_path / "b"
    # the host's and the worker's build caches are the same folder
    from fibtui.runners.session import default_build_cache_dir, default_cache_dir

    assert Path(default_build_cache_dir()) == tmp_path / "b"
    assert Path(default_cache_dir()) == tmp_path / "c"


def test_the_workers_socket_folder(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert locations.workers_socket_dir() == tmp_path / "fibtui"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "missing"))
    assert locations.workers_socket_dir().name.startswith("fibtui-")


def test_a_workspace_paths() -> None:
    root = Path("/w")
    archive = locations.archive_root_of(root)
    assert (
        archive == root / "optimize_ops" and locations.settings_path(root) == root / "fibtui.toml"
    )
    assert locations.state_dir_of(root) == root / ".fibtui"
    assert locations.run_folder(archive, "r1") == archive / "runs" / "r1"
    assert locations.aa_file(archive) == archive / "benchmarks" / "aa.jsonl"


def test_locations_is_standard_library_only() -> None:
    code = (
        "import sys, fibtui.core.locations as l; l.cache_dir(); l.workers_socket_dir(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('platformdirs', 'polars', 'textual', 'torch', 'modal', 'tomlkit')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert out.stdout.strip() == "[]"


def test_no_other_module_builds_a_user_folder() -> None:
    """The user's folders are worked out in fibtui.core.locations only (a message may still name
    a variable; Modal's container sets its own cache folder)."""
    pattern = re.compile(
        r"platformdirs|XDG_(CACHE|CONFIG|DATA)_HOME|os\.environ\.get\(\"(XDG_RUNTIME_DIR|"
        r"FIBTUI_CACHE_DIR|FIBTUI_BUILD_CACHE_DIR|FIBTUI_CONFIG_DIR)|\"~/\.cache|\"\.cache\""
    )
    found = [
        f"{path.relative_to(REPO)}:{n}"
        for path in sorted((REPO / "fibtui").rglob("*.py"))
        if path.name != "locations.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []
