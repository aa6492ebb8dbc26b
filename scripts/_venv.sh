# Shared by scripts/run and scripts/test: create .venv if missing and (re)install when the
# project's requirements changed. Sourced, not executed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"

pick_python() {
    if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
    # torch==2.13.0 (CPU) lies on these machines' disk for Python 3.11: prefer it.
    for cand in python3.11 python3.12 python3.13 python3; do
        if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$cand"; return
        fi
    done
    echo "fibtui needs Python >= 3.11 (none found on PATH; set PYTHON=/path/to/python3.11)" >&2
    exit 2
}

ensure_venv() {
    # $1: the extras to install, e.g. "gpu,test"; $2: pin torch to 2.13.0 (CPU build) when "pin"
    local extras="$1" pin="${2:-}"
    if [ ! -x "$VENV/bin/python" ]; then
        "$(pick_python)" -m venv "$VENV"
    fi
    local want
    want="$(cat "$ROOT/pyproject.toml" | sha256sum | cut -c1-16) extras=$extras pin=$pin"
    local stamp="$VENV/.fibtui-installed"
    if [ -f "$stamp" ] && grep -qxF "$want" "$stamp"; then
        return 0
    fi
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
    local spec="$ROOT"
    [ -n "$extras" ] && spec="$ROOT[$extras]"
    if [ "$pin" = "pin" ]; then
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$spec" "torch==2.13.0" 2> >(grep -v "^WARNING: Location" >&2)
    else
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$spec" 2> >(grep -v "^WARNING: Location" >&2)
    fi
    echo "$want" >> "$stamp"
}

ensure_optional() {
    # $1: an extra to add when this machine's package index has it (e.g. "bench": flashinfer-bench,
    # so the tests that compare fibtui with flashinfer-bench's own code run instead of skipping).
    # torch stays pinned to 2.13.0 (the CPU build). A failure is a note, never a stop: the tests
    # that need the extra skip and say so.
    local extra="$1"
    local want
    want="optional=$extra $(cat "$ROOT/pyproject.toml" | sha256sum | cut -c1-16)"
    local stamp="$VENV/.fibtui-installed"
    if [ -f "$stamp" ] && grep -qxF "$want" "$stamp"; then
        return 0
    fi
    if "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$ROOT[$extra]" "torch==2.13.0" \
            2> >(grep -v "^WARNING: Location" >&2); then
        echo "$want" >> "$stamp"
    else
        echo "note: the '$extra' extra could not be installed here; the tests that need it will skip" >&2
    fi
}
