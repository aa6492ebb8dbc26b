"""Submission: pack solution.json from config.toml + sources, and the ``submission-vN`` tags.

Packing runs the topology check first (nothing is packed from an invalid workspace), then takes
every file under ``solution/<language>/`` except caches and config files (hidden files and folders,
``__pycache__``, ``build/``, ``dist/``, compiled objects, ``config.toml``, ``fibtui.toml``). Each
source is packed byte for byte (read as bytes, decoded as UTF-8, no newline translation). The
JSON is checked with fibtui's own solution parser and, when the ``bench`` extra is installed, with
flashinfer-bench's Solution model.

Tags. The contest evaluates the latest ``submission-vN`` tag of a repo. fibtui numbers the next tag
from every existing tag, local and on the remote (read with ``ls-remote``, which changes nothing
locally), so gaps are kept (v1, v3 -> v4). Creating it and pushing the branch and the tag are three
separate steps (:func:`create_tag`, :func:`push_branch`, :func:`push_tag`) so the TUI can confirm
each. A tag is refused when:

- the topology check fails;
- the worktree has uncommitted changes (untracked files included) under the solution's source
  folder or its config.toml: the tag would not hold what was measured;
- the tagged commit's config.toml is missing or names another definition than the active one, or
  the entry point file is not committed.

Several definitions (the per-definition topology). With the default ``plain`` scheme the tag is
repo-wide: one ``submission-vN`` covers every definition as it is at that commit, numbered across
the repo; the plan warns that the other definitions are submitted at that commit too. The
``per-definition`` scheme (``--per-definition``, or ``[submission] tag_scheme = "per-definition"``
in fibtui.toml) names tags ``submission-<definition>-vN``, numbered per definition, for evaluators
that take the latest tag per definition by name.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import git

from fibtui.core import safetree
from fibtui.core.dataset import parse_solution
from fibtui.core.errors import CheckFailed, InputError, UsageError
from fibtui.core.fsio import atomic_write_text
from fibtui.core.settings import get_setting
from fibtui.core.workspace import CONFIG_NAME, SolutionConfig, Topology, check_topology

DEFAULT_TARGET_HARDWARE = ("B200",)
DEFAULT_BINDING = "tvm-ffi"
#: Folder names never packed (besides every hidden one).
EXCLUDED_DIRS = {"__pycache__", "build", "dist", "node_modules"}
#: File names never packed (besides every hidden one).
EXCLUDED_FILES = {CONFIG_NAME, "fibtui.toml", "solution.json"}
#: Suffixes of compiled or cached files never packed.
EXCLUDED_SUFFIXES = (".pyc", ".pyo", ".o", ".obj", ".so", ".a", ".dylib", ".dll", ".egg-info")
PUSH_TIMEOUT_S = 120.0
_NETWORK_ENV = {"GIT_TERMINAL_PROMPT": "0"}

# --------------------------------------------------------------------------------------------
# Packing
# --------------------------------------------------------------------------------------------


def topology_or_refuse(workspace: str | Path) -> Topology:
    topo = check_topology(workspace)
    if topo.problems:
        raise CheckFailed("topology check failed: " + "; ".join(str(p) for p in topo.problems))
    return topo


def select_config(workspace: str | Path, definition: str | None = None) -> SolutionConfig:
    """The solution config to submit, after the topology check (which runs first)."""
    topo = topology_or_refuse(workspace)
    if definition is None:
        if len(topo.configs) > 1:
            raise UsageError(
                "several definitions here ("
                + ", ".join(c.definition for c in topo.configs)
                + "); name one with --definition"
            )
        return topo.configs[0]
    for c in topo.configs:
        if c.definition == definition:
            return c
    raise UsageError(f"no solution config for definition {definition!r} in {workspace}")


def _excluded_dir(name: str) -> bool:
    return name.startswith(".") or name in EXCLUDED_DIRS or name.endswith(".egg-info")


def _excluded_file(name: str) -> bool:
    return name.startswith(".") or name in EXCLUDED_FILES or name.endswith(EXCLUDED_SUFFIXES)


def packable_files(cfg: SolutionConfig) -> tuple[list[Path], list[str]]:
    """(files to pack, relative paths left out) under the config's source folder, sorted, read by
    the one safe reader (fibtui.core.safetree): a link out of the folder is refused, the file
    count and size limits are said when reached. A kept link (to a file of the folder) is packed
    under its own name."""
    root = cfg.source_dir
    excluded: list[str] = []
    listed = safetree.list_files(
        root,
        skip_dir=_excluded_dir,
        skip_file=_excluded_file,
        excluded=excluded,
        what="source folder to pack",
    )
    return [root / f.rel for f in listed], sorted(excluded)


def _read_source(path: Path) -> str:
    return safetree.read_text(
        safetree.TreeFile(path.name, Path(os.path.realpath(path)), 0), shown=path
    )


def _str_list(cfg: SolutionConfig, key: str) -> list[str] | None:
    value = cfg.raw.get("build", {}).get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise InputError(cfg.path, "expected a list of non-empty strings", field=f"build.{key}")
    return list(value)


@dataclass
class PackResult:
    config: SolutionConfig
    solution: dict[str, Any]
    files: list[Path]
    excluded: list[str]
    bench_checked: str | None = None  # flashinfer-bench's version when it validated the JSON

    def to_json(self, output: Path | None = None) -> dict[str, Any]:
        return {
            "definition": self.config.definition,
            "name": self.solution["name"],
            "config": str(self.config.path),
            "output": str(output) if output else None,
            "entry_point": self.solution["spec"]["entry_point"],
            "sources": [s["path"] for s in self.solution["sources"]],
            "files": [
                {"path": s["path"], "bytes": len(s["content"].encode("utf-8"))}
                for s in self.solution["sources"]
            ],
            "excluded": self.excluded,
            "target_hardware": self.solution["spec"]["target_hardware"],
            "destination_passing_style": self.solution["spec"]["destination_passing_style"],
            "flashinfer_bench": self.bench_checked,
        }


def pack_solution(
    workspace: str | Path,
    definition: str | None = None,
    target_hardware: list[str] | None = None,
    description: str | None = None,
) -> PackResult:
    """Build the solution.json object for a definition (the topology check runs first)."""
    cfg = select_config(workspace, definition)
    if not cfg.author.strip():
        raise InputError(cfg.path, "required for a submission", field="solution.author")
    files, excluded = packable_files(cfg)
    if not files:
        raise InputError(cfg.path, f"nothing to pack in {cfg.source_dir}", field="build.language")
    rels = [p.relative_to(cfg.source_dir).as_posix() for p in files]
    if cfg.entry_file is None or cfg.entry_file not in rels:
        raise InputError(
            cfg.path,
            f"entry point file {cfg.entry_file!r} is not among the packed sources "
            f"({', '.join(rels)})",
            field="build.entry_point",
        )
    hardware = target_hardware or _str_list(cfg, "target_hardware")
    if not hardware:
        setting = get_setting(workspace, "submission.target_hardware", None)
        if setting is not None and (
            not isinstance(setting, list) or not all(isinstance(h, str) and h for h in setting)
        ):
            raise InputError(
                Path(workspace) / "fibtui.toml",
                "expected a list of strings",
                field="submission.target_hardware",
            )
        hardware = list(setting) if setting else list(DEFAULT_TARGET_HARDWARE)
    spec: dict[str, Any] = {
        "language": cfg.language,
        "target_hardware": list(hardware),
        "entry_point": cfg.entry_point,
        "dependencies": _str_list(cfg, "dependencies") or [],
        "destination_passing_style": cfg.dps,
    }
    if cfg.language in ("cuda", "cpp"):
        spec["binding"] = cfg.binding or DEFAULT_BINDING
    if description is None:
        raw_desc = cfg.raw.get("solution", {}).get("description")
        description = raw_desc if isinstance(raw_desc, str) else ""
    obj: dict[str, Any] = {
        "name": cfg.name,
        "definition": cfg.definition,
        "author": cfg.author,
        "spec": spec,
        "sources": [
            {"path": rel, "content": _read_source(p)} for rel, p in zip(rels, files, strict=True)
        ],
        "description": description,
    }
    parse_solution(obj, cfg.path)  # our own reader must accept what we write
    result = PackResult(cfg, obj, files, excluded)
    result.bench_checked = validate_with_flashinfer_bench(obj)
    return result


def validate_with_flashinfer_bench(obj: dict[str, Any]) -> str | None:
    """Load the JSON with flashinfer-bench's Solution model; None when the extra is not installed."""
    from fibtui.core.toolchain import bench_version

    try:
        from flashinfer_bench.data import Solution
    except ImportError:
        return None
    version = bench_version() or "?"
    try:
        if hasattr(Solution, "model_validate_json"):
            Solution.model_validate_json(json.dumps(obj))
        else:  # pragma: no cover - older releases without pydantic
            return None
    except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
        raise CheckFailed(
            f"flashinfer-bench {version} rejects the packed solution: {' '.join(str(exc).split())}"
        ) from None
    return version


