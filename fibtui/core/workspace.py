"""The workspace: a contest-style solution repo (config.toml + solution/<language>/...).

Topologies seen in the wild: one definition at the root, or one definition per subfolder
(``<definition>/config.toml`` + ``<definition>/solution/...``), possibly several. The topology
check names every invalid case of docs/formats.md ("Topologies and the invalid cases") with the file it concerns.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fibtui.core.errors import InputError, UsageError
from fibtui.core.fsio import read_input_text
from fibtui.core.locations import ARCHIVE_DIR as ARCHIVE_DIR
from fibtui.core.locations import STATE_DIR as STATE_DIR
from fibtui.core.locations import archive_root_of as archive_root_of
from fibtui.core.locations import state_dir_of as state_dir_of

if TYPE_CHECKING:  # polars loads with the dataset module: keep it off the start-up path
    from fibtui.core.dataset import Dataset

CONFIG_NAME = "config.toml"
#: The workspace's folders, named in fibtui.core.locations only (docs/formats.md): the archive of every round, and
#: fibtui's own state (caches, warm workers, logs of a profile in progress). Reach them through
#: :attr:`Workspace.archive_root` / :attr:`Workspace.state_dir`, or :func:`archive_root_of` /
#: :func:`state_dir_of` where only the workspace folder is at hand.
#: Folders never searched for solution configs.
SKIP_DIRS = {
    ".git",
    ".venv",
    "venv",
    "node_modules",
    "__pycache__",
    ARCHIVE_DIR,
    "reference",
    "dataset",
    "build",
    "dist",
    STATE_DIR,
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    "candidates",
}
#: Where a solution's candidates live (beside its config.toml, or at the workspace root): each
#: child is a contest-style solution of its own (config.toml + solution/<language>/) or a bare
#: folder of sources that takes the owning solution's language and entry point.
CANDIDATES_DIR = "candidates"
#: Source files that do not count as a solution's sources (and are never packed).
IGNORED_SOURCE_PARTS = {"__pycache__", ".pytest_cache", ".ipynb_checkpoints", ".DS_Store"}
LANGUAGE_SUFFIXES = {
    "triton": (".py",),
    "python": (".py",),
    "torch": (".py",),
    "tilelang": (".py",),
    "cuda": (".cu", ".cuh", ".cpp", ".h", ".hpp", ".cc"),
    "cpp": (".cpp", ".cc", ".h", ".hpp", ".cu"),
}
DEFAULT_ENTRY_FILE = {
    "triton": "kernel.py",
    "python": "kernel.py",
    "cuda": "kernel.cu",
    "cpp": "kernel.cpp",
}


@dataclass
class SolutionConfig:
    """One config.toml: the solution it describes and where its sources live."""

    path: Path  # the config.toml
    name: str
    definition: str
    author: str
    language: str
    entry_point_raw: str
    entry_file: str | None
    entry_function: str
    binding: str | None = None
    destination_passing_style: bool | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def source_dir(self) -> Path:
        return self.folder / "solution" / self.language

    @property
    def entry_point(self) -> str:
        """Normalized ``file::function``."""
        return f"{self.entry_file or '?'}::{self.entry_function}"

    @property
    def dps(self) -> bool:
        return True if self.destination_passing_style is None else self.destination_passing_style

    def source_files(self) -> list[Path]:
        """The source folder's files (fibtui.core.safetree: a link out of it is an InputError)."""
        if not self.source_dir.is_dir():
            return []
        from fibtui.core import safetree

        files = safetree.list_files(
            self.source_dir,
            skip_dir=lambda name: name in IGNORED_SOURCE_PARTS,
            skip_file=lambda name: (
                name in IGNORED_SOURCE_PARTS or name == CONFIG_NAME or name.endswith(".pyc")
            ),
        )
        return [self.source_dir / f.rel for f in files]


def _toml_error_line(exc: tomllib.TOMLDecodeError) -> int | None:
    m = re.search(r"line (\d+)", str(exc))
    return int(m.group(1)) if m else None


