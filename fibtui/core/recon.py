"""Recon before code: the reference repos, refreshed safely, searched, and the recon note.

Reference repos are every immediate child of ``<workspace>/reference/`` holding a ``.git`` plus
the support checkouts embedded in the workspace itself (an immediate child folder of the workspace
root that is a git repository, e.g. a flashinfer-bench or dataset checkout). Nothing outside the
workspace is touched: a child that is a symlink leading out of it is skipped.

Refreshing never loses a local change. Per repository:

- fetch with prune from the branch's upstream remote (the first remote when there is no upstream);
- clean and only behind: fast-forward to the upstream (``merge --ff-only`` right after the fetch,
  which is what ``pull --ff-only`` does, without a second network round trip);
- dirty (tracked changes): fetched only, reported as not advanced, with the upstream's newest
  commit; never stashed, reset or checked out;
- diverged (ahead and behind): reported, nothing merged;
- no upstream, detached HEAD, a network error or a timeout: reported in ``error``; one repo's
  failure never stops the others.

Search runs ``git grep -n -I -i -F`` over each repo's tracked files with terms from the definition
name (``gdn``, ``decode``, ``qk4``, ``k_last``, ``topk2048`` and ``topk``...) and operator-family
keywords from :data:`DEFAULT_KEYWORDS` (editable per workspace in ``fibtui.toml``)::

    [recon.keywords]
    gdn = ["delta rule", "chunk", "state"]   # an op_type, or a family name (moe, recurrence...)

Hits are ranked: the exact definition name first, then lines matching several terms, then
implementation folders (csrc/, include/, kernels, tests, benchmarks).

The recon note is Markdown in ``optimize_ops/docs/recon_<YYYY-MM-DD>_<definition>.md``: a title,
``- key: value`` metadata and one table (repo, commit, path, relevance, reusable piece, next
action). It is parsed strictly: a bad row names the file, the line and the field. A pipe inside a
cell is written ``\\|`` and a backslash ``\\\\``; a cell holds one line.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import git

from fibtui.core.errors import InputError
from fibtui.core.fsio import atomic_write_json, atomic_write_text, read_input
from fibtui.core.settings import get_setting
from fibtui.core.workspace import archive_root_of, state_dir_of

REFERENCE_DIR = "reference"
DEFAULT_TIMEOUT_S = 60.0
#: Environment for network git commands: never wait on a password prompt.
_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0"}

# --------------------------------------------------------------------------------------------
# Discovery
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RefRepo:
    """A repository recon looks at: ``kind`` is "reference" (under reference/) or "embedded"."""

    name: str
    path: Path
    kind: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": str(self.path), "kind": self.kind}


def _is_git_checkout(folder: Path) -> bool:
    # A plain clone has a .git folder; a submodule or a linked worktree has a .git file.
    return (folder / ".git").exists()


def _inside(child: Path, root: Path) -> bool:
    try:
        child.resolve().relative_to(root)
    except ValueError:
        return False
    return True


def discover_repos(workspace: str | Path) -> list[RefRepo]:
    """Every reference repo of the workspace: children of reference/ first, then embedded ones."""
    root = Path(workspace).resolve()
    found: list[RefRepo] = []
    ref_dir = root / REFERENCE_DIR
    if ref_dir.is_dir() and _inside(ref_dir, root):
        for child in sorted(ref_dir.iterdir()):
            if (
                child.is_dir()
                and not child.name.startswith(".")
                and _inside(child, root)
                and _is_git_checkout(child)
            ):
                found.append(RefRepo(child.name, child, "reference"))
    for child in sorted(root.iterdir()):
        if child.name == REFERENCE_DIR or child.name.startswith("."):
            continue
        if child.is_dir() and _inside(child, root) and _is_git_checkout(child):
            found.append(RefRepo(child.name, child, "embedded"))
    return found


# --------------------------------------------------------------------------------------------
# Refresh
# --------------------------------------------------------------------------------------------


@dataclass
class RefreshResult:
    """What refreshing one repo did. ``head`` is the commit inspected (after any fast-forward)."""

    name: str
    path: str
    kind: str = "reference"
    branch: str | None = None
    dirty: bool = False
    untracked: int = 0
    fetched: bool = False
    advanced: bool = False
    diverged: bool = False
    head_before: str | None = None
    head: str | None = None
    upstream: str | None = None
    upstream_head: str | None = None
    ahead: int | None = None
    behind: int | None = None
    state: str = "unknown"
    error: str | None = None
    refreshed_at: str = ""
    duration_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _git_error_text(exc: git.GitCommandError) -> str:
    stderr = exc.stderr if isinstance(exc.stderr, str) else str(exc.stderr or "")
    text = " ".join(stderr.replace("stderr:", "").split()).strip(" '")
    return text or f"git exited with status {exc.status}"


def _network_env(repo: git.Repo) -> dict[str, str]:
    env = dict(_GIT_ENV)
    if "GIT_SSH_COMMAND" not in os.environ and "GIT_SSH" not in os.environ:
        with repo.config_reader() as cr:
            if not cr.has_option("core", "sshCommand"):
                env["GIT_SSH_COMMAND"] = "ssh -o BatchMode=yes"
    return env


def _refresh_into(res: RefreshResult, timeout_s: float) -> None:
    repo = git.Repo(res.path)
    try:
        g = repo.git
        if not repo.head.is_valid():
            res.state = "error"
            res.error = "no commits yet"
            return
        res.head_before = res.head = repo.head.commit.hexsha
        res.branch = None if repo.head.is_detached else repo.active_branch.name
        res.dirty = repo.is_dirty(index=True, working_tree=True, untracked_files=False)
        res.untracked = len(repo.untracked_files)
        tracking = repo.active_branch.tracking_branch() if res.branch else None
        if tracking is not None and tracking.remote_name not in {r.name for r in repo.remotes}:
            tracking = None  # an upstream on "." (a local branch) is nothing to fetch
        remote_name = (
            tracking.remote_name
            if tracking is not None
            else (repo.remotes[0].name if repo.remotes else None)
        )
        if remote_name is None:
            res.state = "no remote"
            res.error = "no remote configured"
            return
        try:
            g.fetch(
                "--prune",
                "--quiet",
                remote_name,
                kill_after_timeout=timeout_s,
                env=_network_env(repo),
            )
            res.fetched = True
        except git.GitCommandError as exc:
            res.state = "error"
            res.error = f"fetch from {remote_name} failed: {_git_error_text(exc)}"
            return
        if tracking is None:
            res.state = "no upstream"
            res.error = (
                f"detached HEAD at {res.head[:12]}: fetched only"
                if res.branch is None
                else f"branch {res.branch} has no upstream: fetched only"
            )
            return
        res.upstream = tracking.name
        try:
            res.upstream_head = repo.commit(tracking.path).hexsha
        except (ValueError, git.BadName):
            res.state = "error"
            res.error = f"upstream {tracking.name} no longer exists on {remote_name}"
            return
        res.ahead, res.behind = _ahead_behind(g, tracking.path)
        if res.ahead and res.behind:
            res.diverged = True
            res.state = "diverged"
            return
        if not res.behind:
            res.state = "ahead" if res.ahead else "up to date"
            return
        if res.dirty:
            res.state = "not advanced (dirty)"
            return
        try:
            g.merge("--ff-only", "--quiet", tracking.path, kill_after_timeout=timeout_s)
        except git.GitCommandError as exc:
            res.state = "error"
            res.error = f"fast-forward failed: {_git_error_text(exc)}"
            return
        res.head = repo.head.commit.hexsha
        res.advanced = res.head != res.head_before
        res.ahead, res.behind = _ahead_behind(g, tracking.path)
        res.state = "fast-forwarded"
    finally:
        repo.close()


def _ahead_behind(g: git.Git, upstream_ref: str) -> tuple[int, int]:
    out = g.rev_list("--left-right", "--count", f"HEAD...{upstream_ref}")
    left, _, right = out.strip().partition("\t")
    return int(left), int(right)


def refresh_repo(repo: RefRepo, timeout_s: float = DEFAULT_TIMEOUT_S) -> RefreshResult:
    """Refresh one repo; never raises for a problem of that repo (it lands in ``error``)."""
    res = RefreshResult(
        name=repo.name, path=str(repo.path), kind=repo.kind, refreshed_at=_now_iso()
    )
    started = time.monotonic()
    try:
        _refresh_into(res, timeout_s)
    except git.GitCommandError as exc:
        res.state = "error"
        res.error = _git_error_text(exc)
    except (git.GitError, OSError, ValueError, TypeError) as exc:
        # Each repo is refreshed on its own: a broken one is reported, the others go on.
        res.state = "error"
        res.error = f"{type(exc).__name__}: {exc}"
    res.duration_s = round(time.monotonic() - started, 3)
    return res


def refresh_all(
    repos: Sequence[RefRepo],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    jobs: int = 4,
    on_result: Callable[[RefreshResult], None] | None = None,
) -> list[RefreshResult]:
    """Refresh every repo (``jobs`` at a time), results in the order of ``repos``.

    ``on_result`` is called with each result as it completes (from the calling thread)."""
    if not repos:
        return []
    results: dict[int, RefreshResult] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(repos)))) as pool:
        futures = {pool.submit(refresh_repo, r, timeout_s): i for i, r in enumerate(repos)}
        for fut in as_completed(futures):
            res = fut.result()
            results[futures[fut]] = res
            if on_result is not None:
                on_result(res)
    return [results[i] for i in range(len(repos))]


def refresh_record_path(workspace: str | Path) -> Path:
    return state_dir_of(workspace) / "cache" / "recon_refresh.json"


def save_refresh(workspace: str | Path, results: Sequence[RefreshResult]) -> Path:
    """Keep the last refresh (commits inspected, time) for the Recon pane."""
    return atomic_write_json(
        refresh_record_path(workspace),
        {
            "refreshed_at": _now_iso(),
            "repos": [r.to_json() for r in results],
        },
    )


def last_refresh(workspace: str | Path) -> list[RefreshResult] | None:
    """The last saved refresh, or None when there is none (or it is unreadable: it is a cache)."""
    path = refresh_record_path(workspace)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        known = set(RefreshResult.__dataclass_fields__)
        return [RefreshResult(**{k: v for k, v in r.items() if k in known}) for r in data["repos"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


# --------------------------------------------------------------------------------------------
# Search terms
# --------------------------------------------------------------------------------------------

#: Operator-family keywords. Editable per workspace: ``[recon.keywords] <op_type or family> = [...]``.
DEFAULT_KEYWORDS: dict[str, list[str]] = {
    "sparse_attention": [
        "sparse attention",
        "topk",
        "indexer",
        "gather",
        "paged",
        "ragged",
        "decode",
        "page table",
        "kv cache",
        "ckv",
    ],
    "attention": [
        "attention",
        "paged",
        "ragged",
        "decode",
        "prefill",
        "kv cache",
        "page table",
        "online softmax",
        "split kv",
    ],
    "moe": ["moe", "routing", "expert", "grouped gemm", "topk", "permute", "block scale", "swiglu"],
    "recurrence": [
        "delta rule",
        "gated delta",
        "chunk",
        "scan",
        "state",
        "recurrent",
        "linear attention",
        "mamba",
    ],
    "gemm": ["gemm", "matmul", "wgmma", "tcgen05", "split k", "epilogue", "block scale"],
    "norm": ["rmsnorm", "layernorm", "rsqrt", "reduction"],
    "sampling": ["sampling", "top p", "top k", "multinomial", "softmax"],
}

#: (family, markers): the first family with a marker in the op_type, else in the definition name.
FAMILY_MARKERS: list[tuple[str, tuple[str, ...]]] = [
    ("sparse_attention", ("dsa", "sparse", "indexer", "nsa")),
    ("moe", ("moe", "expert")),
    (
        "recurrence",
        (
            "gdn",
            "delta",
            "mamba",
            "ssm",
            "linear_attn",
            "linear_attention",
            "rwkv",
            "retention",
            "recurrent",
        ),
    ),
    ("attention", ("gqa", "mla", "mha", "mqa", "attention", "attn")),
    ("gemm", ("gemm", "matmul")),
    ("norm", ("norm",)),
    ("sampling", ("sampling", "sample")),
]

#: Name parts that say nothing about the operator.
_STOP_TOKENS = {"demo", "op", "kernel", "the", "and", "fused"}


def operator_family(op_type: str | None, definition: str | None = None) -> str | None:
    for text in (op_type, definition):
        if not text:
            continue
        low = text.lower()
        for family, markers in FAMILY_MARKERS:
            if any(m in low for m in markers):
                return family
    return None


def keyword_table(workspace: str | Path | None = None) -> dict[str, list[str]]:
    """The default table with the workspace's ``[recon.keywords]`` entries laid over it."""
    table = {k: list(v) for k, v in DEFAULT_KEYWORDS.items()}
    if workspace is None:
        return table
    override = get_setting(workspace, "recon.keywords", None)
    if override is None:
        return table
    where = Path(workspace) / "fibtui.toml"
    if not isinstance(override, dict):
        raise InputError(where, "expected a table of lists of strings", field="recon.keywords")
    for key, words in override.items():
        if not isinstance(words, list) or not all(isinstance(w, str) and w.strip() for w in words):
            raise InputError(
                where, "expected a list of non-empty strings", field=f"recon.keywords.{key}"
            )
        table[str(key)] = [w.strip() for w in words]
    return table


