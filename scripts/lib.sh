# Shared by scripts/serve, scripts/test and .ci/run: find Python >= 3.12 and keep
# the project's virtual environment (.venv) installed from pyproject.toml.
# shellcheck shell=bash

TAPROOT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TAPROOT_VENV:-$TAPROOT_ROOT/.venv}"

# A candidate counts only if it actually runs: pyenv puts shims such as
# python3.12 on PATH that exist but fail unless that version is selected.
_python_ok() {
    "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1
}

find_python() {
    local candidate
    if [ -n "${TAPROOT_PYTHON:-}" ]; then
        if _python_ok "$TAPROOT_PYTHON"; then echo "$TAPROOT_PYTHON"; return 0; fi
        echo "TAPROOT_PYTHON=$TAPROOT_PYTHON is not a working Python >= 3.12." >&2
        return 1
    fi
    for candidate in python3.14 python3.13 python3.12 python3 python; do
        if command -v "$candidate" >/dev/null 2>&1 && _python_ok "$candidate"; then
            command -v "$candidate"; return 0
        fi
    done
    local root
    root="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"
    for candidate in $(ls -d "$root"/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -rV); do
        if _python_ok "$candidate"; then echo "$candidate"; return 0; fi
    done
    cat >&2 <<'MSG'
Taproot needs Python 3.12 or newer (Django 6 requires it), and none was found.
Install one (for example `pyenv install 3.12` or your system's python3.12 package),
or point TAPROOT_PYTHON at its interpreter, then run this command again.
MSG
    return 1
}

# Create .venv if needed and (re)install the project whenever pyproject.toml or
# constraints.txt (the exact versions; scripts/refresh-constraints rewrites it) changes.
ensure_venv() {
    local extras="${1:-}" python stamp hash want installed
    use_project_hooks
    if [ ! -x "$VENV/bin/python" ] || ! _python_ok "$VENV/bin/python"; then
        python="$(find_python)" || return 1
        echo "Creating virtual environment in $VENV with $("$python" --version)" >&2
        rm -rf "$VENV"
        "$python" -m venv "$VENV" || return 1
    fi
    stamp="$VENV/.taproot-installed"
    hash="$(cat "$TAPROOT_ROOT/pyproject.toml" "$TAPROOT_ROOT/constraints.txt" | sha256sum | cut -d' ' -f1)"
    want="$hash[$extras]"
    installed="$(cat "$stamp" 2>/dev/null || true)"
    # An install with extras also serves a request without them, so running the server
    # after the tests (as .ci/run does) does not reinstall.
    if [ "$installed" != "$want" ] && { [ -n "$extras" ] || [ "${installed%%\[*}" != "$hash" ]; }; then
        echo "Installing Taproot${extras:+ with [$extras]} into $VENV ..." >&2
        # pip itself at the version constraints.txt pins, not whichever release is newest
        # today: a new pip can resolve, build or word its errors differently.
        if ! grep -q '^pip==' "$TAPROOT_ROOT/constraints.txt"; then
            echo "constraints.txt pins no pip version: add a line pip==<version>." >&2
            return 1
        fi
        "$VENV/bin/python" -m pip install --quiet -c "$TAPROOT_ROOT/constraints.txt" pip >&2 \
            || return 1
        # setuptools warns on every editable install that folders named like a package may
        # shadow it, a banner pip relays even with --quiet; this one warning is ignored
        # (by its text), anything else the build or pip says still shows.
        PYTHONWARNINGS="${PYTHONWARNINGS:+$PYTHONWARNINGS,}ignore:Editable installation.:UserWarning" \
            "$VENV/bin/python" -m pip install --quiet --no-compile \
            -c "$TAPROOT_ROOT/constraints.txt" -e "$TAPROOT_ROOT${extras:+[$extras]}" >&2 \
            || return 1
        # pip byte-compiles what it installs one file at a time (20 s of a 45 s install
        # with the dev extra); compileall does the same on every core. Like pip's, a file
        # that does not compile is left to be compiled, or refused, when imported.
        # shellcheck disable=SC2046  # one argument per folder
        "$VENV/bin/python" -m compileall -qq -j 0 $("$VENV/bin/python" -c \
            'import sysconfig; print(*{sysconfig.get_path(p) for p in ("purelib", "platlib")})') \
            >&2 || true
        echo "$want" > "$stamp"
    fi
}

# Git runs the project's hooks (.githooks/: the commit subject's length) in a checkout
# whose hooks folder nobody chose. Silent, and a no-op outside a git checkout.
use_project_hooks() {
    if git -C "$TAPROOT_ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1 \
        && [ -z "$(git -C "$TAPROOT_ROOT" config --get core.hooksPath 2>/dev/null)" ]; then
        git -C "$TAPROOT_ROOT" config core.hooksPath .githooks || true
    fi
}