def default_output(cfg: SolutionConfig) -> Path:
    return cfg.folder / "solution.json"


def write_solution_json(result: PackResult, output: str | Path | None = None) -> Path:
    path = Path(output) if output is not None else default_output(result.config)
    return atomic_write_text(path, json.dumps(result.solution, indent=2, ensure_ascii=False) + "\n")


# --------------------------------------------------------------------------------------------
# Tags
# --------------------------------------------------------------------------------------------

SCHEMES = ("plain", "per-definition")
_PLAIN_TAG = re.compile(r"submission-v([0-9]+)")
_DEF_TAG = re.compile(r"submission-(.+)-v([0-9]+)", re.DOTALL)


def _tag_definition_part(definition: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", definition)


def tag_name(number: int, definition: str | None = None) -> str:
    return (
        f"submission-v{number}"
        if definition is None
        else f"submission-{_tag_definition_part(definition)}-v{number}"
    )


def parse_tag(name: str) -> tuple[str | None, int] | None:
    """``submission-v3`` -> (None, 3); ``submission-gdn_decode-v2`` -> ("gdn_decode", 2)."""
    m = _PLAIN_TAG.fullmatch(name)
    if m:
        return None, int(m.group(1))
    m = _DEF_TAG.fullmatch(name)
    if m:
        return m.group(1), int(m.group(2))
    return None


@dataclass
class SubmissionTag:
    name: str
    number: int
    definition: str | None
    commit: str | None
    local: bool = False
    remote: bool = False


@dataclass
class TagPlan:
    """What ``create_tag`` would do, and every reason it refuses (``problems``)."""

    definition: str
    scheme: str
    tag: str
    number: int
    head: str | None
    branch: str | None
    remote: str
    remote_checked: bool
    repo_root: str
    config: str  # config.toml relative to the repo root
    source_dir: str  # relative to the repo root
    existing: list[SubmissionTag] = field(default_factory=list)
    latest: SubmissionTag | None = None
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ok"] = self.ok
        return out


def _open_repo(workspace: str | Path) -> git.Repo:
    try:
        return git.Repo(Path(workspace), search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise UsageError(
            f"{workspace} is not inside a git repository (submission tags need one)"
        ) from None


def _rel(repo: git.Repo, path: Path) -> str:
    top = Path(repo.working_tree_dir or ".").resolve()
    return path.resolve().relative_to(top).as_posix()


def _scheme(workspace: str | Path, scheme: str | None) -> str:
    if scheme is None:
        scheme = get_setting(workspace, "submission.tag_scheme", "plain")
    if scheme not in SCHEMES:
        raise InputError(
            Path(workspace) / "fibtui.toml",
            f"expected one of {', '.join(SCHEMES)}, got {scheme!r}",
            field="submission.tag_scheme",
        )
    return str(scheme)


def existing_submission_tags(
    repo: git.Repo, remote: str | None = "origin", timeout_s: float = 30.0
) -> tuple[list[SubmissionTag], str | None]:
    """Every submission tag, local and on ``remote``; (tags, the remote's error or None)."""
    tags: dict[str, SubmissionTag] = {}
    for ref in repo.tags:
        parsed = parse_tag(ref.name)
        if parsed is None:
            continue
        try:
            commit = ref.commit.hexsha
        except ValueError:  # a tag of a tree or a blob
            commit = None
        tags[ref.name] = SubmissionTag(ref.name, parsed[1], parsed[0], commit, local=True)
    remote_error = None
    if remote is not None:
        try:
            out = str(
                repo.git.ls_remote("--tags", remote, kill_after_timeout=timeout_s, env=_NETWORK_ENV)
            )
        except git.GitCommandError as exc:
            remote_error = " ".join(str(exc.stderr or exc).replace("stderr:", "").split()).strip(
                " '"
            )
            out = ""
        peeled: dict[str, str] = {}
        plain: dict[str, str] = {}
        for line in out.splitlines():
            sha, _, refname = line.partition("\t")
            if not refname.startswith("refs/tags/"):
                continue
            name = refname[len("refs/tags/") :]
            if name.endswith("^{}"):
                peeled[name[:-3]] = sha
            else:
                plain[name] = sha
        for name, sha in plain.items():
            parsed = parse_tag(name)
            if parsed is None:
                continue
            commit = peeled.get(name, sha)
            if name in tags:
                tags[name].remote = True
            else:
                tags[name] = SubmissionTag(name, parsed[1], parsed[0], commit, remote=True)
    return sorted(tags.values(), key=lambda t: (t.definition or "", t.number)), remote_error


def _relevant(tags: list[SubmissionTag], scheme: str, definition: str) -> list[SubmissionTag]:
    if scheme == "plain":
        return [t for t in tags if t.definition is None]
    want = _tag_definition_part(definition)
    return [t for t in tags if t.definition == want]


def next_tag_number(tags: list[SubmissionTag], scheme: str = "plain", definition: str = "") -> int:
    mine = _relevant(tags, scheme, definition)
    return max((t.number for t in mine), default=0) + 1


def _porcelain_paths(out: str) -> list[str]:
    entries = out.split("\0")
    paths: list[str] = []
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        paths.append(entry[3:])
        if entry[0] in "RC":
            i += 1  # the rename's source path follows
    return paths


def _local_problems(repo: git.Repo, cfg: SolutionConfig, head: str) -> list[str]:
    problems: list[str] = []
    cfg_rel = _rel(repo, cfg.path)
    src_rel = _rel(repo, cfg.source_dir)
    status = repo.git.status(
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--",
        src_rel,
        cfg_rel,
        strip_newline_in_stdout=False,
    )
    dirty = _porcelain_paths(status)
    if dirty:
        shown = ", ".join(dirty[:8]) + (f" and {len(dirty) - 8} more" if len(dirty) > 8 else "")
        problems.append(
            f"uncommitted changes under {src_rel}/ or in {cfg_rel}: {shown} (commit them first: "
            "the tag must hold what was measured)"
        )
    try:
        committed = repo.git.show(f"{head}:{cfg_rel}")
    except git.GitCommandError:
        problems.append(f"{cfg_rel} is not committed at {head[:12]}")
        return problems
    try:
        data = tomllib.loads(committed)
        committed_def = data.get("solution", {}).get("definition")
    except (tomllib.TOMLDecodeError, AttributeError):
        problems.append(f"{cfg_rel} at {head[:12]} is not valid TOML")
        return problems
    if committed_def != cfg.definition:
        problems.append(
            f"{cfg_rel} at {head[:12]} names definition {committed_def!r}, not the active {cfg.definition!r}"
        )
    if cfg.entry_file:
        try:
            repo.git.cat_file("-e", f"{head}:{src_rel}/{cfg.entry_file}")
        except git.GitCommandError:
            problems.append(
                f"entry point file {src_rel}/{cfg.entry_file} is not committed at {head[:12]}"
            )
    return problems


def plan_tag(
    workspace: str | Path,
    definition: str | None = None,
    remote: str | None = None,
    scheme: str | None = None,
    check_remote: bool = True,
    timeout_s: float = 30.0,
) -> TagPlan:
    """The next submission tag and the checks, without changing anything."""
    cfg = select_config(workspace, definition)
    scheme = _scheme(workspace, scheme)
    repo = _open_repo(workspace)
    try:
        branch = None if repo.head.is_detached else repo.active_branch.name
        if remote is None:
            tracking = repo.active_branch.tracking_branch() if branch else None
            remote = (
                tracking.remote_name
                if tracking is not None and tracking.remote_name != "."
                else "origin"
            )
        head = repo.head.commit.hexsha if repo.head.is_valid() else None
        remote_known = remote in {r.name for r in repo.remotes}
        tags, remote_error = existing_submission_tags(
            repo, remote if (check_remote and remote_known) else None, timeout_s
        )
        number = next_tag_number(tags, scheme, cfg.definition)
        plan = TagPlan(
            definition=cfg.definition,
            scheme=scheme,
            tag=tag_name(number, None if scheme == "plain" else cfg.definition),
            number=number,
            head=head,
            branch=branch,
            remote=remote,
            remote_checked=check_remote and remote_known and remote_error is None,
            repo_root=str(repo.working_tree_dir),
            config=_rel(repo, cfg.path),
            source_dir=_rel(repo, cfg.source_dir),
            existing=tags,
        )
        mine = _relevant(tags, scheme, cfg.definition)
        plan.latest = max(mine, key=lambda t: t.number) if mine else None
        if head is None:
            plan.problems.append("the repository has no commits yet")
            return plan
        plan.problems += _local_problems(repo, cfg, head)
        if not remote_known:
            plan.warnings.append(
                f"no remote {remote!r}: tags on a remote were not counted and nothing can be pushed"
            )
        elif not check_remote:
            plan.warnings.append(f"tags on {remote} were not checked")
        elif remote_error:
            plan.warnings.append(
                f"could not read tags on {remote} ({remote_error}); numbered from local tags only"
            )
        if branch is None:
            plan.warnings.append(
                "detached HEAD: the tag can be created and pushed, the branch cannot"
            )
        on_head = [t.name for t in mine if t.commit == head]
        if on_head:
            plan.warnings.append(
                f"HEAD is already tagged {', '.join(on_head)}: a new tag re-submits the same commit"
            )
        topo = check_topology(workspace)
        others = [c.definition for c in topo.configs if c.definition != cfg.definition]
        if others and scheme == "plain":
            plan.warnings.append(
                "a plain tag covers the whole repo: "
                + ", ".join(others)
                + " are submitted as they are at this commit too"
            )
        return plan
    finally:
        repo.close()


@dataclass
class TagStep:
    """The outcome of one step: the tag, the commit it points at, what was done."""

    tag: str
    commit: str
    action: str  # "created" | "pushed branch" | "pushed tag"
    remote: str | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def create_tag(workspace: str | Path, plan: TagPlan, message: str | None = None) -> TagStep:
    """Create the planned tag on HEAD (annotated). The local checks run again first."""
    if plan.problems:
        raise CheckFailed("refusing to tag: " + "; ".join(plan.problems))
    fresh = plan_tag(
        workspace, plan.definition, remote=plan.remote, scheme=plan.scheme, check_remote=False
    )
    if fresh.problems:
        raise CheckFailed("refusing to tag: " + "; ".join(fresh.problems))
    if fresh.head != plan.head:
        raise CheckFailed(
            f"HEAD moved since the plan ({(plan.head or '-')[:12]} -> {(fresh.head or '-')[:12]}); plan again"
        )
    if any(t.name == plan.tag and t.local for t in fresh.existing) or fresh.number > plan.number:
        raise CheckFailed(f"tag {plan.tag} (or a later one) exists already; plan again")
    assert plan.head is not None
    repo = _open_repo(workspace)
    try:
        msg = message or f"fibtui submission of {plan.definition} ({plan.tag})"
        try:
            repo.create_tag(plan.tag, ref=plan.head, message=msg)
        except git.GitCommandError as exc:
            raise CheckFailed(
                f"git tag {plan.tag} failed: {' '.join(str(exc.stderr).split())}"
            ) from None
        return TagStep(plan.tag, plan.head, "created")
    finally:
        repo.close()


def _push(workspace: str | Path, remote: str, refspec: str, timeout_s: float) -> str:
    repo = _open_repo(workspace)
    try:
        if remote not in {r.name for r in repo.remotes}:
            raise UsageError(f"no remote {remote!r} in {repo.working_tree_dir}")
        try:
            return repo.git.push(
                "--porcelain", remote, refspec, kill_after_timeout=timeout_s, env=_NETWORK_ENV
            )
        except git.GitCommandError as exc:
            raise CheckFailed(
                f"git push {remote} {refspec} failed: {' '.join(str(exc.stderr).split())}"
            ) from None
    finally:
        repo.close()


def push_branch(workspace: str | Path, plan: TagPlan, timeout_s: float = PUSH_TIMEOUT_S) -> TagStep:
    """Push the branch the tag was made on (never forced)."""
    if plan.branch is None:
        raise UsageError("detached HEAD: there is no branch to push")
    ref = f"refs/heads/{plan.branch}"
    detail = _push(workspace, plan.remote, f"{ref}:{ref}", timeout_s)
    return TagStep(plan.tag, plan.head or "", "pushed branch", plan.remote, detail)


def push_tag(workspace: str | Path, plan: TagPlan, timeout_s: float = PUSH_TIMEOUT_S) -> TagStep:
    ref = f"refs/tags/{plan.tag}"
    detail = _push(workspace, plan.remote, f"{ref}:{ref}", timeout_s)
    return TagStep(plan.tag, plan.head or "", "pushed tag", plan.remote, detail)
