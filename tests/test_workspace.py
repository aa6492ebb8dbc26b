from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fibtui.core.errors import InputError, UsageError
from fibtui.core.workspace import check_topology, load_config, open_workspace
from tests.conftest import DEMO, DEMO_DEFINITION

CONFIG = """[solution]
name = "{name}"
definition = "{definition}"
author = "me"

[build]
language = "triton"
entry_point = "{entry}"
"""


def make_solution(
    folder: Path,
    definition: str,
    *,
    entry: str = "kernel.py::run",
    source: str | None = "def run():\n    pass\n",
    name: str = "sol",
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text(
        CONFIG.format(name=name, definition=definition, entry=entry)
    )
    src = folder / "solution" / "triton"
    src.mkdir(parents=True, exist_ok=True)
    if source is not None:
        (src / "kernel.py").write_text(source)
    return folder


def test_demo_is_a_valid_single_topology(demo_ws: Path) -> None:
    ws = open_workspace(demo_ws)
    assert ws.topology.kind == "single" and ws.topology.valid
    assert ws.active is not None and ws.active.definition == DEMO_DEFINITION
    assert ws.active.entry_point == "kernel.py::gdn_decode" and ws.active.dps is True
    assert ws.dataset_source == "dataset/" and ws.dataset_root == (demo_ws / "dataset").resolve()


def test_found_from_a_subfolder_upward(demo_ws: Path) -> None:
    ws = open_workspace(cwd=demo_ws / "solution" / "triton")
    assert ws.root == demo_ws.resolve()


def test_no_workspace_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no workspace found"):
        open_workspace(cwd=tmp_path)


def test_per_definition_layout_and_active_folder(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()  # a solution repo with one folder per definition
    make_solution(tmp_path / "def_a", "def_a")
    make_solution(tmp_path / "def_b", "def_b")
    topo = check_topology(tmp_path)
    assert topo.kind == "per-definition" and topo.valid
    ws = open_workspace(cwd=tmp_path / "def_b" / "solution")
    assert ws.root == tmp_path.resolve() and ws.active.definition == "def_b"
    ws = open_workspace(cwd=tmp_path)
    assert ws.root == tmp_path.resolve() and {c.definition for c in ws.configs} == {
        "def_a",
        "def_b",
    }


def test_bare_entry_point_resolves_to_the_defining_file(tmp_path: Path) -> None:
    make_solution(tmp_path, "d", entry="fused", source=None)
    (tmp_path / "solution" / "triton" / "impl.py").write_text("def fused(x):\n    return x\n")
    cfg = load_config(tmp_path / "config.toml")
    assert cfg.entry_file == "impl.py" and cfg.entry_point == "impl.py::fused"
    assert check_topology(tmp_path).valid


INVALID = {
    "config inside solution/": "config.toml inside solution/",
    "root and per-definition together": "root and per-definition configs together",
    "two configs for one definition": "two configs for one definition",
    "empty source folder": "is empty",
    "entry point file missing": "does not exist",
    "bare entry point not found": "no file in solution/triton/ defines it",
    "bad toml": "not valid TOML",
    "missing definition": "required field is missing",
}


def build_invalid(case: str, root: Path) -> None:
    if case == "config inside solution/":
        make_solution(root, "d")
        (root / "solution" / "config.toml").write_text(
            CONFIG.format(name="x", definition="d2", entry="kernel.py::run")
        )
    elif case == "root and per-definition together":
        make_solution(root, "d")
        make_solution(root / "d2", "d2")
    elif case == "two configs for one definition":
        make_solution(root / "a", "d")
        make_solution(root / "b", "d")
    elif case == "empty source folder":
        make_solution(root, "d", source=None)
    elif case == "entry point file missing":
        make_solution(root, "d", entry="main.py::run")
    elif case == "bare entry point not found":
        make_solution(root, "d", entry="nothing_here", source=None)
        (root / "solution" / "triton" / "other.py").write_text("x = 1\n")
    elif case == "bad toml":
        make_solution(root, "d")
        (root / "config.toml").write_text('[solution]\nname = "x"\ndefinition = \n')
    elif case == "missing definition":
        make_solution(root, "d")
        (root / "config.toml").write_text(
            '[solution]\nname = "x"\n[build]\nlanguage = "triton"\nentry_point = "kernel.py::run"\n'
        )


@pytest.mark.parametrize("case", sorted(INVALID))
def test_every_invalid_topology_is_reported(tmp_path: Path, case: str) -> None:
    build_invalid(case, tmp_path)
    topo = check_topology(tmp_path)
    assert topo.kind == "invalid"
    text = "\n".join(str(p) for p in topo.problems)
    assert INVALID[case] in text
    assert str(tmp_path) in text  # each line names the file


def test_toml_error_names_the_line(tmp_path: Path) -> None:
    build_invalid("bad toml", tmp_path)
    with pytest.raises(InputError) as exc:
        load_config(tmp_path / "config.toml")
    assert exc.value.line == 3


def test_dataset_resolution_order(
    demo_ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other_ds"
    shutil.copytree(DEMO / "dataset", other)
    monkeypatch.setenv("FIB_DATASET_PATH", str(other))
    assert open_workspace(demo_ws).dataset_source == "FIB_DATASET_PATH"
    ws = open_workspace(demo_ws, dataset=demo_ws / "dataset")
    assert ws.dataset_source == "--dataset"
    monkeypatch.delenv("FIB_DATASET_PATH")
    shutil.move(str(demo_ws / "dataset"), str(demo_ws / "flashinfer-trace"))
    ws = open_workspace(demo_ws)
    assert ws.dataset_source == "embedded:flashinfer-trace"
    with pytest.raises(InputError, match="no definitions/"):
        open_workspace(demo_ws, dataset=demo_ws / "solution")
    monkeypatch.setenv("FIB_DATASET_PATH", str(tmp_path / "missing"))
    with pytest.raises(InputError, match="FIB_DATASET_PATH"):
        open_workspace(demo_ws)


def test_sibling_workspaces_in_a_plain_folder_are_not_one_workspace(tmp_path: Path) -> None:
    make_solution(tmp_path / "ws1", "d1")
    make_solution(tmp_path / "ws2", "d2")
    ws = open_workspace(cwd=tmp_path / "ws1")
    assert ws.root == (tmp_path / "ws1").resolve() and ws.topology.kind == "single"
    (tmp_path / "ws2" / ".git").mkdir()
    (
        tmp_path / ".git"
    ).mkdir()  # even inside a repo, a folder that is its own repository stands alone
    assert open_workspace(cwd=tmp_path / "ws2").root == (tmp_path / "ws2").resolve()


def test_a_folder_of_workspace_repositories_is_not_a_workspace(tmp_path: Path) -> None:
    """/tmp holding demo workspaces (each its own git repository): no workspace is found there."""
    for name in ("demo1", "demo2"):
        make_solution(tmp_path / name, "d1")
        (tmp_path / name / ".git").mkdir()
    with pytest.raises(UsageError, match="no workspace found"):
        open_workspace(cwd=tmp_path)
    assert open_workspace(cwd=tmp_path / "demo2").root == (tmp_path / "demo2").resolve()
