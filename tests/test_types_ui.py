"""mypy over fibtui/ui, with the settings in pyproject.toml's [tool.mypy] (strict).

fibtui/ui is not in [tool.mypy]'s files yet, so it is named here. One test, so the second check
reuses the first one's cache (as tests/test_types.py does): a cold check of the UI and what it
imports, then the planted check after it, about a second.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKED = "fibtui/ui"
#: a module of the UI and the line planted at its end: a str where an int is declared
PLANTED_IN = "fibtui/ui/messages.py"
PLANTED = '\n\n_planted_by_test_types_ui: int = "not an int"\n'


def _mypy(cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "MYPY_FORCE_COLOR": "0"},
        timeout=300,
    )


def test_the_ui_type_checks_strictly_and_a_planted_error_fails(tmp_path: Path) -> None:
    assert importlib.util.find_spec("mypy") is not None, (
        "mypy is missing: it is in the test extra (pip install -e '.[test]')"
    )
    cache = tmp_path / "mypy-cache"
    clean = _mypy(cache, CHECKED)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    sources = sum(1 for _ in (REPO / CHECKED).rglob("*.py"))
    assert f"no issues found in {sources} source files" in clean.stdout, clean.stdout

    planted = tmp_path / "messages_planted.py"
    planted.write_text((REPO / PLANTED_IN).read_text(encoding="utf-8") + PLANTED)
    bad = _mypy(cache, "--shadow-file", PLANTED_IN, str(planted), CHECKED)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert re.search(
        rf"{re.escape(PLANTED_IN)}:\d+: error: Incompatible types in assignment .*\[assignment\]",
        bad.stdout,
    ), bad.stdout
    assert "Found 1 error in 1 file" in bad.stdout, bad.stdout
