# Sourced by scripts/setup_openenv.sh, setup_trl.sh and setup_vllm.sh: installs one pinned package into its own
# cached venv outside the repo, and never fails the caller (a failure is recorded in install-failed.txt in
# that venv's folder, printed, and the tests that need the package skip with it). The caller calls, in order:
#   cached_venv_start TOOL LABEL PYTHON_VAR SKIP_VAR SKIPS  (exits 0 when $PYTHON_VAR is set or $SKIP_VAR=1)
#   cached_venv_begin VENV OK_NAME         (exits 0 when installed already, or when an earlier try failed)
#   cached_venv_create MIN_GB SPEC DURATION  (a Python, the free space, then the venv)
#   cached_venv_pip_install SPEC...        (one pip install; call it again for an install that must come first)
#   cached_venv_verify SPEC COMMAND...     (COMMAND must succeed once the package is in)
#   cached_venv_done
# TOOL prefixes every message, LABEL names the package in them, SKIPS says what skips without it.

cached_venv_fail() {
  mkdir -p "$VENV"
  echo "$1" > "$FAILED"
  echo "$TOOL: $1 ($SKIPS will skip)" >&2
  exit 0
}

cached_venv_start() {
  TOOL=$1 LABEL=$2 SKIPS=$5
  if [ -n "${!3:-}" ]; then
    echo "$TOOL: using $3=${!3}"
    exit 0
  fi
  [ "${!4:-0}" = 1 ] && { echo "$TOOL: $4=1, not installing $LABEL"; exit 0; }
  return 0
}

cached_venv_begin() {
  VENV=$1 OK=$1/$2 FAILED=$1/install-failed.txt
  [ -f "$OK" ] && exit 0
  if [ -f "$FAILED" ]; then
    echo "$TOOL: an earlier install failed ($(tail -n 1 "$FAILED")); delete $FAILED to retry" >&2
    exit 0
  fi
}

cached_venv_create() {
  local min_gb=$1 spec=$2 duration=$3 py=${PYTHON:-} c free_kb
  if [ -z "$py" ]; then
    for c in python3.11 python3.12 python3.10 python3; do command -v "$c" >/dev/null 2>&1 && { py=$c; break; }; done
  fi
  [ -n "$py" ] || cached_venv_fail "no python3 to create the $LABEL environment with"
  mkdir -p "$(dirname "$VENV")"
  free_kb=$(df -Pk "$(dirname "$VENV")" | awk 'NR==2 {print $4}')
  [ "${free_kb:-0}" -ge $((min_gb * 1000000)) ] || cached_venv_fail "less than $min_gb GB free under $(dirname "$VENV") for $LABEL"
  echo "$TOOL: installing $spec into $VENV (first time only, $duration)"
  [ -x "$VENV/bin/python" ] || "$py" -m venv "$VENV" || cached_venv_fail "could not create a venv at $VENV with $py"
  export PIP_DISABLE_PIP_VERSION_CHECK=1
  CACHED_VENV_LOG=$VENV/pip-install.log
  : >"$CACHED_VENV_LOG"
}

cached_venv_pip_install() {
  if ! "$VENV/bin/python" -m pip install "$@" >>"$CACHED_VENV_LOG" 2>&1; then
    cached_venv_fail "pip install $* failed: $(grep -E '^ERROR' "$CACHED_VENV_LOG" | tail -n 1)"
  fi
}

cached_venv_verify() {
  local spec=$1
  shift
  if ! "$@" >>"$CACHED_VENV_LOG" 2>&1; then
    cached_venv_fail "$spec installed but does not import: $(tail -n 1 "$CACHED_VENV_LOG")"
  fi
}

cached_venv_done() {
  touch "$OK"
  echo "$TOOL: $LABEL ready at $VENV/bin/python"
}
