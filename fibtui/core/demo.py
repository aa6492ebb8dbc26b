"""Copy a bundled demo operator into a new workspace a user can play with at once.

Two demos: ``gdn_decode`` (the default: a Gated-DeltaNet-decode-like Triton kernel with the
archived rounds measured on an H200) and ``dsa_topk`` (a small DeepSeek-sparse-attention top-k
indexer in torch: FP8 inputs, page tables in safetensors, an order-free output judged by the top-k
indexer evaluator; it runs on Triton's CPU interpreter in seconds)."""

from __future__ import annotations

import shutil
from pathlib import Path

from fibtui.core.errors import InputError
from fibtui.core.workspace import archive_root_of
from fibtui.resources import DEMOS, bundled, demo_source

_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
#: what a demo's ``optimize_ops/benchmarks/`` keeps of the project's own: the demo definition's
#: A/A sessions (the noise floor tau) and its NCU reports. The rest there are fibtui's development
#: benchmarks (about 13 MB of load tests, profiles and H200 sessions), no part of the demo.
DEMO_BENCHMARKS = frozenset({"aa.jsonl", "ncu"})


def _history_ignore(folder: str, names: list[str]) -> set[str]:
    """The archive's copy: caches never, and under benchmarks/ only :data:`DEMO_BENCHMARKS`."""
    skip = set(_IGNORE(folder, names))
    if Path(folder).name == "benchmarks" and Path(folder).parent.name == "optimize_ops":
        skip |= {n for n in names if n not in DEMO_BENCHMARKS}
    return skip


def create_demo_workspace(
    target: str | Path,
    *,
    with_history: bool = True,
    git_init: bool = True,
    operator: str = "gdn_decode",
) -> Path:
    """Create a demo workspace in ``target`` (which must be missing or empty).

    The workspace holds config.toml, solution/triton/kernel.py, the demo dataset and its candidate
    kernels; with ``with_history`` the archived demo rounds (real measurements) come along under
    optimize_ops/ (the gdn_decode demo has them). ``operator``: a key of DEMOS. It becomes a git repository with one commit, so reject-and-restore and
    submission tags work as in a real solution repo.
    """
    target = Path(target).expanduser()
    if target.exists() and not target.is_dir():
        raise InputError(target, "exists and is not a folder", field="DIR")
    if target.is_dir() and any(target.iterdir()):
        raise InputError(
            target,
            "folder is not empty; the demo is only copied into a new or empty folder",
            field="DIR",
        )
    if operator not in DEMOS:
        raise InputError(
            None, f"unknown demo {operator!r} (choose from {', '.join(DEMOS)})", field="--operator"
        )
    target.mkdir(parents=True, exist_ok=True)
    src = demo_source(operator)
    with_history = with_history and DEMOS[operator][1]
    for item in src.iterdir():
        if item.name in ("__pycache__",):
            continue
        dest = target / item.name
        if item.is_dir():
            shutil.copytree(item, dest, ignore=_IGNORE)
        else:
            shutil.copy2(item, dest)
    if with_history:
        try:
            archive = bundled("optimize_ops")
        except FileNotFoundError:
            archive = None
        if archive is not None and any(archive.iterdir()):
            shutil.copytree(
                archive, archive_root_of(target), ignore=_history_ignore, dirs_exist_ok=True
            )
    gitignore = target / ".gitignore"
    if not gitignore.exists():
        gitignore.write_text("__pycache__/\n.fibtui/cache/\n")
    if git_init:
        _git_init(target)
    return target


def _git_init(folder: Path) -> None:
    try:
        import git
    except ImportError:  # gitpython is a runtime dependency; be graceful anyway
        return
    try:
        repo = git.Repo.init(folder)
        with repo.config_writer() as cw:
            if not cw.has_option("user", "name"):
                cw.set_value("user", "name", "fibtui demo")
            if not cw.has_option("user", "email"):
                cw.set_value("user", "email", "demo@fibtui.invalid")
        repo.git.add(A=True)
        repo.index.commit("fibtui demo workspace")
    except (git.GitCommandError, OSError):
        pass
