#!/usr/bin/env bash
# SLURM for the launcher's SLURM test tier (tests/launch/test_slurm_tier.py): Debian's slurm-wlm (the
# daemons and the client commands; ~11 s, 14 MB). The tests run their own slurmctld and slurmd on
# loopback with a temporary config and stop them by pid. Never fails: without root or apt, or when the
# install does not work, the tier skips with the reason.
set -uo pipefail
if command -v sbatch >/dev/null && command -v slurmctld >/dev/null && command -v slurmd >/dev/null; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "setup_slurm.sh: not installing slurm-wlm (needs root and apt-get); the SLURM tier will skip" >&2
  exit 0
fi
echo "setup_slurm.sh: installing slurm-wlm (Debian packages) for the SLURM test tier" >&2
if ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm) >/dev/null 2>&1; then
  echo "setup_slurm.sh: apt-get could not install slurm-wlm; the SLURM tier will skip" >&2
fi
exit 0
