"""mypy over fibtui/verbs and fibtui/cli.py, with the settings in pyproject.toml's [tool.mypy].

The modules they import (core, runners, the TUI that ``fibtui tui`` opens) are read for their types
but not reported here (``--follow-imports silent``): core and runners have tests/test_types.py.
One test, so the planted check reuses the clean check's cache (as tests/test_types.py does).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKED = ("fibtui/verbs", "fibtui/cli.py")
#: a verb module and the line planted at its end: a str where an int is declared
PLANTED_IN = "fibtui/verbs/demo.py"
PLANTED = '\n\n_planted_by_test_types_verbs: int = "not an int"\n'


def _mypy(cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--cache-dir",
            str(cache),
            "--follow-imports",
            "silent",
            *args,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "MYPY_FORCE_COLOR": "0"},
        timeout=300,
    )


def test_verbs_and_cli_type_check_and_a_planted_error_fails(tmp_path: Path) -> None:
    assert importlib.util.find_spec("mypy") is not None, (
        "mypy is missing: it is in the test extra (pip install -e '.[test]')"
    )
    cache = tmp_path / "mypy-cache"
    clean = _mypy(cache, *CHECKED)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    sources = sum(1 for _ in (REPO / "fibtui/verbs").rglob("*.py")) + 1
    assert f"no issues found in {sources} source files" in clean.stdout, clean.stdout

    planted = tmp_path / "demo_planted.py"
    planted.write_text((REPO / PLANTED_IN).read_text(encoding="utf-8") + PLANTED)
    bad = _mypy(cache, "--shadow-file", PLANTED_IN, str(planted), *CHECKED)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert re.search(
        rf"{re.escape(PLANTED_IN)}:\d+: error: Incompatible types in assignment .*\[assignment\]",
        bad.stdout,
    ), bad.stdout
    assert "Found 1 error in 1 file" in bad.stdout, bad.stdout