def read_toml(path: Path) -> dict[str, Any]:
    text = read_input_text(path)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise InputError(path, f"not valid TOML: {message}", line=_toml_error_line(exc)) from None
    except RecursionError:
        raise InputError(path, "not valid TOML: nested too deeply") from None


def has_solution_table(path: Path) -> bool:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        # A config.toml we cannot read still counts, so the check reports it instead of hiding it.
        return True
    return isinstance(data.get("solution"), dict)


def _resolve_bare_entry(source_dir: Path, language: str, function: str) -> str | None:
    """Older kits give a bare function name: find the file that defines it."""
    default = DEFAULT_ENTRY_FILE.get(language)
    if default and (source_dir / default).is_file():
        return default
    suffixes = LANGUAGE_SUFFIXES.get(language, (".py",))
    pattern = re.compile(
        rf"\bdef\s+{re.escape(function)}\s*\("
        if ".py" in suffixes
        else rf"\b{re.escape(function)}\s*\("
    )
    hits = []
    if source_dir.is_dir():
        for p in sorted(source_dir.rglob("*")):
            if p.is_file() and p.suffix in suffixes:
                try:
                    if pattern.search(p.read_text(encoding="utf-8", errors="replace")):
                        hits.append(p.relative_to(source_dir).as_posix())
                except OSError:
                    continue
    return hits[0] if len(hits) == 1 else None


def load_config(path: str | Path) -> SolutionConfig:
    path = Path(path)
    data = read_toml(path)
    sol = data.get("solution")
    if not isinstance(sol, dict):
        raise InputError(path, "has no [solution] table", field="solution")
    build = data.get("build", {})
    if not isinstance(build, dict):
        raise InputError(path, "expected a table", field="build")

    def optional_text(
        table: dict[str, Any], key: str, section: str, required: bool = False
    ) -> str | None:
        value = table.get(key)
        if value is None:
            if required:
                raise InputError(path, "required field is missing", field=f"{section}.{key}")
            return None
        if not isinstance(value, str) or (required and not value.strip()):
            raise InputError(
                path, f"expected a non-empty string, got {value!r}", field=f"{section}.{key}"
            )
        return value

    def text(table: dict[str, Any], key: str, section: str) -> str:
        value = optional_text(table, key, section, required=True)
        assert value is not None  # optional_text raised otherwise
        return value

    name = text(sol, "name", "solution")
    definition = text(sol, "definition", "solution")
    author = optional_text(sol, "author", "solution") or ""
    language = text(build, "language", "build")
    if language not in LANGUAGE_SUFFIXES:
        raise InputError(
            path,
            f"expected one of {', '.join(LANGUAGE_SUFFIXES)}, got {language!r}",
            field="build.language",
        )
    entry = text(build, "entry_point", "build")
    entry_file: str | None  # None: a bare function name found in no single file
    if "::" in entry:
        entry_file, _, function = entry.partition("::")
        if not entry_file or not function:
            raise InputError(
                path,
                f"expected 'file.py::function' or a function name, got {entry!r}",
                field="build.entry_point",
            )
        parts = entry_file.replace("\\", "/").split("/")
        if (
            entry_file.startswith(("/", "\\"))
            or ".." in parts
            or "\0" in entry_file
            or len(entry_file) > 255
        ):
            raise InputError(
                path,
                f"the entry point file must be a path inside solution/{language}/, got {entry_file!r}",
                field="build.entry_point",
            )
    else:
        function = entry
        entry_file = _resolve_bare_entry(path.parent / "solution" / language, language, function)
    binding = optional_text(build, "binding", "build")
    dps = build.get("destination_passing_style")
    if dps is not None and not isinstance(dps, bool):
        raise InputError(
            path, f"expected true or false, got {dps!r}", field="build.destination_passing_style"
        )
    return SolutionConfig(
        path=path,
        name=name,
        definition=definition,
        author=author,
        language=language,
        entry_point_raw=entry,
        entry_file=entry_file,
        entry_function=function,
        binding=binding,
        destination_passing_style=dps,
        raw=data,
    )


# --------------------------------------------------------------------------------------------
# Topology
# --------------------------------------------------------------------------------------------


