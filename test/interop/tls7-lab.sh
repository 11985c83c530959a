#!/usr/bin/env bash
# tls7-lab.sh — the TLS lab (tls-lab.sh: trixie userland, tlshd, nvme-cli 2.13) on the newest Debian kernel
# (trixie-backports 7.x, built by harness/lab/build-newest-kernel.sh into /var/tmp/nvme-lab-7). Linux 6.15+
# hosts have secure channel concatenation (`nvme connect --concat`), which tls-concat-kernel.test.ts runs.
#
#   test/interop/tls7-lab.sh [--print-out]     idempotent; ~1 min the first time when the TLS lab exists, ~1 s after
#
# Output: LAB_TLS7_OUT (default /var/tmp/nvme-lab-tls7). Environment: LAB7_OUT.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
LAB=$ROOT/harness/lab
OUT=${LAB_TLS7_OUT:-/var/tmp/nvme-lab-tls7}
[ "${1:-}" = --print-out ] && { echo "$OUT"; exit 0; }
K7=${LAB7_OUT:-/var/tmp/nvme-lab-7}
LAB_OUT=$K7 bash "$LAB/build-newest-kernel.sh" >&2
LAB_TLS_KERNEL_LAB=$K7 LAB_TLS_OUT=$OUT bash "$HERE/tls-lab.sh"