def operator_keywords(
    op_type: str | None, definition: str | None, table: dict[str, list[str]] | None = None
) -> list[str]:
    table = DEFAULT_KEYWORDS if table is None else table
    if op_type and op_type in table:
        return list(table[op_type])
    family = operator_family(op_type, definition)
    return list(table.get(family, [])) if family else []


def definition_tokens(name: str) -> list[str]:
    """Search tokens from a definition name.

    ``gdn_decode_qk4_v8_d128_k_last`` -> gdn, decode, qk4, v8, d128, k_last;
    ``dsa_topk_indexer_fp8_h64_d128_topk2048_ps64`` -> ..., topk2048, topk, ps64. A one-letter part
    joins the next one (``k_last``); a word followed by a number also yields the word (``topk``).
    """
    parts = [p for p in re.split(r"[_\-\s./]+", name.lower()) if p]
    joined: list[str] = []
    i = 0
    while i < len(parts):
        p = parts[i]
        if len(p) == 1 and p.isalpha() and i + 1 < len(parts):
            joined.append(f"{p}_{parts[i + 1]}")
            i += 2
            continue
        joined.append(p)
        i += 1
    out: list[str] = []
    for tok in joined:
        if tok in _STOP_TOKENS or len(tok) < 2 or (tok.isalpha() and len(tok) < 3):
            continue  # "ds" or "nn" would match everywhere
        if tok not in out:
            out.append(tok)
        m = re.fullmatch(r"([a-z]{3,})\d+", tok)
        if m and m.group(1) not in _STOP_TOKENS and m.group(1) not in out:
            out.append(m.group(1))
    return out