@dataclass
class Problem:
    path: Path
    message: str
    line: int | None = None
    field: str | None = None

    def __str__(self) -> str:
        return str(InputError(self.path, self.message, line=self.line, field=self.field))


@dataclass
class Candidate:
    """One folder under ``candidates/``: a contest-style solution or a bare folder of sources."""

    name: str
    folder: Path
    kind: str  # "config" (config.toml + solution/<language>/) | "sources" (a bare folder)
    owner: SolutionConfig  # the solution it is a candidate for (its definition, its entry point for a bare folder)
    config: SolutionConfig | None = None
    problems: list[Problem] = field(default_factory=list)

    @property
    def language(self) -> str:
        return (self.config or self.owner).language

    @property
    def entry_point(self) -> str:
        return (self.config or self.owner).entry_point

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.folder),
            "kind": self.kind,
            "definition": self.owner.definition,
            "language": self.language,
            "entry_point": self.entry_point,
            "binding": (self.config or self.owner).binding,
            "problems": [str(p) for p in self.problems],
        }


@dataclass
class Topology:
    kind: str  # "single" | "per-definition" | "invalid" | "empty"
    configs: list[SolutionConfig]
    problems: list[Problem]
    candidates: list[Candidate] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.problems and bool(self.configs)

    @property
    def candidate_problems(self) -> list[Problem]:
        return [p for c in self.candidates for p in c.problems]


#: how deep below a workspace root a config.toml is looked for
MAX_CONFIG_DEPTH = 4


def find_config_files(root: Path) -> list[Path]:
    """Every config.toml with a [solution] table under ``root`` (skipping caches, archives,
    reference checkouts and the dataset)."""
    found: list[Path] = []
    top = len(Path(root).parts)
    for dirpath, dirnames, filenames in os.walk(root):
        # deep enough for <root>/<definition>/solution/<language>/config.toml (misplaced, said by
        # the check), never a walk of a whole tree
        if len(Path(dirpath).parts) - top >= MAX_CONFIG_DEPTH:
            dirnames[:] = []
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        if CONFIG_NAME in filenames:
            p = Path(dirpath) / CONFIG_NAME
            if has_solution_table(p):
                found.append(p)
    return found


def check_topology(root: str | Path) -> Topology:
    root = Path(root)
    problems: list[Problem] = []
    configs: list[SolutionConfig] = []
    paths = find_config_files(root)
    if not paths:
        return Topology(
            "empty",
            [],
            [Problem(root, f"no {CONFIG_NAME} with a [solution] table here or in its subfolders")],
        )
    for p in paths:
        rel = p.relative_to(root)
        if "solution" in rel.parts[:-1]:
            problems.append(
                Problem(p, "config.toml inside solution/ (it belongs next to solution/, not in it)")
            )
            continue
        try:
            configs.append(load_config(p))
        except InputError as exc:
            problems.append(Problem(p, exc.message, exc.line, exc.field))
    root_cfg = [c for c in configs if c.folder == root]
    sub_cfg = [c for c in configs if c.folder != root]
    if root_cfg and sub_cfg:
        problems.append(
            Problem(
                root / CONFIG_NAME,
                "root and per-definition configs together: "
                + ", ".join(str(c.path.relative_to(root)) for c in sub_cfg)
                + " (keep one layout)",
            )
        )
    for c in sub_cfg:
        depth = len(c.folder.relative_to(root).parts)
        if depth > 1:
            problems.append(
                Problem(c.path, "per-definition configs belong one folder below the workspace root")
            )
    by_def: dict[str, list[SolutionConfig]] = {}
    for c in configs:
        by_def.setdefault(c.definition, []).append(c)
    for definition, group in by_def.items():
        if len(group) > 1:
            problems.append(
                Problem(
                    group[1].path,
                    f"two configs for one definition {definition!r}: "
                    + ", ".join(str(c.path.relative_to(root)) for c in group),
                    field="solution.definition",
                )
            )
    for c in configs:
        problems.extend(check_sources(c))
    kind = "invalid" if problems else ("single" if root_cfg else "per-definition")
    return Topology(kind, configs, problems, find_candidates(root, configs))


