"""The best solution of each language: ``best_solution_<language>/`` holds the promoted entry
file named latency-first, its full snapshot in a folder of the same stem, and ``best.json``, the
pointer to the current best (the one file of the archive that is rewritten; earlier bests stay in
its ``history``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fibtui.core.archive.layout import BEST_POINTER, best_artifact_name, best_folder
from fibtui.core.errors import InputError
from fibtui.core.fsio import (
    atomic_copy_file,
    atomic_write_json,
    read_input_text,
    reserve_unique_path,
)
from fibtui.services.archive.store import claimed, copy_tree_into


def write_best(
    archive_root: Path,
    snapshot: str | Path,
    *,
    language: str,
    entry_file: str,
    operator: str,
    model: str,
    latency_us: float,
    meta: dict[str, Any] | None = None,
) -> list[Path]:
    """Put a promoted kernel under ``best_solution_<language>/``: the entry file named
    latency-first, its full snapshot in a folder of the same stem, and best.json pointing at it."""
    src = Path(snapshot)
    entry = src / "sources" / entry_file
    if not entry.is_file():
        raise InputError(src, f"snapshot has no sources/{entry_file}", field="entry_point")
    folder = best_folder(archive_root, language)
    ext = "kernel" + (Path(entry_file).suffix or ".py")
    name = best_artifact_name(operator, model, latency_us, ext)
    kernel = reserve_unique_path(folder / name)
    with claimed(kernel):
        atomic_copy_file(entry, kernel)
        stem = kernel.name[: -len("." + ext)] if kernel.name.endswith("." + ext) else kernel.stem
        snap = reserve_unique_path(folder / stem, directory=True)
        with claimed(snap):
            copy_tree_into(src, snap)
    pointer = folder / BEST_POINTER
    previous = read_best(archive_root, language)
    history = list((previous or {}).get("history", []))
    if previous and previous.get("current"):
        history.append({k: v for k, v in previous.items() if k != "history"})
    atomic_write_json(
        pointer,
        {
            "current": kernel.name,
            "snapshot": snap.name,
            "latency_us": round(latency_us, 6),
            "operator": operator,
            "model": model,
            "language": language,
            "entry_file": entry_file,
            **(meta or {}),
            "history": history,
        },
    )
    return [kernel, snap, pointer]


def read_best(archive_root: Path, language: str) -> dict[str, Any] | None:
    path = best_folder(archive_root, language) / BEST_POINTER
    if not path.is_file():
        return None
    text = read_input_text(
        path
    )  # a byte-order mark is accepted; bytes that are not UTF-8 are one line
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise InputError(path, f"not JSON: {exc}") from None
    except ValueError:  # json refuses integers of more than 4300 digits
        raise InputError(path, "not JSON: a number with more than 4300 digits") from None
    if not isinstance(data, dict):
        raise InputError(path, "expected an object")
    for key in ("current", "snapshot"):
        value = data.get(key)
        if value is not None and (
            not isinstance(value, str)
            or value in ("", ".", "..")
            or "/" in value
            or "\\" in value
            or "\0" in value
            or len(value) > 255
        ):
            raise InputError(
                path, f"expected a file name inside {path.parent.name}/, got {value!r}", field=key
            )
    return data


def best_solution_path(archive_root: Path, language: str) -> Path | None:
    """What to pair a gate against: the best snapshot's solution.json (from best.json), or a plain
    best_solution_<language>/ folder of sources; None when nothing was promoted yet."""
    folder = best_folder(archive_root, language)
    best = read_best(archive_root, language)
    if best and isinstance(best.get("snapshot"), str):
        candidate = folder / best["snapshot"] / "solution.json"
        if candidate.is_file():
            return candidate
    if folder.is_dir() and any(p.suffix in (".py", ".cu") for p in folder.iterdir() if p.is_file()):
        return folder
    return None


def installed_is_not_best(archive_root: Path, cfg: Any) -> str | None:
    """Why the checked-in solution of ``cfg`` (a SolutionConfig) is not the promoted best of its
    language and definition, in one line; None when it is, or when nothing was promoted for that
    definition. A submission tag proposes the promoted best: tagging sources other than it would
    submit a kernel the archive says is slower (the best is compared by source hash)."""
    from fibtui.core.plan import solution_from_config

    try:
        best = read_best(archive_root, cfg.language)
    except InputError:
        return None  # a broken best.json is reported where it is read for a gate
    if not best or not isinstance(best.get("source_hash"), str):
        return None
    if best.get("operator") not in (None, cfg.definition):
        return None
    installed = solution_from_config(cfg).source_hash
    if installed == best["source_hash"]:
        return None
    name = best.get("candidate") or best.get("model") or best.get("snapshot") or "?"
    latency = best.get("latency_us")
    at = f" ({latency:.3f} us)" if isinstance(latency, (int, float)) else ""
    folder = best_folder(archive_root, cfg.language)
    where = _shown(folder / str(best.get("snapshot") or "") / "sources", archive_root.parent)
    into = _shown(Path(cfg.source_dir), archive_root.parent)
    return (
        f"the promoted best is {name}{at}, but the checked-in {cfg.name} has other sources "
        f"(hash {installed}, the best's {best['source_hash']}): a tag would submit it, not the "
        f"best; copy {where}/ into {into}/ and commit it, or promote the kernel you mean"
    )


def _shown(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)
