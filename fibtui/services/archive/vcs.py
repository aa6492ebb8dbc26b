"""The git operations of a decision, in one place (GitPython, imported when one runs): is a folder
as the last commit has it, put a folder back to the last commit, commit exactly some paths.

Git is the application's, not the domain's: :func:`fibtui.services.archive.decide.promote` and
:func:`~fibtui.services.archive.decide.reject` (called through :mod:`fibtui.services.decide` by
the CLI and the TUI's Promotion pane) reach git only through this module."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from fibtui.core.errors import UsageError

if TYPE_CHECKING:
    import git


def open_repo(root: Path) -> git.Repo | None:
    import git

    try:
        return git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None


def restore_from_head(
    workspace_root: Path, folder: Path
) -> tuple[str, list[str], list[str]] | None:
    """Put ``folder`` back as the last commit has it: files deleted or changed since come back,
    files added (untracked, or staged new) are removed. ``(commit sha, restored, removed)``, or
    None when the workspace is not a git repository or the last commit has no file of ``folder``."""
    import git

    repo = open_repo(workspace_root)
    if repo is None or not repo.head.is_valid():
        return None
    work = Path(repo.working_tree_dir or workspace_root).resolve()
    rel = folder.relative_to(work).as_posix()
    tracked = repo.git.ls_tree("-r", "--name-only", "HEAD", "--", rel).splitlines()
    if not tracked:
        return None
    removed: list[str] = []
    untracked = repo.git.ls_files("--others", "--exclude-standard", "--", rel).splitlines()
    for path in untracked:
        (work / path).unlink(missing_ok=True)
        removed.append(path)
    # files deleted or changed since HEAD come back; files added and staged go away
    staged_new = repo.git.diff(
        "--cached", "--name-only", "--diff-filter=A", "HEAD", "--", rel
    ).splitlines()
    for path in staged_new:
        repo.git.rm("--cached", "--quiet", "--", path)
        (work / path).unlink(missing_ok=True)
        removed.append(path)
    try:
        repo.git.checkout("HEAD", "--", rel)
    except git.GitCommandError as exc:
        raise UsageError(
            f"could not restore {rel} from the last commit: {exc.stderr.strip() or exc}"
        ) from None
    return repo.head.commit.hexsha, tracked, removed


def commit_paths(workspace_root: str | Path, paths: list[Path], message: str) -> str | None:
    """Commit exactly ``paths`` (nothing else staged goes with them); the new commit's sha, or
    None when the workspace is not a git repository or nothing changed."""

    repo = open_repo(Path(workspace_root))
    if repo is None:
        return None
    work = Path(repo.working_tree_dir or workspace_root).resolve()
    rels = []
    for p in paths:
        try:
            rels.append(Path(p).resolve().relative_to(work).as_posix())
        except ValueError:
            continue
    rels = [r for r in rels if (work / r).exists() or repo.git.ls_files("--", r)]
    if not rels:
        return None
    repo.git.add("--all", "--", *rels)
    if not repo.git.diff("--cached", "--name-only", "--", *rels).strip():
        return None
    with repo.config_reader() as cr:
        has_user = cr.has_option("user", "name") and cr.has_option("user", "email")
    env = (
        {}
        if has_user
        else {
            "GIT_AUTHOR_NAME": "fibtui",
            "GIT_AUTHOR_EMAIL": "fibtui@localhost",
            "GIT_COMMITTER_NAME": "fibtui",
            "GIT_COMMITTER_EMAIL": "fibtui@localhost",
        }
    )
    repo.git.commit("-m", message, "--", *rels, env=env)
    return repo.head.commit.hexsha


def differs_from_head(workspace_root: Path, folder: Path) -> bool:
    """Does ``folder`` differ from the last commit (or is it outside any commit)?"""
    repo = open_repo(workspace_root)
    if repo is None or not repo.head.is_valid():
        return True
    work = Path(repo.working_tree_dir or workspace_root).resolve()
    rel = folder.resolve().relative_to(work).as_posix()
    status = repo.git.status("--porcelain", "--untracked-files=all", "--", rel)
    return bool(status.strip())
