"""Where the bundled demo, themes and archived demo rounds live (repo checkout or wheel)."""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def bundled(name: str) -> Path:
    """``kernels``, ``themes`` or ``optimize_ops``: inside a wheel (fibtui/_bundled/) or beside
    the package in a source checkout."""
    for candidate in (_PKG / "_bundled" / name, _PKG.parent / name):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"bundled folder {name!r} not found next to {_PKG}")


DEMO_NAME = "gdn_decode_demo"

#: the bundled demo operators: name -> (folder under kernels/, carries the archived H200 rounds)
DEMOS = {
    "gdn_decode": ("gdn_decode_demo", True),
    "dsa_topk": ("dsa_topk_demo", False),
}


def demo_source(operator: str = "gdn_decode") -> Path:
    return bundled("kernels") / DEMOS[operator][0]
