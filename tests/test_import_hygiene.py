"""fibtui.core and fibtui.worker keep their layers: proven in a fresh interpreter."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import fibtui.core


def _loaded_after_import(modules: list[str]) -> set[str]:
    code = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def test_core_imports_no_textual_torch_triton_or_modal() -> None:
    core = [f"fibtui.core.{m.name}" for m in pkgutil.iter_modules(fibtui.core.__path__)]
    assert "fibtui.core.dataset" in core and "fibtui.core.results" in core
    loaded = _loaded_after_import(core)
    for banned in ("textual", "torch", "triton", "modal", "flashinfer_bench"):
        assert banned not in loaded, f"fibtui.core pulled in {banned}"


def test_cli_start_imports_no_gpu_stack() -> None:
    loaded = _loaded_after_import(["fibtui.cli", "fibtui.ui.app"])
    for banned in ("torch", "triton", "modal", "flashinfer_bench"):
        assert banned not in loaded, f"starting the TUI pulled in {banned}"


def test_building_the_cli_parser_stays_light() -> None:
    code = (
        "import json, sys\n"
        "import fibtui.cli\n"
        "fibtui.cli.build_parser()\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    for heavy in ("polars", "rich", "textual", "torch", "git"):
        assert heavy not in loaded, f"a verb module imports {heavy} at module level"