@dataclass(frozen=True)
class SearchTerm:
    text: str
    kind: str  # "name" | "prefix" | "token" | "keyword" | "user"
    rank: int = 0  # added to the kind's weight (a longer name prefix is more specific)

    @property
    def weight(self) -> int:
        return {"name": 100, "prefix": 40, "user": 30, "token": 30, "keyword": 12}.get(
            self.kind, 10
        ) + self.rank


def search_terms(
    definition: str | None,
    op_type: str | None = None,
    table: dict[str, list[str]] | None = None,
    extra: Iterable[str] = (),
) -> list[SearchTerm]:
    """Terms for a definition: its full name, its tokens, then the family keywords."""
    terms: list[SearchTerm] = []
    seen: set[str] = set()

    def add(text: str, kind: str, rank: int = 0) -> None:
        key = text.strip().lower()
        if len(key) >= 2 and key not in seen:
            seen.add(key)
            terms.append(SearchTerm(text.strip(), kind, rank))

    if definition:
        add(definition, "name")
        parts = definition.split("_")
        if parts and parts[0].lower() in _STOP_TOKENS and len(parts) > 1:
            parts = parts[1:]
            add("_".join(parts), "name")  # demo_gdn_decode_... also finds gdn_decode_...
        # Longer prefixes first: gdn_decode_qk4_v8_d128 finds a sibling definition without k_last.
        for n in range(len(parts) - 1, 1, -1):
            if len(parts[n - 1]) > 1:
                add("_".join(parts[:n]), "prefix", 58 * n // len(parts))  # by the share of the name
        for tok in definition_tokens(definition):
            add(tok, "token")
    for word in operator_keywords(op_type, definition, table):
        add(word, "keyword")
    for word in extra:
        add(word, "user")
    return terms


def _variants(term: str) -> list[str]:
    """``grouped gemm`` is also written grouped_gemm and groupedgemm."""
    low = term.lower()
    if " " not in low:
        return [low]
    return [low, low.replace(" ", "_"), low.replace(" ", "")]


# --------------------------------------------------------------------------------------------
# Search
# --------------------------------------------------------------------------------------------

#: Folders where reusable implementations and their tests live (ranked first).
IMPL_DIRS = (
    "csrc",
    "include",
    "kernels",
    "kernel",
    "src",
    "ops",
    "tests",
    "test",
    "benchmarks",
    "benchmark",
    "bench",
    "cuda",
    "triton",
    "python",
)
_DOC_SUFFIXES = (".md", ".rst", ".txt", ".html", ".ipynb")
_DATA_SUFFIXES = (".jsonl", ".csv", ".log", ".tsv")
_GREP_MAX_PER_FILE = 200
_LONG_LINE = 300  # minified or embedded data, not code to reuse


@dataclass
class SearchHit:
    repo: str
    path: str
    line: int
    text: str
    term: str
    commit: str | None = None
    terms: list[str] = field(default_factory=list)
    kind: str = "keyword"
    score: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SearchResult:
    hits: list[SearchHit]
    terms: list[SearchTerm]
    repos: list[dict[str, Any]]  # name, path, commit, matches, error
    total_matches: int = 0
    truncated: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "terms": [{"text": t.text, "kind": t.kind} for t in self.terms],
            "repos": self.repos,
            "total_matches": self.total_matches,
            "truncated": self.truncated,
            "hits": [h.to_json() for h in self.hits],
        }


