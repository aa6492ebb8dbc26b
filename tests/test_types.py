"""mypy over fibtui/core, fibtui/runners, fibtui/services and fibtui/worker, with the settings in
pyproject.toml's [tool.mypy] (torch and triton are not read: the worker's calls into them are Any).

One test, so the planted checks reuse the first one's cache (the whole test took 28 s on a
shared 2-core machine, most of it the cold check).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKED = ("fibtui/core", "fibtui/runners", "fibtui/services", "fibtui/worker")
#: a module of core, and one of the worker, and the line planted at the end of each: a str where
#: an int is declared
PLANTED_IN = ("fibtui/core/numbers.py", "fibtui/worker/wire.py")
PLANTED = '\n\n_planted_by_test_types: int = "not an int"\n'


def _mypy(cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "MYPY_FORCE_COLOR": "0"},
        timeout=300,
    )


def test_core_runners_and_worker_type_check_and_a_planted_error_fails(tmp_path: Path) -> None:
    assert importlib.util.find_spec("mypy") is not None, (
        "mypy is missing: it is in the test extra (pip install -e '.[test]')"
    )
    cache = tmp_path / "mypy-cache"
    clean = _mypy(cache)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    sources = sum(1 for folder in CHECKED for _ in (REPO / folder).rglob("*.py"))
    assert f"no issues found in {sources} source files" in clean.stdout, clean.stdout

    for module in PLANTED_IN:
        planted = tmp_path / f"{Path(module).stem}_planted.py"
        planted.write_text((REPO / module).read_text(encoding="utf-8") + PLANTED)
        bad = _mypy(cache, "--shadow-file", module, str(planted))
        assert bad.returncode == 1, bad.stdout + bad.stderr
        assert re.search(
            rf"{re.escape(module)}:\d+: error: Incompatible types in assignment .*\[assignment\]",
            bad.stdout,
        ), bad.stdout
        assert "Found 1 error in 1 file" in bad.stdout, bad.stdout
