#!/usr/bin/env bash
# lab-boot.sh RUN_SH ARGS... — the shared lab's run.sh, booted again when the guest kernel died before the guest
# script began: run.sh exit 125 (no END marker) and no ===LAB-SCRIPT-BEGIN in its output. Debian's 7.3.4 kernel
# oopses now and then at boot under qemu (kdamond_fn → int3 in sched_clock_cpu, panic at ~2 s uptime), which says
# nothing about the suite. A script that began is never re-run: what it did to the host side was real.
# LAB_BOOT_TRIES (default 3) bounds the boots. Exit status: run.sh's.
set -uo pipefail
tries=${LAB_BOOT_TRIES:-3}
log=$(mktemp "${TMPDIR:-/tmp}/lab-boot.XXXXXX")
trap 'rm -f "$log"' EXIT
trap 'exit 143' TERM INT
for ((i = 1; ; i++)); do
  bash "$@" | tee "$log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" != 125 ] || grep -aq '===LAB-SCRIPT-BEGIN' "$log" || [ "$i" -ge "$tries" ]; then exit "$rc"; fi
  echo "lab-boot: the guest died before its script began (boot $i of $tries); booting it again" >&2
done