def _candidate_folders(
    root: Path, configs: list[SolutionConfig]
) -> list[tuple[Path, SolutionConfig]]:
    """(candidate folder, the config it belongs to): ``<config folder>/candidates/*``, and for the
    per-definition layout ``<root>/candidates/*`` too when there is one config."""
    owners: list[tuple[Path, SolutionConfig]] = [(c.folder / CANDIDATES_DIR, c) for c in configs]
    if configs and all(c.folder != root for c in configs) and len(configs) == 1:
        owners.append((root / CANDIDATES_DIR, configs[0]))
    out: list[tuple[Path, SolutionConfig]] = []
    seen: set[Path] = set()
    for parent, owner in owners:
        try:
            children = sorted(
                d for d in parent.iterdir() if d.is_dir() and not d.name.startswith((".", "_"))
            )
        except OSError:
            continue
        for d in children:
            if d not in seen:
                seen.add(d)
                out.append((d, owner))
    return out


def find_candidates(root: Path, configs: list[SolutionConfig]) -> list[Candidate]:
    """Every candidate folder, checked: a contest-style one like a solution config (and for the
    same definition), a bare one for the owner's entry point file."""
    out: list[Candidate] = []
    for folder, owner in _candidate_folders(root, configs):
        cfg_path = folder / CONFIG_NAME
        if cfg_path.is_file() and has_solution_table(cfg_path):
            cand = Candidate(folder.name, folder, "config", owner)
            try:
                cand.config = load_config(cfg_path)
            except InputError as exc:
                cand.problems.append(Problem(cfg_path, exc.message, exc.line, exc.field))
                out.append(cand)
                continue
            if cand.config.definition != owner.definition:
                cand.problems.append(
                    Problem(
                        cfg_path,
                        f"is for {cand.config.definition!r}, but {owner.path.parent.name or '.'}/"
                        f"{CONFIG_NAME} is for {owner.definition!r}",
                        field="solution.definition",
                    )
                )
            cand.problems.extend(check_sources(cand.config))
            out.append(cand)
            continue
        if not any(p.is_file() for p in folder.iterdir()):
            continue  # not a candidate (an empty folder, a folder of folders)
        cand = Candidate(folder.name, folder, "sources", owner)
        try:
            from fibtui.core import safetree

            safetree.list_files(
                folder,
                skip_dir=lambda n: n.startswith(".") or n in IGNORED_SOURCE_PARTS,
                what="candidate folder",
            )
        except InputError as exc:
            cand.problems.append(Problem(Path(exc.path or folder), exc.message))
        entry = owner.entry_file
        if entry is not None and not (folder / entry).is_file():
            cand.problems.append(
                Problem(
                    folder,
                    f"has no {entry} (the entry point file of {owner.name}) and no {CONFIG_NAME}",
                )
            )
        out.append(cand)
    return out


def check_sources(c: SolutionConfig) -> list[Problem]:
    out: list[Problem] = []
    if not c.source_dir.is_dir():
        out.append(
            Problem(
                c.path,
                f"source folder {c.source_dir.relative_to(c.folder)}/ does not exist",
                field="build.language",
            )
        )
        return out
    try:
        files = c.source_files()
    except InputError as exc:  # a link out of the folder, too many files
        return [Problem(Path(exc.path or c.source_dir), exc.message, exc.line, exc.field)]
    if not files:
        out.append(
            Problem(
                c.path,
                f"source folder {c.source_dir.relative_to(c.folder)}/ is empty",
                field="build.language",
            )
        )
        return out
    try:
        entry_exists = c.entry_file is not None and (c.source_dir / c.entry_file).is_file()
    except (OSError, ValueError):
        entry_exists = False
    if c.entry_file is None:
        out.append(
            Problem(
                c.path,
                f"entry point {c.entry_point_raw!r}: no file in {c.source_dir.relative_to(c.folder)}/ defines it",
                field="build.entry_point",
            )
        )
    elif not entry_exists:
        out.append(
            Problem(
                c.path,
                f"entry point file {c.source_dir.relative_to(c.folder) / c.entry_file} does not exist",
                field="build.entry_point",
            )
        )
    return out


