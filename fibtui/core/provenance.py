"""Which flashinfer-bench a parity run used, and whether it measured as the contest's does
(docs/measurement.md, "Cross-checks"): its version and commit, cupti-python's version, whether its
CUPTI timing fell back to CUDA events, and its per-definition evaluation settings
(``eval_config.yaml``) against fibtui's presets (:mod:`fibtui.core.presets`).

The contest runs flashinfer-bench's main branch. Releases up to 0.1.2 time each call with CUDA
events (the launch included) after a 256 MB zero-fill; main has timed with CUPTI per call after a
2 x L2 zero-fill since 2026-02-24 (its pull request #196), and
falls back to CUDA events, with a warning only, when ``cupti-python`` (13 or newer) cannot be
imported. Pure functions: the facts come from :func:`fibtui.runners.parity.bench_facts`, which
asks the Python that runs flashinfer-bench.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: what flashinfer's CUPTI timer prints when it falls back to CUDA events
FALLBACK_TEXT = "Falling back to CUDA events"
#: the last release before main's CUPTI timing (flashinfer-bench #196, 2026-02-24)
LAST_OLD_RELEASE = (0, 1, 2)
#: cupti-python's first major version flashinfer's CUPTI timer accepts
CUPTI_MAJOR = 13

_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)(.*)$")
_COMMIT = re.compile(r"\+g([0-9a-f]{7,40})")


def commit_of(facts: Mapping[str, Any]) -> str | None:
    """The commit flashinfer-bench was built from: its install's ``direct_url.json`` (a pip
    install from git), else the ``+g<hash>`` of a version made from a git checkout."""
    commit = facts.get("commit")
    if isinstance(commit, str) and commit:
        return commit
    found = _COMMIT.search(str(facts.get("version") or ""))
    return found.group(1) if found else None


def is_release(version: str | None) -> bool:
    """A plain release number (``0.1.2``), not a development build of a branch."""
    found = _VERSION.match(version or "")
    return found is not None and not found.group(4)


def fallback_fired(texts: list[str], facts: Mapping[str, Any]) -> bool | None:
    """Did the CUPTI timer fall back to CUDA events? True when its warning is in the logs, or when
    cupti-python cannot be imported by the Python that ran it (the fallback then always fires);
    False when cupti-python 13+ imports and no warning was logged; None when that is not known."""
    if any(FALLBACK_TEXT in t for t in texts):
        return True
    importable = facts.get("cupti_importable")
    version = str(facts.get("cupti_python") or "")
    major = int(version.split(".")[0]) if version.split(".")[0].isdigit() else None
    if importable is False or (major is not None and major < CUPTI_MAJOR):
        return True
    if importable is True and major is not None:
        return False
    return None


def provenance(facts: Mapping[str, Any], texts: list[str]) -> dict[str, Any]:
    """The record's ``bench`` object: version, commit, cupti-python, flashinfer, whether the CUDA
    event fallback fired, and whether the version is a release."""
    version = facts.get("version")
    old = _old_release(version)
    fallback = None if old else fallback_fired(texts, facts)
    if old:
        timing = "CUDA events (this release's method)"
    elif fallback is True:
        timing = "CUDA events (its CUPTI timer fell back)"
    elif fallback is False:
        timing = "CUPTI"
    else:
        timing = "not known"
    return {
        "version": version,
        "commit": commit_of(facts),
        "release": is_release(version) if isinstance(version, str) else None,
        "cupti_python": facts.get("cupti_python"),
        "flashinfer": facts.get("flashinfer"),
        "cuda_event_fallback": fallback,
        "timing": timing,
        "asked": facts.get("asked", True),
    }


def _old_release(version: Any) -> bool:
    """A release up to 0.1.2: before main's CUPTI timing, so there is no fallback to speak of."""
    found = _VERSION.match(version) if isinstance(version, str) else None
    if found is None or not is_release(version):
        return False
    return tuple(int(found.group(i)) for i in (1, 2, 3)) <= LAST_OLD_RELEASE


def describe(bench: Mapping[str, Any]) -> str:
    """``flashinfer-bench 0.1.3.dev1+g40e6ca78 (commit 40e6ca78), cupti-python 13.4.0: timed
    with CUPTI``."""
    if not bench.get("asked", True):
        fell = bench.get("cuda_event_fallback")
        said = "its logs say it fell back to CUDA events" if fell else "its logs say nothing of it"
        return (
            f"flashinfer-bench: imported traces, the version that made them is not known ({said})"
        )
    commit = f" (commit {bench['commit'][:12]})" if bench.get("commit") else ""
    cupti = (
        f", cupti-python {bench['cupti_python']}"
        if bench.get("cupti_python")
        else ", no cupti-python"
    )
    return (
        f"flashinfer-bench {bench.get('version') or '(version not known)'}{commit}{cupti}: timed with "
        f"{bench.get('timing') or 'not known'}"
    )


def provenance_warnings(bench: Mapping[str, Any]) -> list[str]:
    """A warning when the CUDA-event fallback fired, and when the flashinfer-bench that ran is a
    release the contest does not run."""
    out: list[str] = []
    version = bench.get("version")
    if bench.get("cuda_event_fallback") is True:
        out.append(
            "flashinfer-bench timed with CUDA events, not CUPTI (its fallback fired: cupti-python "
            f"{bench.get('cupti_python') or 'is missing'}; it needs {CUPTI_MAJOR}+): its latencies "
            "include launch overhead the contest's do not"
        )
    if isinstance(version, str) and is_release(version):
        found = _VERSION.match(version)
        assert found is not None
        number = tuple(int(found.group(i)) for i in (1, 2, 3))
        older = (
            " (it times with CUDA events, the launch included)"
            if number <= LAST_OLD_RELEASE
            else ""
        )
        out.append(
            f"flashinfer-bench {version} is a release{older}; the contest runs its main branch: "
            "install it from main to measure as the contest does"
        )
    return out


def eval_config_warnings(config: Mapping[str, Any] | None, preset: Any) -> list[str]:
    """Where flashinfer-bench's ``eval_config.yaml`` (resolved for the definition, before any
    command-line flag) sets tolerances or timing other than fibtui's preset, one warning each."""
    if not config:
        return []
    from fibtui.core.presets import default_matched_ratio, official_timing

    ours = {
        "atol": preset.atol,
        "rtol": preset.rtol,
        "required_matched_ratio": preset.required_ratio,
    }
    timing = official_timing(preset)
    ours_timing = {
        "warmup_runs": timing["warmup"],
        "iterations": timing["iterations"],
        "num_trials": timing["trials"],
    }
    out: list[str] = []
    theirs_ratio = config.get("required_matched_ratio")
    if theirs_ratio is None:  # its evaluator's own default, as fibtui's preset says it
        theirs_ratio = default_matched_ratio(preset.evaluator)
    theirs = {
        "atol": config.get("atol"),
        "rtol": config.get("rtol"),
        "required_matched_ratio": theirs_ratio,
    }
    for key, mine in ours.items():
        value = theirs.get(key)
        if isinstance(value, (int, float)) and abs(float(value) - float(mine)) > 1e-12:
            out.append(
                f"flashinfer-bench's eval_config.yaml sets {key} {value:g} for this definition, "
                f"fibtui's preset {mine:g} ({preset.source}): the two judge differently"
            )
    for key, mine in ours_timing.items():
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value != mine:
            out.append(
                f"flashinfer-bench's eval_config.yaml sets {key} {value} for this definition, "
                f"fibtui's preset {mine} ({preset.source})"
            )
    return out
