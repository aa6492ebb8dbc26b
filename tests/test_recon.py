"""Recon against real temporary git repositories (bare remotes, clones, pushes), never mocks."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import date, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fibtui.cli import main
from fibtui.core import recon
from fibtui.core.errors import InputError

DEF = "gdn_decode_qk4_v8_d128_k_last"


# ------------------------------------------------------------------ real git helpers


@pytest.fixture(autouse=True)
def _isolated_git(tmp_path_factory, monkeypatch) -> None:
    """No user or system git config leaks in; identities are set per repository."""
    cfg = tmp_path_factory.mktemp("gitcfg") / "gitconfig"
    cfg.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(cfg))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def identity(repo: Path) -> None:
    git(repo, "config", "user.name", "Recon Test")
    git(repo, "config", "user.email", "recon@test.invalid")


def commit_file(repo: Path, rel: str, content: str | bytes, message: str = "change") -> str:
    p = repo / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content)
    git(repo, "add", rel)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def make_upstream(tmp: Path, name: str, files: dict[str, str | bytes]) -> tuple[Path, Path]:
    """A bare remote and a 'maintainer' clone that pushes to it: (bare, maintainer)."""
    bare = tmp / "remotes" / f"{name}.git"
    bare.parent.mkdir(parents=True, exist_ok=True)
    git(tmp, "init", "-q", "--bare", "-b", "main", str(bare))
    maint = tmp / "maintainers" / name
    maint.mkdir(parents=True)
    git(maint, "init", "-q", "-b", "main")
    identity(maint)
    for rel, content in files.items():
        p = maint / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content) if isinstance(content, bytes) else p.write_text(content)
    git(maint, "add", "-A")
    git(maint, "commit", "-q", "-m", "initial")
    git(maint, "remote", "add", "origin", str(bare))
    git(maint, "push", "-q", "-u", "origin", "main")
    return bare, maint


def clone_into(bare: Path, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    git(dest.parent, "clone", "-q", str(bare), dest.name)
    identity(dest)
    return dest


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "reference").mkdir(parents=True)
    return root


def ref(ws: Path, name: str) -> recon.RefRepo:
    return recon.RefRepo(name, ws / "reference" / name, "reference")


# ------------------------------------------------------------------ discovery


def test_discovery_takes_reference_children_and_embedded_repos_only(
    ws: Path, tmp_path: Path
) -> None:
    bare, _ = make_upstream(tmp_path, "lib", {"a.txt": "a\n"})
    clone_into(bare, ws / "reference" / "lib")
    (ws / "reference" / "plain_folder").mkdir()
    clone_into(bare, ws / "flashinfer-bench")  # an embedded support checkout
    (ws / "notes").mkdir()
    git(ws, "init", "-q")  # the workspace's own repo is not a reference
    outside = clone_into(bare, tmp_path / "outside" / "elsewhere")
    (ws / "reference" / "linked").symlink_to(outside, target_is_directory=True)
    found = recon.discover_repos(ws)
    assert [(r.name, r.kind) for r in found] == [
        ("lib", "reference"),
        ("flashinfer-bench", "embedded"),
    ]


# ------------------------------------------------------------------ refresh


def test_clean_repo_behind_is_fast_forwarded(ws: Path, tmp_path: Path) -> None:
    bare, maint = make_upstream(tmp_path, "lib", {"kernel.cu": "v1\n"})
    clone = clone_into(bare, ws / "reference" / "lib")
    before = git(clone, "rev-parse", "HEAD")
    new = commit_file(maint, "kernel.cu", "v2\n")
    git(maint, "push", "-q")
    res = recon.refresh_repo(ref(ws, "lib"))
    assert res.error is None and res.state == "fast-forwarded"
    assert (res.fetched, res.advanced, res.dirty, res.diverged) == (True, True, False, False)
    assert res.head_before == before and res.head == new == res.upstream_head
    assert (
        (res.ahead, res.behind) == (0, 0) and res.branch == "main" and res.upstream == "origin/main"
    )
    assert git(clone, "rev-parse", "HEAD") == new and (clone / "kernel.cu").read_text() == "v2\n"
    assert res.refreshed_at.endswith("Z")


def test_dirty_repo_keeps_every_local_change_and_is_only_fetched(ws: Path, tmp_path: Path) -> None:
    bare, maint = make_upstream(
        tmp_path, "lib", {"kernel.cu": "v1\n", "other.py": "x = 1\n", "keep.txt": "k\n"}
    )
    clone = clone_into(bare, ws / "reference" / "lib")
    head = git(clone, "rev-parse", "HEAD")
    (clone / "kernel.cu").write_bytes(b"my local edit\r\nwith CRLF\x00 and a NUL\n")  # unstaged
    (clone / "other.py").write_text("x = 2  # staged\n")
    git(clone, "add", "other.py")
    (clone / "scratch.txt").write_bytes(b"untracked \xff bytes")
    (clone / "keep.txt").unlink()  # a deletion is a change too
    snapshot = {
        p.relative_to(clone).as_posix(): p.read_bytes()
        for p in clone.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(clone).parts
    }
    index_before = (clone / ".git" / "index").read_bytes()
    new = commit_file(maint, "kernel.cu", "v2 upstream\n")
    git(maint, "push", "-q")

    res = recon.refresh_repo(ref(ws, "lib"))

    assert res.state == "not advanced (dirty)" and res.error is None
    assert res.dirty and res.fetched and not res.advanced
    assert res.head == res.head_before == head == git(clone, "rev-parse", "HEAD")
    assert res.upstream_head == new == git(clone, "rev-parse", "origin/main")
    assert (res.ahead, res.behind) == (0, 1) and res.untracked == 1
    after = {
        p.relative_to(clone).as_posix(): p.read_bytes()
        for p in clone.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(clone).parts
    }
    assert after == snapshot
    assert (clone / ".git" / "index").read_bytes() == index_before
    assert git(clone, "stash", "list") == ""


def test_diverged_repo_is_reported_untouched(ws: Path, tmp_path: Path) -> None:
    bare, maint = make_upstream(tmp_path, "lib", {"a.txt": "a\n"})
    clone = clone_into(bare, ws / "reference" / "lib")
    mine = commit_file(clone, "mine.txt", "local work\n")
    theirs = commit_file(maint, "theirs.txt", "upstream work\n")
    git(maint, "push", "-q")
    res = recon.refresh_repo(ref(ws, "lib"))
    assert res.state == "diverged" and res.diverged and not res.advanced and res.fetched
    assert (res.ahead, res.behind) == (1, 1)
    assert res.head == mine == git(clone, "rev-parse", "HEAD") and res.upstream_head == theirs
    assert (
        not (clone / "theirs.txt").exists() and (clone / "mine.txt").read_text() == "local work\n"
    )


def test_up_to_date_and_ahead(ws: Path, tmp_path: Path) -> None:
    bare, _ = make_upstream(tmp_path, "lib", {"a.txt": "a\n"})
    clone = clone_into(bare, ws / "reference" / "lib")
    assert recon.refresh_repo(ref(ws, "lib")).state == "up to date"
    commit_file(clone, "b.txt", "b\n")
    res = recon.refresh_repo(ref(ws, "lib"))
    assert res.state == "ahead" and (res.ahead, res.behind) == (1, 0) and not res.advanced


def test_problems_of_one_repo_are_reported_never_raised(ws: Path, tmp_path: Path) -> None:
    bare, _ = make_upstream(tmp_path, "lib", {"a.txt": "a\n"})
    no_up = clone_into(bare, ws / "reference" / "no_upstream")
    git(no_up, "checkout", "-q", "-b", "feature")
    gone = clone_into(bare, ws / "reference" / "remote_gone")
    git(gone, "remote", "set-url", "origin", str(tmp_path / "does-not-exist.git"))
    lonely = ws / "reference" / "no_remote"
    lonely.mkdir()
    git(lonely, "init", "-q", "-b", "main")
    identity(lonely)
    commit_file(lonely, "x.txt", "x\n")
    broken = ws / "reference" / "broken"
    (broken / ".git").mkdir(parents=True)
    (broken / ".git" / "HEAD").write_text("garbage")
    clone_into(bare, ws / "reference" / "zfine")

    seen = []
    results = recon.refresh_all(
        recon.discover_repos(ws), timeout_s=30, jobs=3, on_result=seen.append
    )
    by_name = {r.name: r for r in results}
    assert [r.name for r in results] == [
        "broken",
        "no_remote",
        "no_upstream",
        "remote_gone",
        "zfine",
    ]
    assert len(seen) == 5
    assert by_name["no_upstream"].fetched and "no upstream" in by_name["no_upstream"].error
    assert (
        by_name["remote_gone"].state == "error"
        and "fetch from origin failed" in by_name["remote_gone"].error
    )
    assert not by_name["remote_gone"].fetched
    assert by_name["no_remote"].error == "no remote configured"
    assert by_name["broken"].state == "error" and by_name["broken"].error
    assert by_name["zfine"].state == "up to date" and by_name["zfine"].error is None

    recon.save_refresh(ws, results)
    again = recon.last_refresh(ws)
    assert again is not None and [r.to_json() for r in again] == [r.to_json() for r in results]


def test_refresh_json_cli(ws: Path, tmp_path: Path, capsys) -> None:
    bare, maint = make_upstream(tmp_path, "lib", {"a.txt": "a\n"})
    clone_into(bare, ws / "reference" / "lib")
    _demo_config(ws)
    commit_file(maint, "a.txt", "b\n")
    git(maint, "push", "-q")
    assert main(["recon", "refresh", "--json", "--workspace", str(ws)]) == 0
    data = json.loads(capsys.readouterr().out)
    (repo,) = data["repos"]
    for key in (
        "name",
        "path",
        "dirty",
        "advanced",
        "fetched",
        "head",
        "upstream_head",
        "ahead",
        "behind",
        "error",
    ):
        assert key in repo
    assert repo["name"] == "lib" and repo["advanced"] is True and repo["behind"] == 0
    assert main(["recon", "refresh", "--workspace", str(ws)]) == 0
    assert "up to date" in capsys.readouterr().out
    git(ws / "reference" / "lib", "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    assert main(["recon", "refresh", "--json", "--workspace", str(ws)]) == 1
    assert "fetch from origin failed" in json.loads(capsys.readouterr().out)["repos"][0]["error"]


# ------------------------------------------------------------------ search terms


def test_definition_tokens() -> None:
    assert recon.definition_tokens(DEF) == ["gdn", "decode", "qk4", "v8", "d128", "k_last"]
    toks = recon.definition_tokens("dsa_topk_indexer_fp8_h64_d128_topk2048_ps64")
    assert toks == ["dsa", "topk", "indexer", "fp8", "h64", "d128", "topk2048", "ps64"]
    assert "ckv" in recon.definition_tokens("mla_paged_decode_h16_ckv512_kpe64_ps1")
    assert recon.definition_tokens("demo_gdn_decode")[:2] == ["gdn", "decode"]


def test_families_and_keyword_overrides(tmp_path: Path) -> None:
    assert recon.operator_family("dsa_paged", None) == "sparse_attention"
    assert recon.operator_family("moe", None) == "moe"
    assert recon.operator_family("gdn", None) == "recurrence"
    assert recon.operator_family(None, "gemm_n256_k7168") == "gemm"
    assert recon.operator_family("something", "weird_op") is None
    assert "delta rule" in recon.operator_keywords("gdn", DEF)
    assert "grouped gemm" in recon.operator_keywords("moe", "moe_fp8")
    (tmp_path / "fibtui.toml").write_text(
        '[recon.keywords]\ngdn = ["wy repr", "ut transform"]\nmoe = ["deepep"]\n'
    )
    table = recon.keyword_table(tmp_path)
    assert recon.operator_keywords("gdn", DEF, table) == ["wy repr", "ut transform"]
    assert recon.operator_keywords("fused_moe", None, table) == ["deepep"]  # via the family
    terms = recon.search_terms(DEF, "gdn", table)
    assert terms[0] == recon.SearchTerm(DEF, "name")
    assert [t.text for t in terms if t.kind == "keyword"] == ["wy repr", "ut transform"]
    (tmp_path / "fibtui.toml").write_text('[recon.keywords]\ngdn = "not a list"\n')
    with pytest.raises(InputError) as exc:
        recon.keyword_table(tmp_path)
    assert exc.value.field == "recon.keywords.gdn"


# ------------------------------------------------------------------ search


PLANTED = {
    "csrc/gdn/decode_kernel.cu": "// helper\n#include <cuda.h>\n// kernel for gdn_decode_qk4_v8_d128_k_last\nint x;\n",
    "docs/design.md": "# Design\n\nWe use the Delta Rule with chunked updates.\n",
    "python/moe.py": "import torch\n\n\ndef run():\n    return grouped_gemm(a, b)\n",
    "tests/test_state.py": "def test_x():\n    pass\n    # the recurrent STATE is k-last\n",
    "README.md": "nothing to see\n",
    "trace/gdn_decode_qk4_v8_d128.json": '{\n  "name": "gdn_decode_qk4_v8_d128",\n  "op_type": "x"\n}\n',
    "blob.bin": b"\x00\x01gdn_decode\x00\xff",
}


def test_search_finds_planted_hits_with_paths_and_lines(ws: Path, tmp_path: Path) -> None:
    bare, _ = make_upstream(tmp_path, "lib", PLANTED)
    clone = clone_into(bare, ws / "reference" / "lib")
    head = git(clone, "rev-parse", "HEAD")
    terms = recon.search_terms(DEF, "gdn") + [recon.SearchTerm("grouped gemm", "keyword")]
    result = recon.search_repos(recon.discover_repos(ws), terms)
    got = {(h.path, h.line): h for h in result.hits}
    assert ("csrc/gdn/decode_kernel.cu", 3) in got and got[
        ("csrc/gdn/decode_kernel.cu", 3)
    ].term == DEF
    assert got[("docs/design.md", 3)].term == "delta rule"
    assert got[("python/moe.py", 5)].term == "grouped gemm"  # grouped_gemm in the code
    assert got[("tests/test_state.py", 3)].text == "# the recurrent STATE is k-last"
    sibling = got[
        ("trace/gdn_decode_qk4_v8_d128.json", 2)
    ]  # the name without k_last: a longest prefix
    assert (sibling.term, sibling.kind, recon.suggested_relevance(sibling)) == (
        "gdn_decode_qk4_v8_d128",
        "prefix",
        "partial",
    )
    assert all(h.path not in ("blob.bin", "README.md") for h in result.hits)  # binary files skipped
    assert result.hits[0].path == "csrc/gdn/decode_kernel.cu" and result.hits[0].kind == "name"
    assert all(h.commit == head and h.repo == "lib" for h in result.hits)
    assert result.repos == [
        {
            "name": "lib",
            "path": str(clone),
            "commit": head,
            "matches": len(result.hits),
            "error": None,
        }
    ]
    assert recon.suggested_relevance(result.hits[0]) == "direct"
    row = recon.row_from_hit(result.hits[0])
    assert (
        row.path == "csrc/gdn/decode_kernel.cu:3"
        and row.commit == head[:12]
        and row.relevance == "direct"
    )


def test_search_ranks_implementation_folders_before_docs(ws: Path, tmp_path: Path) -> None:
    bare, _ = make_upstream(
        tmp_path, "lib", {"docs/a.md": "chunk\n", "kernels/a.py": "chunk\n", "misc/a.py": "chunk\n"}
    )
    clone_into(bare, ws / "reference" / "lib")
    result = recon.search_repos(recon.discover_repos(ws), [recon.SearchTerm("chunk", "keyword")])
    assert [h.path for h in result.hits] == ["kernels/a.py", "misc/a.py", "docs/a.md"]
    limited = recon.search_repos(
        recon.discover_repos(ws), [recon.SearchTerm("chunk", "keyword")], limit=2
    )
    assert len(limited.hits) == 2 and limited.truncated and limited.total_matches == 3


def test_search_terms_are_literals(ws: Path, tmp_path: Path) -> None:
    bare, _ = make_upstream(tmp_path, "lib", {"a.py": "xzy(\nx.y(\n[a+b]\n"})
    clone_into(bare, ws / "reference" / "lib")
    repos = recon.discover_repos(ws)
    hits = recon.search_repos(
        repos, [recon.SearchTerm("x.y(", "user"), recon.SearchTerm("[A+B]", "user")]
    ).hits
    assert sorted((h.line, h.term) for h in hits) == [(2, "x.y("), (3, "[A+B]")]


def test_search_per_file_cap_and_bad_repo(ws: Path, tmp_path: Path) -> None:
    bare, _ = make_upstream(tmp_path, "lib", {"kernels/many.py": "scan\n" * 30})
    clone_into(bare, ws / "reference" / "lib")
    broken = ws / "reference" / "broken"
    (broken / ".git").mkdir(parents=True)
    result = recon.search_repos(
        recon.discover_repos(ws), [recon.SearchTerm("scan", "keyword")], per_file=3
    )
    assert [h.line for h in result.hits] == [1, 2, 3]
    by_name = {r["name"]: r for r in result.repos}
    assert by_name["broken"]["error"] and by_name["lib"]["matches"] == 30


def test_search_json_cli(ws: Path, tmp_path: Path, capsys) -> None:
    bare, _ = make_upstream(tmp_path, "lib", PLANTED)
    clone_into(bare, ws / "reference" / "lib")
    _demo_config(ws)
    assert main(["recon", "search", "--json", "--workspace", str(ws)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["definition"] == DEF
    assert {"repo", "path", "line", "text", "term"} <= set(data["hits"][0])
    assert data["hits"][0]["path"] == "csrc/gdn/decode_kernel.cu" and data["hits"][0]["line"] == 3
    assert (
        main(
            ["recon", "search", "nothing_like_this", "Delta Rule", "--json", "--workspace", str(ws)]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert [(h["path"], h["line"], h["term"]) for h in data["hits"]] == [
        ("docs/design.md", 3, "Delta Rule")
    ]
    assert main(["recon", "search", "--workspace", str(ws)]) == 0
    assert "csrc/gdn/decode_kernel.cu:3" in capsys.readouterr().out


def _demo_config(root: Path) -> None:
    (root / "config.toml").write_text(
        f'[solution]\nname = "s"\ndefinition = "{DEF}"\nauthor = "me"\n\n[build]\nlanguage = "triton"\n'
        'entry_point = "kernel.py::run"\n'
    )
    (root / "solution" / "triton").mkdir(parents=True, exist_ok=True)
    (root / "solution" / "triton" / "kernel.py").write_text("def run():\n    pass\n")


# ------------------------------------------------------------------ the recon note


def test_note_round_trip_latest_and_round_check(tmp_path: Path) -> None:
    note = recon.new_note(DEF, "2026-01-05", meta={"op_type": "gdn"})
    note.rows.append(
        recon.NoteRow(
            "flashinfer", "abc1234", "csrc/gdn.cu:10", "direct", "the | pipe \\ piece", "port it"
        )
    )
    note.rows.append(recon.NoteRow("fla", "", "ops/chunk.py", "concept"))
    note.notes = "Free text after the table.\n\n| not | a row |"
    path = recon.save_note(tmp_path, note)
    assert path == tmp_path / "optimize_ops" / "docs" / f"recon_2026-01-05_{DEF}.md"
    text = path.read_text()
    assert "| repo | commit | path | relevance | reusable piece | next action |" in text
    assert "the \\| pipe \\\\ piece" in text
    back = recon.load_note(path)
    assert back.rows == note.rows and back.meta == {"op_type": "gdn"} and back.date == "2026-01-05"
    assert back.notes == note.notes and back.updated == note.updated
    older = recon.new_note(DEF, "2025-12-30")
    recon.save_note(tmp_path, older)
    recon.save_note(tmp_path, recon.new_note("other_def", "2026-02-01"))
    latest = recon.latest_note(tmp_path, DEF)
    assert latest is not None and latest.date == "2026-01-05" and len(latest.rows) == 2
    assert recon.latest_note(tmp_path, "missing") is None
    assert recon.note_exists_for_round(tmp_path, DEF)
    assert recon.note_exists_for_round(tmp_path, DEF, since=date(2026, 1, 5))
    assert recon.note_exists_for_round(tmp_path, DEF, since=datetime(2026, 1, 5, 23, 0))
    assert not recon.note_exists_for_round(tmp_path, DEF, since="2026-01-06")
    assert not recon.note_exists_for_round(tmp_path, "missing")


def test_add_note_row_appends_to_the_days_note(tmp_path: Path) -> None:
    recon.add_note_row(
        tmp_path, DEF, recon.NoteRow("a", "", "x.py", "partial", "p", "n"), day="2026-03-01"
    )
    note = recon.add_note_row(
        tmp_path, DEF, recon.NoteRow("b", "deadbeef", "y.cu:3", "direct"), day="2026-03-01"
    )
    assert [r.repo for r in note.rows] == ["a", "b"]
    assert [r.repo for r in recon.load_note(note.path).rows] == ["a", "b"]
    with pytest.raises(InputError) as exc:
        recon.add_note_row(tmp_path, DEF, recon.NoteRow("a", "", "x", "maybe"))
    assert exc.value.field == "relevance"


GOOD_HEAD = "# Recon note: d\n\n- definition: d\n- date: 2026-01-01\n\n| repo | commit | path | relevance | reusable piece | next action |\n|---|---|---|---|---|---|\n"


@pytest.mark.parametrize(
    ("body", "line", "field"),
    [
        ("| a | abc123 | x.py | sideways | p | n |\n", 8, "relevance"),
        ("| a | nothex! | x.py | direct | p | n |\n", 8, "commit"),
        ("| a | abc123 | x.py | direct | p |\n", 8, "row"),
        ("| a | abc123 |  | direct | p | n |\n", 8, "path"),
        ("|  | abc123 | x | direct | p | n |\n", 8, "repo"),
        ("| ok | - | x | direct | | |\n| a | abc123 | x.py | direct | p | n\n", 9, "row"),
    ],
)
def test_bad_rows_name_the_line_and_field(tmp_path: Path, body: str, line: int, field: str) -> None:
    path = tmp_path / "recon_2026-01-01_d.md"
    path.write_text(GOOD_HEAD + body)
    with pytest.raises(InputError) as exc:
        recon.load_note(path)
    assert (exc.value.line, exc.value.field, Path(exc.value.path)) == (line, field, path)
    assert f"{path}:{line}: field '{field}':" in str(exc.value)


def test_bad_note_structure(tmp_path: Path) -> None:
    cases = {
        "no table at all\n": ("table", None),
        "- definition: d\n- date: 2026-01-01\n| repo | commit | path |\n|---|---|---|\n": (
            "header",
            3,
        ),
        "- definition: d\n- date: 2026-01-01\n| repo | commit | path | relevance | piece | next |\n| x |\n": (
            "separator",
            4,
        ),
        "- definition: d\n- date: 2026-13-01\n| repo | commit | path | relevance | piece | next |\n|-|-|-|-|-|-|\n": (
            "date",
            2,
        ),
        "- definition: other\n| repo | commit | path | relevance | piece | next |\n|-|-|-|-|-|-|\n": (
            "definition",
            1,
        ),
    }
    for text, (field, line) in cases.items():
        path = tmp_path / "recon_2026-01-01_d.md"
        path.write_text(text)
        with pytest.raises(InputError) as exc:
            recon.load_note(path)
        assert (exc.value.field, exc.value.line) == (field, line), text
    path.write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(InputError, match="not UTF-8"):
        recon.load_note(path)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400))
def test_note_parser_never_raises_anything_but_input_error(text: str) -> None:
    try:
        note = recon.parse_note(
            text, "recon_2026-01-01_d.md", definition_hint="d", date_hint="2026-01-01"
        )
    except InputError:
        return
    assert all(r.relevance in recon.RELEVANCE for r in note.rows)


_TABLEISH = st.lists(
    st.sampled_from(
        [
            "| repo | commit | path | relevance | reusable piece | next action |",
            "|---|---|---|---|---|---|",
            "| a | abc1 | p | direct | x | y |",
            "| a | b | c |",
            "|",
            "- date: 2026-02-30",
            "- definition: d",
            "- updated: nope",
            "\\|",
            "| a | - | p | concept | \\| | \\\\ |",
            "",
            "# title",
            "| a | | p | PARTIAL | | |",
        ]
    ),
    max_size=12,
).map("\n".join)


@settings(max_examples=300, deadline=None)
@given(_TABLEISH)
def test_note_parser_on_table_like_garbage(text: str) -> None:
    try:
        recon.parse_note(text, None, definition_hint="d", date_hint="2026-01-01")
    except InputError as exc:
        assert exc.message


_cell = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            _cell.filter(lambda c: recon.cell_text(c) != ""),
            st.sampled_from(["", "abcd", "0123456789abcdef0123"]),
            _cell.filter(lambda c: recon.cell_text(c) != ""),
            st.sampled_from(recon.RELEVANCE),
            _cell,
            _cell,
        ),
        max_size=6,
    ),
    _cell,
)
@example(rows=[], notes=" ")
@example(rows=[("a|b\\", "", " p\u2028q ", "direct", "\\|", "")], notes="\n| x |\n")
def test_note_render_parse_round_trip(rows, notes) -> None:
    note = recon.new_note("d", "2026-01-01")
    note.rows = [recon.NoteRow(*r) for r in rows]
    back = recon.parse_note(recon.render_note(note), None)
    assert back.rows == [recon.NoteRow(*(recon.cell_text(c) for c in r)) for r in rows]
    note.notes = notes  # free text after the table never disturbs the table
    again = recon.parse_note(recon.render_note(note), None)
    assert again.rows == back.rows and again.notes == recon.notes_text(notes)


def test_note_cli_add_and_show(tmp_path: Path, capsys) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    _demo_config(ws)
    bare, _ = make_upstream(tmp_path, "lib", {"a.cu": "x\n"})
    clone = clone_into(bare, ws / "reference" / "lib")
    assert main(["recon", "note", "--json", "--workspace", str(ws)]) == 0
    assert json.loads(capsys.readouterr().out)["note"] is None
    code = main(
        [
            "recon",
            "note",
            "--workspace",
            str(ws),
            "--add",
            "lib",
            "a.cu:1",
            "--relevance",
            "direct",
            "--piece",
            "state update loop",
            "--next",
            "port to triton",
        ]
    )
    assert code == 0
    capsys.readouterr()
    assert main(["recon", "note", "--json", "--workspace", str(ws)]) == 0
    data = json.loads(capsys.readouterr().out)["note"]
    assert data["rows"] == [
        {
            "repo": "lib",
            "commit": git(clone, "rev-parse", "HEAD")[:12],
            "path": "a.cu:1",
            "relevance": "direct",
            "piece": "state update loop",
            "next_action": "port to triton",
        }
    ]
    assert Path(data["path"]).name == f"recon_{date.today().isoformat()}_{DEF}.md"
    assert main(["recon", "note", "--workspace", str(ws)]) == 0
    assert "state update loop" in capsys.readouterr().out
    assert main(["recon", "note", "--workspace", str(ws), "--piece", "x"]) == 2
    assert os.path.exists(data["path"])