# --------------------------------------------------------------------------------------------
# Finding the workspace and its dataset
# --------------------------------------------------------------------------------------------


@dataclass
class Workspace:
    root: Path
    topology: Topology
    active: SolutionConfig | None
    dataset_root: Path | None
    dataset_source: (
        str  # "--dataset" | "FIB_DATASET_PATH" | "dataset/" | "embedded:<folder>" | "none"
    )

    @property
    def configs(self) -> list[SolutionConfig]:
        return self.topology.configs

    @property
    def definitions(self) -> list[str]:
        return [c.definition for c in self.configs]

    @property
    def archive_root(self) -> Path:
        return archive_root_of(self.root)

    @property
    def state_dir(self) -> Path:
        return state_dir_of(self.root)

    def dataset(self) -> Dataset:
        from fibtui.core.dataset import Dataset

        if self.dataset_root is None:
            raise UsageError(
                f"no dataset for workspace {self.root}: pass --dataset DIR, set FIB_DATASET_PATH, "
                "or put a FlashInfer-Trace folder at dataset/"
            )
        return Dataset(self.dataset_root)

    def config_for(self, definition: str | None) -> SolutionConfig:
        if definition is None:
            if self.active is None:
                if self.topology.problems:  # say which file, line and field, not just "none"
                    p = self.topology.problems[0]
                    raise InputError(p.path, p.message, line=p.line, field=p.field)
                raise UsageError(f"no valid solution config in {self.root}")
            return self.active
        for c in self.configs:
            if c.definition == definition:
                return c
        raise UsageError(f"no solution config for definition {definition!r} in {self.root}")


def _is_per_definition_root(parent: Path, child: Path) -> bool:
    """Is ``parent`` a workspace holding one solution folder per definition (``child`` among them)?

    Only when ``child`` is not a repository of its own, ``parent`` has no config of its own, holds
    other solution folders, and looks like a workspace itself (a git repository, fibtui.toml, an
    archive, a dataset or reference checkouts). Sibling demo workspaces in /tmp are not one.
    """
    if (child / ".git").exists() or (parent / CONFIG_NAME).is_file():
        return False
    if not any(
        (parent / marker).exists()
        for marker in (".git", "fibtui.toml", ARCHIVE_DIR, "dataset", "reference")
    ):
        return False
    try:
        siblings = [d for d in parent.iterdir() if d.is_dir() and d != child]
    except OSError:
        return False
    return any(
        (d / CONFIG_NAME).is_file() and has_solution_table(d / CONFIG_NAME) for d in siblings
    )


def _owns_candidates(folder: Path) -> bool:
    """Is ``folder`` a solution folder or a workspace root (the owner of a candidates/ folder)?"""
    cfg = folder / CONFIG_NAME
    if cfg.is_file() and has_solution_table(cfg):
        return True
    return any(
        (folder / marker).exists() for marker in (".git", "fibtui.toml", ARCHIVE_DIR, "dataset")
    )


def find_workspace_root(start: Path) -> tuple[Path, Path | None] | None:
    """Walk up from ``start``: (workspace root, the config we started in) or None.

    A config.toml with [solution] marks a solution folder. When its parent holds other solution
    folders (the per-definition layout), the parent is the workspace and the folder we are in
    becomes the active one.
    """
    start = start.resolve()
    for folder in (start, *start.parents):
        cfg = folder / CONFIG_NAME
        if cfg.is_file() and has_solution_table(cfg):
            if folder.name == "solution" or folder.parent.name == "solution":
                # An invalid config inside solution/: the workspace is above it; the check reports it.
                continue
            if folder.parent.name == CANDIDATES_DIR and _owns_candidates(folder.parent.parent):
                continue  # a contest-style candidate: the workspace is the solution it belongs to
            parent = folder.parent
            if parent != folder and _is_per_definition_root(parent, folder):
                return parent, cfg
            return folder, cfg
    # Not inside a solution folder: the start may be the root of a per-definition layout (a child
    # that is a repository of its own, a demo workspace say, is a workspace beside it, not part of it).
    children = [
        d / CONFIG_NAME
        for d in sorted(start.iterdir())
        if d.is_dir() and d.name not in SKIP_DIRS and not (d / ".git").exists()
    ]
    if any(p.is_file() and has_solution_table(p) for p in children):
        return start, None
    return None


