"""Solutions are what they hold (issue 37 items 1 and 4): links out of a solution, candidate or
dataset folder are refused in one line naming the link and its target, links to the folder's own
files are kept, --solution/--baseline take only a solution folder, --workspace never walks a
whole tree, the snapshot and pack limits are said, and every mistyped path is one line, exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fibtui.core import safetree
from fibtui.core.errors import InputError
from fibtui.core.runs import list_runs
from tests.conftest import run_cli
from tests.runner_helpers import make_candidate, make_tiny_workspace

SECRET = "root:x:0:0:planted secret\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,), kernel="good_py")


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "passwd"
    path.parent.mkdir()
    path.write_text(SECRET)
    return path


def one_line_error(code: int, out: str, err: str, want: int = 2) -> str:
    assert code == want, (code, out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def run_args(ws: Path, *extra: str) -> list[str]:
    return ["run", "--backend", "interpreter", "--no-daemon", "--workspace", str(ws), *extra]


def test_a_link_to_a_file_outside_the_solution_is_refused(capsys, ws: Path, secret: Path) -> None:
    link = ws / "solution" / "triton" / "data.txt"
    link.symlink_to(secret)
    err = one_line_error(*run_cli(capsys, *run_args(ws)))
    assert "data.txt" in err and str(secret) in err and "symbolic link" in err
    assert list_runs(ws / "optimize_ops") == []  # no snapshot was written
    code, out, err = run_cli(capsys, "check", "--workspace", str(ws))
    assert code == 1 and "data.txt" in out + err and str(secret) in out + err
    # pack refuses it too: nothing of the secret reaches a solution.json
    # (exit 1: pack's topology check runs first and fails)
    pack = run_cli(capsys, "pack", "--workspace", str(ws), "-o", str(ws / "s.json"))
    err = one_line_error(*pack, want=1)
    assert "data.txt" in err and str(secret) in err and not (ws / "s.json").exists()


def test_a_link_in_a_candidate_folder_is_refused(capsys, ws: Path, secret: Path) -> None:
    cand = make_candidate(ws, "c", "good_py")
    (cand / "data.txt").symlink_to(secret)
    for flag in ("--solution", "--baseline"):
        err = one_line_error(*run_cli(capsys, *run_args(ws, flag, str(cand))))
        assert "data.txt" in err and str(secret) in err
    assert list_runs(ws / "optimize_ops") == []


def test_a_link_to_the_folders_own_file_is_kept(tmp_path: Path) -> None:
    folder = tmp_path / "sol"
    (folder / "sub").mkdir(parents=True)
    (folder / "kernel.py").write_text("x = 1\n")
    (folder / "sub" / "alias.py").symlink_to(Path("..") / "kernel.py")
    files = safetree.list_files(folder)
    assert [f.rel for f in files] == ["kernel.py", "sub/alias.py"]
    assert all(safetree.read_text(f) == "x = 1\n" for f in files)
    # a link to a folder, even its own, is not followed
    (folder / "loop").symlink_to(folder)
    with pytest.raises(InputError, match="links to folders are not followed"):
        safetree.list_files(folder)


def test_the_file_count_and_size_limits_are_said(tmp_path: Path) -> None:
    folder = tmp_path / "sol"
    folder.mkdir()
    for i in range(5):
        (folder / f"f{i}.py").write_text("x" * 100)
    assert len(safetree.list_files(folder, max_files=5)) == 5
    with pytest.raises(InputError, match="more than 4 files"):
        safetree.list_files(folder, max_files=4)
    with pytest.raises(InputError, match="exceed 0 MiB together.*reached at f4.py"):
        safetree.list_files(folder, max_bytes=450)


def test_pack_lists_every_file_it_packs(capsys, ws: Path) -> None:
    (ws / "solution" / "triton" / "helpers.py").write_text("y = 2\n")
    code, out, _ = run_cli(
        capsys, "pack", "--workspace", str(ws), "-o", str(ws / "s.json"), "--json"
    )
    data = json.loads(out)
    assert code == 0 and [f["path"] for f in data["files"]] == ["helpers.py", "kernel.py"]
    assert data["files"][0]["bytes"] == 6
    code, out, _ = run_cli(capsys, "pack", "--workspace", str(ws), "-o", str(ws / "s.json"))
    assert code == 0 and "2 file(s) packed" in out and "helpers.py" in out and "kernel.py" in out


@pytest.mark.parametrize(
    "flag,path",
    [
        ("--solution", "../../.."),
        ("--solution", "/"),
        ("--baseline", "../../.."),
        ("--baseline", "/"),
        ("--solution", "/etc"),
        ("--solution", "no/such/dir"),
        ("--solution", "bad\0path"),
    ],
)
def test_a_mistyped_solution_path_is_one_line(capsys, ws: Path, flag: str, path: str) -> None:
    err = one_line_error(*run_cli(capsys, *run_args(ws, flag, path)))
    assert flag in err


def test_workspace_is_found_only_upward(capsys, tmp_path: Path, ws: Path) -> None:
    # a folder of many folders, a solution deep inside: not a workspace, and not walked
    big = tmp_path / "big"
    deep = big / "a" / "b" / "c"
    deep.mkdir(parents=True)
    make_tiny_workspace(deep / "sol", batch_sizes=(1,), kernel="good_py")
    err = one_line_error(*run_cli(capsys, "status", "--workspace", str(big)))
    assert "not a workspace" in err and "--workspace" in err
    # a folder inside a workspace: the workspace above it
    code, out, _ = run_cli(
        capsys, "check", "--workspace", str(ws / "solution" / "triton"), "--json"
    )
    assert code == 0 and json.loads(out)["workspace"] == str(ws.resolve())


@pytest.mark.parametrize("value", ["no/such/dir", "/", "bad\0path"])
def test_a_mistyped_workspace_or_dataset_is_one_line(capsys, ws: Path, value: str) -> None:
    one_line_error(*run_cli(capsys, "status", "--workspace", value))
    one_line_error(*run_cli(capsys, "status", "--workspace", str(ws), "--dataset", value))


def test_a_link_out_of_the_dataset_is_refused(capsys, ws: Path, secret: Path) -> None:
    defs = ws / "dataset" / "definitions"
    (defs / "other.json").symlink_to(secret)
    err = one_line_error(*run_cli(capsys, *run_args(ws)))
    assert "other.json" in err and str(secret) in err


def test_resume_of_a_mistyped_run_id_is_one_line(capsys, ws: Path) -> None:
    for value in ("../../..", "/", "no-such-run"):
        one_line_error(*run_cli(capsys, *run_args(ws, "--resume", value)))


def test_a_plain_folder_is_a_solution_only_with_its_entry_file(capsys, ws: Path) -> None:
    folder = ws / "candidates" / "empty"
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("not a kernel")
    err = one_line_error(*run_cli(capsys, *run_args(ws, "--solution", str(folder))))
    assert "kernel.py" in err
    assert not os.path.exists(ws / "optimize_ops" / "runs")


def test_parity_import_never_walks_a_whole_tree(
    capsys, tmp_path: Path, ws: Path, monkeypatch
) -> None:
    from fibtui.runners import parity

    big = tmp_path / "big"
    for i in range(12):
        (big / f"d{i}").mkdir(parents=True)
        (big / f"d{i}" / "x.jsonl").write_text("{}\n")
    monkeypatch.setattr(parity, "IMPORT_MAX_ENTRIES", 10)
    err = one_line_error(*run_cli(capsys, "parity", "--workspace", str(ws), "--import", str(big)))
    assert "not a flashinfer-bench output folder" in err and "--import" in err