def _path_score(path: str, tokens: Sequence[str]) -> int:
    parts = [p.lower() for p in path.split("/")]
    score = 0
    if any(p in IMPL_DIRS or p.startswith(("kernel", "test", "bench")) for p in parts[:-1]):
        score += 20
    name = parts[-1]
    if name.endswith(_DOC_SUFFIXES):
        score -= 10
    elif name.endswith(_DATA_SUFFIXES):
        score -= 15
    if any(len(t) >= 3 and t in path.lower() for t in tokens):
        score += 15
    return score


def _ere_escape(text: str) -> str:
    return re.sub(r"([\\.^$|?*+()\[\]{}])", r"\\\1", text)


def _grep_repo(
    repo: RefRepo, terms: Sequence[SearchTerm], timeout_s: float
) -> tuple[str | None, list[tuple[str, int, str]]]:
    """(HEAD commit, [(path, line, text)]) of every line matching any term (any variant)."""
    r = git.Repo(repo.path)
    try:
        commit = r.head.commit.hexsha if r.head.is_valid() else None
        # One alternation of escaped literals: git grep tests each -e pattern on each line in turn,
        # so 15 patterns over a large repo cost ~10 s where one alternation costs under a second.
        pattern = "|".join(_ere_escape(v) for t in terms for v in _variants(t.text))
        cmd = [
            "git",
            "-c",
            "grep.lineNumber=true",
            "-c",
            "grep.column=false",
            "-c",
            "grep.fullName=false",
            "-c",
            "core.quotePath=false",
            "grep",
            "-n",
            "-I",
            "-i",
            "-E",
            "-z",
            "--no-color",
        ]
        if r.git.version_info >= (2, 38):
            cmd += ["-m", str(_GREP_MAX_PER_FILE)]
        cmd += ["-e", pattern]
        status, out, err = r.git.execute(
            cmd,
            with_extended_output=True,
            with_exceptions=False,
            stdout_as_string=False,
            kill_after_timeout=timeout_s,
        )
    finally:
        r.close()
    if status == 1 and not err:
        return commit, []
    if status != 0:
        message = str(err)  # GitPython decodes stderr even when stdout stays bytes
        raise git.GitCommandError(
            cmd[:1] + ["grep"], status, " ".join(message.split()) or f"status {status}"
        )
    rows: list[tuple[str, int, str]] = []
    for raw in out.split(b"\n"):
        if not raw:
            continue
        fields = raw.split(b"\0", 2)
        if len(fields) != 3 or not fields[1].isdigit():
            continue
        rows.append(
            (
                fields[0].decode("utf-8", "replace"),
                int(fields[1]),
                fields[2].decode("utf-8", "replace"),
            )
        )
    return commit, rows


