"""The workspace's checked-in kernel (``solution/<language>/``) and its ``config.toml``: what a
promotion installs and renames, and what a rejection restores (the last commit, else the best
snapshot)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fibtui.core.archive.layout import best_folder
from fibtui.core.errors import InputError, UsageError, WriteFailed
from fibtui.core.fsio import atomic_write_bytes, atomic_write_text, make_dirs, read_input_text
from fibtui.services.archive.best import read_best
from fibtui.services.archive.vcs import restore_from_head


def set_config_value(config_path: str | Path, dotted: str, value: Any) -> Path:
    """Set ``table.key = value`` in a config.toml with tomlkit: comments and layout survive."""
    import tomlkit

    from fibtui.core.workspace import read_toml

    path = Path(config_path)
    read_toml(path)  # a clear error (file, line) when it is broken
    doc = tomlkit.parse(read_input_text(path))  # tomlkit refuses a byte-order mark; it is dropped
    parts = dotted.split(".")
    node: Any = doc
    for i, part in enumerate(parts[:-1]):
        if part not in node:
            node[part] = tomlkit.table()
        node = node[part]
        if not isinstance(node, dict):
            raise InputError(path, "expected a table", field=".".join(parts[: i + 1]))
    node[parts[-1]] = value
    return atomic_write_text(path, tomlkit.dumps(doc))


def mirror_sources(src_sources: Path, dest: Path) -> list[str]:
    """Make ``dest`` hold exactly the files of ``src_sources`` (caches left alone)."""
    make_dirs(dest)
    wanted = {p.relative_to(src_sources).as_posix() for p in src_sources.rglob("*") if p.is_file()}
    changed: list[str] = []
    for p in sorted(dest.rglob("*")):
        rel = p.relative_to(dest).as_posix()
        if p.is_file() and "__pycache__" not in p.parts and rel not in wanted:
            try:
                p.unlink()
            except OSError as exc:
                raise WriteFailed(p, exc) from None
            changed.append(rel)
    for rel in sorted(wanted):
        target = dest / rel
        make_dirs(target.parent)
        data = (src_sources / rel).read_bytes()
        if not target.is_file() or target.read_bytes() != data:
            atomic_write_bytes(target, data)  # the user's kernel: never half-written
            changed.append(rel)
    return changed


def same_files(a: Path, b: Path) -> bool:
    def files(folder: Path) -> dict[str, bytes]:
        return {
            p.relative_to(folder).as_posix(): p.read_bytes()
            for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        }

    return a.is_dir() and b.is_dir() and files(a) == files(b)


@dataclass
class RestoreResult:
    source: str  # "git HEAD <sha>" | "best snapshot <name>"
    restored: list[str]
    removed: list[str]


def restore_kernel(
    workspace_root: str | Path,
    source_dir: str | Path,
    *,
    archive_root: Path | None = None,
    language: str | None = None,
) -> RestoreResult:
    """Put ``source_dir`` (the checked-in kernel folder) back to the previous best: the last
    commit when it is in one, else the best snapshot (see :mod:`fibtui.services.archive`)."""
    root = Path(workspace_root).resolve()
    folder = Path(source_dir).resolve()
    head = restore_from_head(root, folder)
    if head is not None:
        sha, restored, removed = head
        return RestoreResult(f"git HEAD {sha[:12]}", restored, removed)
    if archive_root is not None and language is not None:
        best = read_best(archive_root, language)
        if best and best.get("snapshot"):
            snap = best_folder(archive_root, language) / str(best["snapshot"]) / "sources"
            if snap.is_dir():
                changed = mirror_sources(snap, folder)
                return RestoreResult(f"best snapshot {best['snapshot']}", changed, [])
    raise UsageError(
        f"nothing to restore {folder} from: it is not in a git commit and there is no best snapshot "
        "under optimize_ops/best_solution_<language>/"
    )
