"""Where fibtui keeps things, built in one place: the user's folders (cache, config, data, the
worker service's sockets, Modal's config) and the paths of a workspace (its fibtui.toml, its
archive, the archive's runs and A/A history).

The standard library only: the worker (:mod:`fibtui.worker`, importable with the standard library,
torch and triton) finds its caches here too, so the host and the worker agree on them.

The user's folders are those of platformdirs for the application ``fibtui`` (no author, no
version), worked out here without it: ``$XDG_CACHE_HOME`` / ``$XDG_CONFIG_HOME`` /
``$XDG_DATA_HOME`` when set to an absolute path, else ``~/.cache``, ``~/.config``,
``~/.local/share`` (macOS: ``~/Library/Caches`` and ``~/Library/Application Support``; Windows:
``%LOCALAPPDATA%``), each with ``fibtui`` under it. ``FIBTUI_CACHE_DIR``,
``FIBTUI_BUILD_CACHE_DIR`` and ``FIBTUI_CONFIG_DIR`` put fibtui's own folders elsewhere.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

APP = "fibtui"

#: a workspace's settings file, at its root
SETTINGS_NAME = "fibtui.toml"
#: a workspace's archive folder, at its root: runs, benchmarks, candidates, docs
ARCHIVE_DIR = "optimize_ops"
#: fibtui's own state in a workspace (caches, warm workers, logs of a profile), never archived
STATE_DIR = ".fibtui"
#: the runs of an archive, one folder per run (``<archive>/runs/<run_id>``)
RUNS_DIR = "runs"
#: the A/A sessions ``fibtui compare --aa`` appends, under the archive
AA_FILE = "benchmarks/aa.jsonl"


# -- the user's folders ------------------------------------------------------------------------


def _home(rest: str) -> Path:
    return Path(os.path.expanduser("~")) / rest


def _xdg(var: str) -> Path | None:
    value = os.environ.get(var, "")
    return Path(value) if os.path.isabs(value) else None


def _windows_base() -> Path:
    return Path(os.environ.get("LOCALAPPDATA") or _home("AppData/Local"))


def user_cache_root() -> Path:
    """The user's cache folder for fibtui (platformdirs' ``user_cache_path("fibtui")``)."""
    if sys.platform == "win32":
        return _windows_base() / APP / "Cache"
    base = _xdg("XDG_CACHE_HOME")
    if base is None:
        base = _home("Library/Caches") if sys.platform == "darwin" else _home(".cache")
    return base / APP


def user_config_root() -> Path:
    """The user's config folder for fibtui (platformdirs' ``user_config_path("fibtui")``)."""
    if sys.platform == "win32":
        return _windows_base() / APP
    base = _xdg("XDG_CONFIG_HOME")
    if base is None:
        base = (
            _home("Library/Application Support") if sys.platform == "darwin" else _home(".config")
        )
    return base / APP


def user_data_root() -> Path:
    """The user's data folder for fibtui (platformdirs' ``user_data_path("fibtui")``)."""
    if sys.platform == "win32":
        return _windows_base() / APP
    base = _xdg("XDG_DATA_HOME")
    if base is None:
        base = (
            _home("Library/Application Support")
            if sys.platform == "darwin"
            else _home(".local/share")
        )
    return base / APP


def cache_dir() -> Path:
    """fibtui's cache folder: ``$FIBTUI_CACHE_DIR``, else the user's cache folder for fibtui."""
    base = os.environ.get("FIBTUI_CACHE_DIR")
    return Path(base) if base else user_cache_root()


def cache_folder(name: str) -> Path:
    """One cache of :mod:`fibtui.core.cachefile` (``gpus``, ``runs``...): under :func:`cache_dir`."""
    return cache_dir() / name


def reference_cache_dir() -> Path:
    """The reference outputs' cache: ``$FIBTUI_CACHE_DIR`` itself when set, else ``reference`` in
    the user's cache folder for fibtui."""
    base = os.environ.get("FIBTUI_CACHE_DIR")
    return Path(base) if base else user_cache_root() / "reference"


def build_cache_dir() -> Path:
    """Compiled CUDA/C++ builds, kept across runs: ``$FIBTUI_BUILD_CACHE_DIR``, else ``builds``
    under :func:`cache_dir`."""
    explicit = os.environ.get("FIBTUI_BUILD_CACHE_DIR")
    return Path(explicit) if explicit else cache_dir() / "builds"


def torchinductor_dir() -> Path:
    """TorchInductor's cache when the user chose none (kept out of the temp folder)."""
    return cache_dir() / "torchinductor"


def config_dir() -> Path:
    """The user's own fibtui settings (theme, keys): ``$FIBTUI_CONFIG_DIR``, else the user's config
    folder for fibtui."""
    env = os.environ.get("FIBTUI_CONFIG_DIR")
    return Path(env) if env else user_config_root()


def demo_workspace_dir() -> Path:
    """Where the bundled demo workspace is made the first time: the user's data folder."""
    return user_data_root() / "demo-workspace"


def workers_socket_dir() -> Path:
    """The worker service's folder (its sockets): ``$XDG_RUNTIME_DIR/fibtui`` when that folder
    exists, else ``fibtui-<uid>`` in the temp folder."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isdir(xdg):
        return Path(xdg) / APP
    return Path(tempfile.gettempdir()) / f"{APP}-{os.getuid()}"


def modal_config_path() -> Path:
    """Modal's own config file (its token): ``$MODAL_CONFIG_PATH``, else ``~/.modal.toml``."""
    return Path(os.environ.get("MODAL_CONFIG_PATH", Path.home() / ".modal.toml"))


# -- a workspace's paths -----------------------------------------------------------------------


def settings_path(root: str | Path) -> Path:
    """A workspace's fibtui.toml."""
    return Path(root) / SETTINGS_NAME


def archive_root_of(workspace_root: str | Path) -> Path:
    """A workspace's archive folder."""
    return Path(workspace_root) / ARCHIVE_DIR


def state_dir_of(workspace_root: str | Path) -> Path:
    """A workspace's own state folder (``.fibtui``)."""
    return Path(workspace_root) / STATE_DIR


def runs_root(archive_root: Path) -> Path:
    """The runs folder of an archive."""
    return archive_root / RUNS_DIR


def run_folder(archive_root: Path, run_id: str) -> Path:
    """One run's folder (whether or not it exists: :func:`fibtui.core.runs.run_dir` checks)."""
    return runs_root(archive_root) / run_id


def aa_file(archive_root: Path) -> Path:
    """The A/A sessions of an archive (``fibtui compare --aa``)."""
    return archive_root / AA_FILE