def _looks_like_dataset(folder: Path) -> bool:
    return (folder / "definitions").is_dir()


def resolve_dataset(root: Path, explicit: str | Path | None) -> tuple[Path | None, str]:
    if explicit is not None:
        path = Path(explicit).expanduser()
        if not path.is_dir():
            raise InputError(path, "dataset folder does not exist", field="--dataset")
        if not _looks_like_dataset(path):
            raise InputError(
                path, "not a FlashInfer-Trace folder (no definitions/ inside)", field="--dataset"
            )
        return path.resolve(), "--dataset"
    env = os.environ.get("FIB_DATASET_PATH")
    if env:
        path = Path(env).expanduser()
        if not path.is_dir() or not _looks_like_dataset(path):
            raise InputError(
                path,
                "FIB_DATASET_PATH does not point at a FlashInfer-Trace folder (no definitions/ inside)",
                field="FIB_DATASET_PATH",
            )
        return path.resolve(), "FIB_DATASET_PATH"
    if _looks_like_dataset(root / "dataset"):
        return (root / "dataset").resolve(), "dataset/"
    candidates: list[Path] = []
    for parent in (root, root / "reference"):
        if parent.is_dir():
            candidates += [
                d for d in sorted(parent.iterdir()) if d.is_dir() and not d.name.startswith(".")
            ]
    for d in candidates:
        if _looks_like_dataset(d):
            return d.resolve(), f"embedded:{d.relative_to(root)}"
        if _looks_like_dataset(d / "dataset"):
            return (d / "dataset").resolve(), f"embedded:{(d / 'dataset').relative_to(root)}"
    return None, "none"


def open_workspace(
    workspace: str | Path | None = None,
    dataset: str | Path | None = None,
    cwd: str | Path | None = None,
) -> Workspace:
    """Find and open the workspace (``--workspace`` or upward from the current directory)."""
    active_cfg: Path | None = None
    if workspace is not None:
        root = Path(workspace).expanduser()
        try:
            is_dir = root.is_dir()
        except (OSError, ValueError):
            is_dir = False
        if not is_dir:
            raise InputError(root, "workspace folder does not exist", field="--workspace")
        root = root.resolve()
        cfg = root / CONFIG_NAME
        marked = any((root / m).exists() for m in ("fibtui.toml", ARCHIVE_DIR))
        if not marked and not (cfg.is_file() and has_solution_table(cfg)):
            # a folder with a config.toml, fibtui.toml or an archive (optimize_ops/) is one; else
            # a workspace is found only upward from the folder given (or one folder below it,
            # the per-definition layout): never by walking everything under it
            found = find_workspace_root(root)
            if found is None:
                raise InputError(
                    root,
                    f"not a workspace: no {CONFIG_NAME} with a [solution] table, fibtui.toml or "
                    f"{ARCHIVE_DIR}/ in it, and no workspace above it or just below it",
                    field="--workspace",
                )
            root, active_cfg = found
    else:
        found = find_workspace_root(Path(cwd or os.getcwd()))
        if found is None:
            raise UsageError(
                f"no workspace found from {Path(cwd or os.getcwd()).resolve()} upward (a {CONFIG_NAME} "
                "with a [solution] table); pass --workspace DIR, or try the bundled demo: fibtui demo DIR"
            )
        root, active_cfg = found
    topology = check_topology(root)
    active = None
    if active_cfg is not None:
        active = next(
            (c for c in topology.configs if c.path == active_cfg.resolve() or c.path == active_cfg),
            None,
        )
    if active is None and topology.configs:
        active = topology.configs[0]
    dataset_root, source = resolve_dataset(root, dataset)
    return Workspace(root, topology, active, dataset_root, source)