def search_repos(
    repos: Sequence[RefRepo],
    terms: Sequence[SearchTerm],
    limit: int | None = 200,
    per_file: int | None = 5,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> SearchResult:
    """Grep every repo for the terms; hits ranked best first (see the module docstring)."""
    terms = [t for t in terms if t.text.strip()]
    tokens = [t.text.lower() for t in terms if t.kind in ("name", "token", "user")]
    repo_rows: list[dict[str, Any]] = []
    if not terms:
        return SearchResult(
            [],
            [],
            [
                {"name": r.name, "path": str(r.path), "commit": None, "matches": 0, "error": None}
                for r in repos
            ],
        )
    flat = [(v, i) for i, t in enumerate(terms) for v in _variants(t.text)]
    order = {i: (t.weight, len(t.text)) for i, t in enumerate(terms)}
    ranked: list[tuple[int, str, str, int, str, str | None, list[int], int]] = []
    for repo in repos:
        info: dict[str, Any] = {
            "name": repo.name,
            "path": str(repo.path),
            "commit": None,
            "matches": 0,
            "error": None,
        }
        repo_rows.append(info)
        try:
            commit, rows = _grep_repo(repo, terms, timeout_s)
        except git.GitCommandError as exc:
            info["error"] = _git_error_text(exc) if exc.stderr else str(exc)
            continue
        except (git.GitError, OSError, ValueError) as exc:
            info["error"] = f"{type(exc).__name__}: {exc}"
            continue
        info["commit"] = commit
        info["matches"] = len(rows)
        path_scores: dict[str, int] = {}
        for path, line, text in rows:
            low = text.lower()
            matched = sorted({i for v, i in flat if v in low})
            if not matched:
                continue  # a -i match the Python lower() does not see (exotic case folding)
            best = max(matched, key=order.__getitem__)
            others = sum(1 for i in matched if terms[i].kind != "prefix") - (
                terms[best].kind != "prefix"
            )
            if path not in path_scores:
                path_scores[path] = _path_score(path, tokens)
            score = terms[best].weight + 8 * min(max(others, 0), 3) + path_scores[path]
            if len(text) > _LONG_LINE:
                score -= 25
            ranked.append((-score, repo.name, path, line, text, commit, matched, best))
    total = len(ranked)
    ranked.sort(key=lambda r: r[:4])
    if per_file is not None and per_file > 0:
        count: dict[tuple[str, str], int] = {}
        kept = []
        for r in ranked:
            key = (r[1], r[2])
            count[key] = count.get(key, 0) + 1
            if count[key] <= per_file:
                kept.append(r)
        ranked = kept
    truncated = False
    if limit is not None and limit > 0 and len(ranked) > limit:
        ranked = ranked[:limit]
        truncated = True
    hits = [
        SearchHit(
            repo=name,
            path=path,
            line=line,
            text=text.strip()[:240],
            term=terms[best].text,
            commit=commit,
            terms=[terms[i].text for i in matched],
            kind=terms[best].kind,
            score=-neg,
        )
        for neg, name, path, line, text, commit, matched, best in ranked
    ]
    return SearchResult(hits, list(terms), repo_rows, total_matches=total, truncated=truncated)


def suggested_relevance(hit: SearchHit) -> str:
    """direct: the definition itself; partial: its layout tokens; concept: family keywords only."""
    if hit.kind == "name":
        return "direct"
    if hit.kind in ("prefix", "token", "user"):
        return "partial"
    return "concept"


# --------------------------------------------------------------------------------------------
# The recon note
# --------------------------------------------------------------------------------------------

RELEVANCE = ("direct", "partial", "concept")
NOTE_COLUMNS = ("repo", "commit", "path", "relevance", "reusable piece", "next action")
_NOTE_NAME = re.compile(r"recon_([0-9]{4}-[0-9]{2}-[0-9]{2})_(.+)\.md")
_COMMIT = re.compile(r"[0-9a-fA-F]{4,40}")
_SEPARATOR_CELL = re.compile(r":?-+:?")


@dataclass
class NoteRow:
    repo: str
    commit: str
    path: str
    relevance: str
    piece: str = ""
    next_action: str = ""

    def cells(self) -> list[str]:
        return [self.repo, self.commit, self.path, self.relevance, self.piece, self.next_action]

    def to_json(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "commit": self.commit,
            "path": self.path,
            "relevance": self.relevance,
            "piece": self.piece,
            "next_action": self.next_action,
        }


@dataclass
class ReconNote:
    definition: str
    date: str  # YYYY-MM-DD
    rows: list[NoteRow] = field(default_factory=list)
    updated: str | None = None
    meta: dict[str, str] = field(default_factory=dict)  # other "- key: value" lines
    notes: str = ""  # free text after the table
    path: Path | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "definition": self.definition,
            "date": self.date,
            "updated": self.updated,
            "meta": dict(self.meta),
            "path": str(self.path) if self.path else None,
            "rows": [r.to_json() for r in self.rows],
            "notes": self.notes,
        }


