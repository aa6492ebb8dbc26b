"""Control characters from files are shown, never obeyed (issue 17): an ESC, a carriage return or
a bidi override in a solution name, an error message or a path reaches neither the CLI's output
nor the TUI's screen as itself (tests/test_tui_e2e_tmux.py checks the TUI in a real terminal)."""

from __future__ import annotations

import json
from pathlib import Path

from rich.segment import Segment
from textual.color import Color

from fibtui.core.text import has_control, printable
from fibtui.ui.safe_text import ControlCharacters
from tests.conftest import run_cli

ESC = "\x1b"
EVIL = f"evil{ESC}[31mRED{ESC}]2;PWNED\x07\u202egnp.exe\x9b"


def trace_line(solution: str, uuid: str = "wl-000-n1") -> str:
    return json.dumps(
        {
            "definition": "tiny_scale",
            "solution": solution,
            "workload": {"uuid": uuid, "axes": {"n": 1}, "inputs": {"x": {"type": "random"}}},
            "evaluation": {
                "status": "RUNTIME_ERROR",
                "error": f"boom {ESC}[2Jcleared\rover",
                "correctness": None,
                "performance": None,
            },
        }
    )


def test_printable_replaces_each_control_character_with_one_visible_cell() -> None:
    assert printable(EVIL) == "evil␛[31mRED␛]2;PWNED␇\ufffdgnp.exe\ufffd"
    assert printable("plain text, tabs\tand\nnewlines") == "plain text, tabs\tand\nnewlines"
    assert printable("a\nb\tc", one_line=True) == "a␊b␉c"
    assert printable("back\bspace\x00nul\x7fdel") == "back␈space␀nul␡del"
    assert has_control(EVIL) and not has_control("ok\tok\n") and not has_control("größe 日本")


def test_results_show_prints_no_control_character_from_the_file(capsys, tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text(trace_line(EVIL) + "\n")
    code, out, err = run_cli(capsys, "results", "show", str(path))
    assert code in (0, 1), err
    for ch in (ESC, "\x07", "\r", "\u202e", "\x9b"):
        assert ch not in out + err, repr(ch)
    assert "evil␛" in out  # the column may cut the rest of the name
    # --json keeps the text as it was: JSON escapes it, so nothing reaches a terminal raw either
    code, out, _ = run_cli(capsys, "results", "show", "--json", str(path))
    assert ESC not in out and json.loads(out)["rows"][0]["solution"] == EVIL


def test_an_error_naming_a_file_prints_no_control_character(capsys, tmp_path: Path) -> None:
    code, _, err = run_cli(capsys, "results", "show", str(tmp_path / f"x{ESC}]2;PWNED\x07.json"))
    assert code == 2 and ESC not in err and "\x07" not in err
    assert "x␛]2;PWNED␇.json: file not found" in err
    code, _, err = run_cli(capsys, f"modal{ESC}[31m")  # argparse: invalid choice, naming it
    assert code == 2 and ESC not in err and "modal" in err


def test_the_tui_line_filter_keeps_the_laid_out_width() -> None:
    f = ControlCharacters()
    line = [Segment("name "), Segment(f"ev{ESC}[31mil"), Segment("   ")]
    width = Segment.get_line_length(line)
    shown = f.apply(line, Color(0, 0, 0))
    text = "".join(s.text for s in shown)
    assert ESC not in text and "ev␛[31mil" in text
    assert Segment.get_line_length(shown) == width
    clean = [Segment("nothing odd")]
    assert f.apply(clean, Color(0, 0, 0)) is clean
