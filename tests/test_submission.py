"""Packing solution.json and submission tags, against real git repositories with bare remotes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fibtui.cli import main
from fibtui.core import submission as sub
from fibtui.core.dataset import parse_solution
from fibtui.core.demo import create_demo_workspace
from fibtui.core.errors import CheckFailed, InputError, UsageError
from tests.conftest import DEMO_DEFINITION


@pytest.fixture(autouse=True)
def _isolated_git(tmp_path_factory, monkeypatch) -> None:
    cfg = tmp_path_factory.mktemp("gitcfg") / "gitconfig"
    cfg.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(cfg))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def identity(repo: Path) -> None:
    git(repo, "config", "user.name", "Submit Test")
    git(repo, "config", "user.email", "submit@test.invalid")


@pytest.fixture
def repo_ws(tmp_path: Path) -> tuple[Path, Path]:
    """The demo workspace as a git repo (branch main) pushed to a bare remote: (workspace, bare)."""
    ws = create_demo_workspace(tmp_path / "ws", with_history=False, git_init=False)
    git(ws, "init", "-q", "-b", "main")
    identity(ws)
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "initial")
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(ws, "remote", "add", "origin", str(bare))
    git(ws, "push", "-q", "-u", "origin", "main")
    return ws, bare


# ------------------------------------------------------------------ pack


def test_pack_matches_the_sources_byte_for_byte(demo_ws: Path) -> None:
    src = demo_ws / "solution" / "triton"
    (src / "util").mkdir()
    (src / "util" / "helpers.py").write_bytes(b"# CRLF kept\r\nX = '\xc3\xa9'\r\n")
    (src / "__pycache__").mkdir()
    (src / "__pycache__" / "kernel.cpython-311.pyc").write_bytes(b"\x00\x01")
    (src / "stale.pyc").write_bytes(b"\x00")
    (src / ".hidden.py").write_text("secret = 1\n")
    (src / "fibtui.toml").write_text("[x]\n")
    result = sub.pack_solution(demo_ws)
    out = sub.write_solution_json(result)
    assert out == demo_ws / "solution.json"
    data = json.loads(out.read_text(encoding="utf-8"))
    assert [s["path"] for s in data["sources"]] == ["kernel.py", "util/helpers.py"]
    for s in data["sources"]:
        assert s["content"].encode("utf-8") == (src / s["path"]).read_bytes()
    assert set(result.excluded) == {"__pycache__/", "stale.pyc", ".hidden.py", "fibtui.toml"}
    assert data["spec"] == {
        "language": "triton",
        "target_hardware": ["B200"],
        "entry_point": "kernel.py::gdn_decode",
        "dependencies": [],
        "destination_passing_style": True,
    }
    assert (data["name"], data["definition"], data["author"]) == (
        "demo_gdn_decode_triton_v1",
        DEMO_DEFINITION,
        "fibtui",
    )
    sol = parse_solution(data, out)
    assert sol.spec.entry_file == "kernel.py" and sol.spec.destination_passing_style is True


def test_pack_loads_in_flashinfer_bench(demo_ws: Path) -> None:
    pytest.importorskip("flashinfer_bench")
    from flashinfer_bench.data import Solution

    result = sub.pack_solution(demo_ws)
    out = sub.write_solution_json(result)
    assert result.bench_checked
    Solution.model_validate_json(out.read_text())


def test_pack_takes_dps_hardware_and_binding_from_config(demo_ws: Path) -> None:
    cfg = demo_ws / "config.toml"
    cfg.write_text(
        cfg.read_text().replace(
            "destination_passing_style = true", "destination_passing_style = false"
        )
    )
    result = sub.pack_solution(demo_ws, target_hardware=["H200", "B200"])
    assert result.solution["spec"]["destination_passing_style"] is False
    assert result.solution["spec"]["target_hardware"] == ["H200", "B200"]
    (demo_ws / "fibtui.toml").write_text('[submission]\ntarget_hardware = ["GB200"]\n')
    assert sub.pack_solution(demo_ws).solution["spec"]["target_hardware"] == ["GB200"]
    # a CUDA solution gets a binding (tvm-ffi unless the config names one)
    cuda = demo_ws / "solution" / "cuda"
    cuda.mkdir()
    (cuda / "kernel.cu").write_text('extern "C" void run() {}\n')
    (cuda / "binding.py").write_text("# binding\n")
    text = (
        cfg.read_text()
        .replace('language = "triton"', 'language = "cuda"')
        .replace("kernel.py::gdn_decode", "kernel.cu::run")
    )
    cfg.write_text(text)
    spec = sub.pack_solution(demo_ws).solution["spec"]
    assert (
        spec["binding"] == "tvm-ffi"
        and spec["entry_point"] == "kernel.cu::run"
        and spec["language"] == "cuda"
    )
    cfg.write_text(text.replace("[build]", '[build]\nbinding = "torch"'))
    assert sub.pack_solution(demo_ws).solution["spec"]["binding"] == "torch"


def test_pack_runs_the_topology_check_first(demo_ws: Path) -> None:
    (demo_ws / "solution" / "triton" / "config.toml").write_text(
        '[solution]\nname = "x"\ndefinition = "y"\nauthor = "z"\n[build]\nlanguage = "triton"\nentry_point = "kernel.py::f"\n'
    )
    with pytest.raises(CheckFailed, match="topology check failed: .*config.toml inside solution/"):
        sub.pack_solution(demo_ws)
    (demo_ws / "solution" / "triton" / "config.toml").unlink()
    (demo_ws / "solution" / "triton" / "kernel.py").rename(
        demo_ws / "solution" / "triton" / "other.py"
    )
    with pytest.raises(CheckFailed, match="entry point"):
        sub.pack_solution(demo_ws)
    assert not (demo_ws / "solution.json").exists()


def test_pack_refuses_binary_sources_and_missing_author(demo_ws: Path) -> None:
    (demo_ws / "solution" / "triton" / "table.bin").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError) as exc:
        sub.pack_solution(demo_ws)
    assert Path(exc.value.path).name == "table.bin" and "UTF-8" in exc.value.message
    (demo_ws / "solution" / "triton" / "table.bin").unlink()
    cfg = demo_ws / "config.toml"
    cfg.write_text(cfg.read_text().replace('author = "fibtui"', 'author = ""'))
    with pytest.raises(InputError) as exc:
        sub.pack_solution(demo_ws)
    assert exc.value.field == "solution.author"


def test_pack_cli(demo_ws: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out" / "packed.json"
    assert main(["pack", "-o", str(out), "--json", "--workspace", str(demo_ws)]) == 0
    info = json.loads(capsys.readouterr().out)
    from fibtui.core.toolchain import bench_version

    # flashinfer-bench loads what was packed when it is installed (the bench extra), else it is not asked
    assert (
        info["output"] == str(out)
        and info["sources"] == ["kernel.py"]
        and info["flashinfer_bench"] == bench_version()
    )
    assert parse_solution(json.loads(out.read_text())).definition == DEMO_DEFINITION
    assert main(["pack", "--workspace", str(demo_ws)]) == 0
    assert "packed demo_gdn_decode_triton_v1" in capsys.readouterr().out
    (demo_ws / "solution" / "triton" / "kernel.py").unlink()
    assert main(["pack", "--workspace", str(demo_ws)]) == 1


# ------------------------------------------------------------------ tags


def test_tag_names_parse() -> None:
    assert sub.parse_tag("submission-v12") == (None, 12)
    assert sub.parse_tag("submission-gdn_decode-v2") == ("gdn_decode", 2)
    assert sub.parse_tag("submission-v") is None and sub.parse_tag("v1") is None
    assert sub.tag_name(3) == "submission-v3" and sub.tag_name(1, "a/b") == "submission-a_b-v1"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_tag_parser_never_raises(name: str) -> None:
    parsed = sub.parse_tag(name)
    if parsed is not None:
        definition, number = parsed
        assert name.startswith("submission-") and name.endswith(f"v{name.rsplit('v', 1)[1]}")
        assert int(name.rsplit("v", 1)[1]) == number
        assert definition is None or name == f"submission-{definition}-v{name.rsplit('v', 1)[1]}"


def test_next_tag_keeps_gaps_and_counts_remote_tags(repo_ws, tmp_path: Path) -> None:
    ws, bare = repo_ws
    git(ws, "tag", "submission-v1")
    git(ws, "tag", "-a", "submission-v3", "-m", "three")
    git(ws, "tag", "unrelated-v9")
    plan = sub.plan_tag(ws)
    assert (plan.tag, plan.number, plan.ok) == ("submission-v4", 4, True)
    assert plan.latest is not None and plan.latest.name == "submission-v3"
    assert (
        plan.head == git(ws, "rev-parse", "HEAD")
        and plan.branch == "main"
        and plan.remote == "origin"
    )
    # a teammate pushed v6 from another clone: it is counted without fetching anything
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(bare), "other")
    identity(other)
    git(other, "tag", "submission-v6")
    git(other, "push", "-q", "origin", "submission-v6")
    plan = sub.plan_tag(ws)
    assert plan.tag == "submission-v7" and plan.remote_checked
    assert "submission-v6" not in git(ws, "tag", "--list")  # nothing was fetched
    assert sub.plan_tag(ws, check_remote=False).tag == "submission-v4"


def test_create_and_push_report_the_commit(repo_ws) -> None:
    ws, bare = repo_ws
    git(ws, "tag", "submission-v2")
    plan = sub.plan_tag(ws)
    created = sub.create_tag(ws, plan)
    head = git(ws, "rev-parse", "HEAD")
    assert (created.tag, created.commit, created.action) == ("submission-v3", head, "created")
    assert git(ws, "rev-parse", "submission-v3^{commit}") == head
    assert git(ws, "cat-file", "-t", "submission-v3") == "tag"  # annotated
    (ws / "NOTES.md").write_text("unrelated dirt does not block a tag\n")
    pushed_branch = sub.push_branch(ws, plan)
    pushed_tag = sub.push_tag(ws, plan)
    assert pushed_branch.action == "pushed branch" and pushed_tag.commit == head
    remote_tags = git(bare, "for-each-ref", "--format=%(refname:short) %(*objectname)", "refs/tags")
    assert remote_tags == f"submission-v3 {head}"
    assert git(bare, "rev-parse", "main") == head
    with pytest.raises(CheckFailed, match="exists already"):
        sub.create_tag(ws, plan)


def test_refuses_a_dirty_kernel(repo_ws) -> None:
    ws, _ = repo_ws
    kernel = ws / "solution" / "triton" / "kernel.py"
    kernel.write_text(kernel.read_text() + "\n# tweak\n")
    plan = sub.plan_tag(ws)
    assert (
        not plan.ok
        and "uncommitted changes" in plan.problems[0]
        and "solution/triton/kernel.py" in plan.problems[0]
    )
    with pytest.raises(CheckFailed, match="refusing to tag"):
        sub.create_tag(ws, plan)
    assert git(ws, "tag", "--list") == ""
    git(ws, "checkout", "--", "solution/triton/kernel.py")
    (ws / "solution" / "triton" / "new_helper.py").write_text("x = 1\n")  # untracked counts
    assert "new_helper.py" in sub.plan_tag(ws).problems[0]


def test_refuses_when_the_tagged_commit_names_another_definition(repo_ws) -> None:
    ws, _ = repo_ws
    cfg = ws / "config.toml"
    good = cfg.read_text()
    cfg.write_text(good.replace(DEMO_DEFINITION, "some_other_definition"))
    git(ws, "commit", "-q", "-am", "oops: wrong definition")
    cfg.write_text(good)  # the worktree names the active definition again, uncommitted
    plan = sub.plan_tag(ws)
    assert any("names definition 'some_other_definition'" in p for p in plan.problems)
    with pytest.raises(CheckFailed):
        sub.create_tag(ws, plan)


def test_refuses_when_head_moved_after_the_plan(repo_ws) -> None:
    ws, _ = repo_ws
    plan = sub.plan_tag(ws)
    (ws / "README.md").write_text("more\n")
    git(ws, "add", "README.md")
    git(ws, "commit", "-q", "-m", "later")
    with pytest.raises(CheckFailed, match="HEAD moved"):
        sub.create_tag(ws, plan)


def test_per_definition_layout_and_scheme(tmp_path: Path) -> None:
    ws = tmp_path / "multi"
    for d in ("def_a", "def_b"):
        src = ws / d / "solution" / "triton"
        src.mkdir(parents=True)
        (src / "kernel.py").write_text(f"def run():\n    return '{d}'\n")
        (ws / d / "config.toml").write_text(
            f'[solution]\nname = "{d}_sol"\ndefinition = "{d}"\nauthor = "me"\n[build]\nlanguage = "triton"\n'
            'entry_point = "kernel.py::run"\n'
        )
    git(ws, "init", "-q", "-b", "main")
    identity(ws)
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "two definitions")
    with pytest.raises(UsageError, match="--definition"):
        sub.pack_solution(ws)
    packed = sub.pack_solution(ws, "def_b")
    assert (
        packed.solution["definition"] == "def_b"
        and "def_b" in packed.solution["sources"][0]["content"]
    )
    assert sub.write_solution_json(packed) == ws / "def_b" / "solution.json"
    git(ws, "tag", "submission-v2")
    plain = sub.plan_tag(ws, "def_a")
    assert plain.tag == "submission-v3" and any("def_b are submitted" in w for w in plain.warnings)
    assert plain.config == "def_a/config.toml" and any(
        "no remote 'origin'" in w for w in plain.warnings
    )
    git(ws, "tag", "submission-def_a-v1")
    assert sub.plan_tag(ws, "def_a", scheme="per-definition").tag == "submission-def_a-v2"
    assert sub.plan_tag(ws, "def_b", scheme="per-definition").tag == "submission-def_b-v1"
    (ws / "fibtui.toml").write_text('[submission]\ntag_scheme = "per-definition"\n')
    assert sub.plan_tag(ws, "def_b").tag == "submission-def_b-v1"
    # a dirty def_b kernel blocks def_b only
    (ws / "def_b" / "solution" / "triton" / "kernel.py").write_text("def run():\n    return 0\n")
    assert sub.plan_tag(ws, "def_a").ok and not sub.plan_tag(ws, "def_b").ok


def test_tag_cli(repo_ws, capsys) -> None:
    ws, bare = repo_ws
    git(ws, "tag", "submission-v1")
    git(ws, "tag", "submission-v3")
    assert main(["tag", "--next", "--json", "--workspace", str(ws)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["tag"] == "submission-v4" and data["ok"] and data["steps"] == []
    assert main(["tag", "--next", "--workspace", str(ws)]) == 0
    assert "next submission-v4" in capsys.readouterr().out
    assert main(["tag", "--push", "--next", "--workspace", str(ws)]) == 2
    capsys.readouterr()
    assert main(["tag", "--create", "--push", "--json", "--workspace", str(ws)]) == 0
    data = json.loads(capsys.readouterr().out)
    head = git(ws, "rev-parse", "HEAD")
    assert [(s["action"], s["commit"]) for s in data["steps"]] == [
        ("created", head),
        ("pushed branch", head),
        ("pushed tag", head),
    ]
    assert git(bare, "rev-parse", "submission-v4^{commit}") == head
    kernel = ws / "solution" / "triton" / "kernel.py"
    kernel.write_text(kernel.read_text() + "# dirty\n")
    assert main(["tag", "--next", "--workspace", str(ws)]) == 1
    assert "uncommitted changes" in capsys.readouterr().out
    assert main(["tag", "--create", "--workspace", str(ws)]) == 1
    assert "refusing to tag" in capsys.readouterr().err