def notes_dir(workspace: str | Path) -> Path:
    return archive_root_of(workspace) / "docs"


def _safe_name(definition: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", definition)


def _day(value: date | datetime | str | None) -> str:
    if value is None:
        return date.today().isoformat()
    if isinstance(value, datetime):
        return value.date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    try:
        return date.fromisoformat(str(value)).isoformat()
    except ValueError:
        raise InputError(None, f"expected a date YYYY-MM-DD, got {value!r}", field="date") from None


def note_path(
    workspace: str | Path, definition: str, day: date | datetime | str | None = None
) -> Path:
    return notes_dir(workspace) / f"recon_{_day(day)}_{_safe_name(definition)}.md"


def cell_text(text: str) -> str:
    """What a cell can hold: one line (line breaks become spaces), no outer whitespace."""
    return " ".join(text.splitlines()).strip()


def _escape_cell(text: str) -> str:
    return cell_text(text).replace("\\", "\\\\").replace("|", "\\|")


def notes_text(text: str) -> str:
    """Free text as a note keeps it: lines joined with newlines, no outer whitespace."""
    return "\n".join(text.splitlines()).strip()


def _meta_value(text: str) -> str:
    return " ".join(str(text).split())


def render_note(note: ReconNote) -> str:
    lines = [
        f"# Recon note: {_meta_value(note.definition)}",
        "",
        f"- definition: {_meta_value(note.definition)}",
        f"- date: {note.date}",
    ]
    if note.updated:
        lines.append(f"- updated: {note.updated}")
    for key, value in note.meta.items():
        k = re.sub(r"[^a-z0-9_ ]", "", key.lower()).strip()
        if k and k not in ("definition", "date", "updated"):
            lines.append(f"- {k}: {_meta_value(value)}")
    lines += ["", "| " + " | ".join(NOTE_COLUMNS) + " |", "|" + "---|" * len(NOTE_COLUMNS)]
    for row in note.rows:
        lines.append("| " + " | ".join(_escape_cell(c) for c in row.cells()) + " |")
    text = "\n".join(lines) + "\n"
    body = notes_text(note.notes)
    if body:
        text += "\n" + body + "\n"
    return text


def _split_row(line: str, path: str | Path | None, number: int) -> list[str]:
    """Cells of a ``| a | b |`` line: ``\\|`` is a pipe, ``\\\\`` a backslash."""
    s = line.strip()
    if not s.startswith("|"):
        raise InputError(path, "a table row must start with '|'", line=number, field="row")
    cells: list[str] = []
    buf: list[str] = []
    i = 1
    closed = False
    while i < len(s):
        ch = s[i]
        if ch == "\\" and i + 1 < len(s) and s[i + 1] in "|\\":
            buf.append(s[i + 1])
            i += 2
            continue
        if ch == "|":
            cells.append("".join(buf).strip())
            buf = []
            closed = True
        else:
            buf.append(ch)
            if not ch.isspace():
                closed = False
        i += 1
    if not closed or "".join(buf).strip():
        raise InputError(path, "a table row must end with '|'", line=number, field="row")
    return cells


_HEADER_ALIASES = {
    "piece": "reusable piece",
    "reusable": "reusable piece",
    "next": "next action",
    "action": "next action",
    "sha": "commit",
}


def parse_note(
    text: str,
    path: str | Path | None = None,
    definition_hint: str | None = None,
    date_hint: str | None = None,
) -> ReconNote:
    """Parse a recon note; any problem is an InputError naming the line and the field."""
    if not isinstance(text, str):
        raise InputError(path, "expected text")
    lines = text.splitlines()
    meta: dict[str, str] = {}
    meta_lines: dict[str, int] = {}
    header_at = None
    for n, raw in enumerate(lines, start=1):
        s = raw.strip()
        if s.startswith("|"):
            header_at = n
            break
        m = re.match(r"^[-*]\s+([A-Za-z][A-Za-z0-9_ ]*?)\s*:\s*(.*)$", s)
        if m:
            key = m.group(1).strip().lower()
            meta[key] = m.group(2).strip()
            meta_lines[key] = n
    if header_at is None:
        raise InputError(
            path,
            "no recon table (expected a header row '| " + " | ".join(NOTE_COLUMNS) + " |')",
            field="table",
        )
    header = [
        _HEADER_ALIASES.get(" ".join(c.lower().split()), " ".join(c.lower().split()))
        for c in _split_row(lines[header_at - 1], path, header_at)
    ]
    if tuple(header) != NOTE_COLUMNS:
        raise InputError(
            path,
            f"table header must be: {', '.join(NOTE_COLUMNS)}; got: {', '.join(header) or 'nothing'}",
            line=header_at,
            field="header",
        )
    sep_at = header_at + 1
    if sep_at > len(lines):
        raise InputError(
            path, "table header without its '|---|' separator row", line=header_at, field="header"
        )
    sep = _split_row(lines[sep_at - 1], path, sep_at)
    if len(sep) != len(NOTE_COLUMNS) or not all(
        _SEPARATOR_CELL.fullmatch(c.replace(" ", "")) for c in sep
    ):
        raise InputError(
            path,
            f"expected the separator row with {len(NOTE_COLUMNS)} '---' cells",
            line=sep_at,
            field="separator",
        )
    rows: list[NoteRow] = []
    n = sep_at + 1
    while n <= len(lines) and lines[n - 1].strip().startswith("|"):
        rows.append(_parse_row(lines[n - 1], path, n))
        n += 1
    notes = notes_text("\n".join(lines[n - 1 :]))

    definition = meta.pop("definition", None) or definition_hint
    if not definition:
        raise InputError(
            path, "names no definition (a '- definition: NAME' line)", field="definition"
        )
    if definition_hint and _safe_name(definition) != _safe_name(definition_hint):
        raise InputError(
            path,
            f"names definition {definition!r} but the file is for {definition_hint!r}",
            line=meta_lines.get("definition"),
            field="definition",
        )
    day = meta.pop("date", None) or date_hint
    if not day:
        raise InputError(path, "has no date (a '- date: YYYY-MM-DD' line)", field="date")
    try:
        day = date.fromisoformat(day).isoformat()
    except ValueError:
        raise InputError(
            path,
            f"expected a date YYYY-MM-DD, got {day!r}",
            line=meta_lines.get("date"),
            field="date",
        ) from None
    updated = meta.pop("updated", None) or None
    if updated is not None:
        try:
            datetime.fromisoformat(updated.replace("Z", "+00:00"))
        except ValueError:
            raise InputError(
                path,
                f"expected an ISO time, got {updated!r}",
                line=meta_lines.get("updated"),
                field="updated",
            ) from None
    return ReconNote(
        definition=definition,
        date=day,
        rows=rows,
        updated=updated,
        meta=meta,
        notes=notes,
        path=Path(path) if path is not None else None,
    )


def _parse_row(line: str, path: str | Path | None, n: int) -> NoteRow:
    cells = _split_row(line, path, n)
    if len(cells) != len(NOTE_COLUMNS):
        raise InputError(
            path,
            f"expected {len(NOTE_COLUMNS)} cells ({', '.join(NOTE_COLUMNS)}), got {len(cells)}",
            line=n,
            field="row",
        )
    repo, commit, rel, relevance, piece, next_action = cells
    if not repo:
        raise InputError(path, "must not be empty", line=n, field="repo")
    if commit in ("-", "?"):
        commit = ""
    if commit and not _COMMIT.fullmatch(commit):
        raise InputError(
            path,
            f"expected a commit hash (4-40 hex digits) or '-', got {commit!r}",
            line=n,
            field="commit",
        )
    if not rel:
        raise InputError(path, "must not be empty", line=n, field="path")
    rel_low = relevance.lower()
    if rel_low not in RELEVANCE:
        raise InputError(
            path,
            f"expected one of {', '.join(RELEVANCE)}, got {relevance!r}",
            line=n,
            field="relevance",
        )
    return NoteRow(repo, commit.lower(), rel, rel_low, piece, next_action)


def load_note(path: str | Path) -> ReconNote:
    path = Path(path)
    data = read_input(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(path, "not UTF-8 text") from None
    m = _NOTE_NAME.fullmatch(path.name)
    return parse_note(
        text, path, definition_hint=m.group(2) if m else None, date_hint=m.group(1) if m else None
    )


def save_note(workspace: str | Path, note: ReconNote) -> Path:
    """Write the note (atomically) to its dated file; stamps ``updated``."""
    note.updated = _now_iso()
    path = note_path(workspace, note.definition, note.date)
    atomic_write_text(path, render_note(note))
    note.path = path
    return path


def list_notes(workspace: str | Path, definition: str) -> list[tuple[str, Path]]:
    """(date, path) of every note for the definition, oldest first."""
    folder = notes_dir(workspace)
    if not folder.is_dir():
        return []
    want = _safe_name(definition)
    out = []
    for p in folder.iterdir():
        m = _NOTE_NAME.fullmatch(p.name)
        if m and m.group(2) == want and p.is_file():
            try:
                out.append((date.fromisoformat(m.group(1)).isoformat(), p))
            except ValueError:
                continue
    return sorted(out)


def latest_note(workspace: str | Path, definition: str) -> ReconNote | None:
    notes = list_notes(workspace, definition)
    return load_note(notes[-1][1]) if notes else None


def note_exists_for_round(
    workspace: str | Path, definition: str, since: date | datetime | str | None = None
) -> bool:
    """Whether a recon note exists for the definition, dated on or after ``since`` (a round's start).

    Notes are dated by day (their file name), so ``since`` is compared by day. None: any note."""
    notes = list_notes(workspace, definition)
    if since is None:
        return bool(notes)
    floor = _day(since)
    return any(day >= floor for day, _ in notes)


def new_note(
    definition: str, day: date | datetime | str | None = None, meta: dict[str, str] | None = None
) -> ReconNote:
    return ReconNote(definition=definition, date=_day(day), meta=dict(meta or {}))


def add_note_row(
    workspace: str | Path, definition: str, row: NoteRow, day: date | datetime | str | None = None
) -> ReconNote:
    """Append a row to the day's note (created when missing) and save it."""
    if row.relevance not in RELEVANCE:
        raise InputError(
            None,
            f"expected one of {', '.join(RELEVANCE)}, got {row.relevance!r}",
            field="relevance",
        )
    if not row.repo.strip() or not row.path.strip():
        raise InputError(None, "repo and path must not be empty", field="row")
    if row.commit and not _COMMIT.fullmatch(row.commit):
        raise InputError(None, f"expected a commit hash, got {row.commit!r}", field="commit")
    path = note_path(workspace, definition, day)
    note = load_note(path) if path.is_file() else new_note(definition, day)
    note.rows.append(row)
    save_note(workspace, note)
    return note


def row_from_hit(
    hit: SearchHit, relevance: str | None = None, piece: str = "", next_action: str = ""
) -> NoteRow:
    return NoteRow(
        repo=hit.repo,
        commit=(hit.commit or "")[:12],
        path=f"{hit.path}:{hit.line}",
        relevance=relevance or suggested_relevance(hit),
        piece=piece,
        next_action=next_action,
    )


def repo_commit(workspace: str | Path, name: str) -> str | None:
    """HEAD of the discovered repo called ``name`` (None when there is no such repo)."""
    for r in discover_repos(workspace):
        if r.name == name:
            try:
                with git.Repo(r.path) as repo:
                    return repo.head.commit.hexsha if repo.head.is_valid() else None
            except (git.GitError, OSError, ValueError):
                return None
    return None
