#!/usr/bin/env bash
# Gives the Harbor tier (tests/interop/harbor) and `--harbor.sandbox` what they need, never failing the caller:
#   1. Debian packages (as root with apt-get): bubblewrap (our host sandbox), and podman, runc, iptables and
#      debootstrap (Harbor's podman backend). Without root or apt, whatever is missing is named and skipped.
#   2. Podman for Harbor: this machine cannot pull images, so the base image the shipped tasks start FROM
#      (debian:bookworm-slim) is built once from Debian's packages with debootstrap (~2 minutes, ~200 MB) and
#      imported into podman's local store; a containers.conf selects runc (crun refuses hybrid cgroups) and
#      the ulimits this machine permits. Reason of a failure: <venv>/podman/failed.txt (delete it to retry).
#   3. Harbor itself (PyPI harbor, Python >= 3.12, no torch) and podman-compose in their own environment,
#      ${ATROPOS_HARBOR_VENV:-$HOME/.cache/atroposlib/harbor-<version>}, made with Python 3.12 (python3.12 on
#      PATH, else pyenv's; ~3 minutes and ~430 MB the first time). ATROPOS_HARBOR_PYTHON set: that Python's
#      Harbor is used and nothing is installed; ATROPOS_SKIP_HARBOR=1: nothing is installed.
# The Harbor tests skip with the recorded reason when a part could not be set up.
set -uo pipefail
VERSION=0.25.0             # keep equal to HARBOR_VERSION in atroposlib/interop/harbor/harbor_install.py
PODMAN_COMPOSE_VERSION=1.6.0
IMAGE=docker.io/library/debian:bookworm-slim   # BASE_IMAGE there
MIRROR=${ATROPOS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
REPO=$(cd "$(dirname "$0")/.." && pwd)
HARBOR_VENV=${ATROPOS_HARBOR_VENV:-$HOME/.cache/atroposlib/harbor-$VERSION}
source "$(dirname "$0")/lib_cached_venv.sh"

debian_packages() {
  local wanted=() p
  for p in bubblewrap podman runc iptables debootstrap; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || wanted+=("$p")
  done
  [ ${#wanted[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "setup_harbor: not installing ${wanted[*]} (needs root and apt-get); what needs them will skip" >&2
    return 0
  fi
  echo "setup_harbor: installing ${wanted[*]} (Debian packages)" >&2
  if ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${wanted[@]}") >/dev/null 2>&1; then
    echo "setup_harbor: apt-get could not install ${wanted[*]}; what needs them will skip" >&2
  fi
}

podman_fail() {
  echo "$1" > "$PODMAN_DIR/failed.txt"
  echo "setup_harbor: $1 (the podman tests will skip)" >&2
}

podman_base_image() {
  PODMAN_DIR=$HARBOR_VENV/podman
  mkdir -p "$PODMAN_DIR"
  if [ -f "$PODMAN_DIR/failed.txt" ]; then
    echo "setup_harbor: podman was not set up earlier ($(tail -n 1 "$PODMAN_DIR/failed.txt")); delete $PODMAN_DIR/failed.txt to retry" >&2
    return 0
  fi
  command -v podman >/dev/null || { podman_fail "no podman (Debian package podman)"; return 0; }
  printf '[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]\n[engine]\nruntime = "runc"\n' \
    > "$PODMAN_DIR/containers.conf"
  export CONTAINERS_CONF=$PODMAN_DIR/containers.conf
  if [ -f "$PODMAN_DIR/ok" ] && podman image exists "$IMAGE" 2>/dev/null; then return 0; fi
  rm -f "$PODMAN_DIR/ok"
  if ! podman image exists "$IMAGE" 2>/dev/null; then
    command -v debootstrap >/dev/null || { podman_fail "no debootstrap to build $IMAGE (Debian package debootstrap)"; return 0; }
    local rootfs
    rootfs=$(mktemp -d)
    echo "setup_harbor: building $IMAGE from Debian's packages with debootstrap (first time only, ~2 minutes)" >&2
    if ! debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >"$PODMAN_DIR/debootstrap.log" 2>&1; then
      rm -rf "$rootfs"
      podman_fail "debootstrap failed: $(tail -n 1 "$PODMAN_DIR/debootstrap.log")"
      return 0
    fi
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    if ! tar -C "$rootfs" -c . | podman import --change 'CMD ["/bin/bash"]' - "$IMAGE" >"$PODMAN_DIR/import.log" 2>&1; then
      rm -rf "$rootfs"
      podman_fail "podman import failed: $(tail -n 1 "$PODMAN_DIR/import.log")"
      return 0
    fi
    rm -rf "$rootfs"
  fi
  if ! podman run --rm --network none "$IMAGE" true >"$PODMAN_DIR/run.log" 2>&1; then
    podman_fail "a container of $IMAGE does not run: $(tail -n 1 "$PODMAN_DIR/run.log")"
    return 0
  fi
  touch "$PODMAN_DIR/ok"
}

python312() {
  local c
  if command -v python3.12 >/dev/null 2>&1 && python3.12 -c "" >/dev/null 2>&1; then command -v python3.12; return; fi
  for c in "$(pyenv root 2>/dev/null)"/versions/3.12*/bin/python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3.12; do
    [ -x "$c" ] && { echo "$c"; return; }
  done
}

debian_packages
[ "${ATROPOS_SKIP_HARBOR:-0}" = 1 ] || podman_base_image
cached_venv_start setup_harbor harbor ATROPOS_HARBOR_PYTHON ATROPOS_SKIP_HARBOR "the Harbor tests"
cached_venv_begin "$HARBOR_VENV" .atroposlib-harbor-ok
PYTHON=$(python312)
[ -n "$PYTHON" ] || cached_venv_fail "no Python 3.12 for Harbor (it needs >= 3.12; Debian has none: e.g. pyenv install 3.12)"
export PYTHON
cached_venv_create 2 "harbor==$VERSION" "about three minutes"
cached_venv_pip_install "harbor==$VERSION" "podman-compose==$PODMAN_COMPOSE_VERSION"
cached_venv_verify "harbor==$VERSION" env PYTHONPATH="$REPO" "$VENV/bin/python" -c \
  "import sys, harbor.environments.base, atroposlib.interop.harbor.harbor_backend; assert 'torch' not in sys.modules"
cached_venv_done
