#!/usr/bin/env bash
# Everything `npm run test:interop` boots or runs, built from this repository before the suites start, so that a
# clone on a fresh machine runs them as they are (root: the builds apt-install qemu, nvme-cli, fio, mmdebstrap).
# Each step is idempotent: ~1-3 s when built; from scratch ~45 s per lab, ~1 min for the newest kernel, and SPDK
# ~4-10 min on 2 cores. SPDK's source is the one thing from outside: $SPDK_SRC (default ../shared/spdk, as CI lays it
# out); without it this builds no SPDK and the SPDK suites skip, each saying how to provide it (harness/peers/spdk.ts).
set -euo pipefail
cd "$(dirname "$0")/../.."
t0=$SECONDS
# The Linux 6.1 guest (kernel-host, kernel-target and most suites).
bash harness/lab/build.sh
# A second guest on Debian's 6.12 kernel: the DH-HMAC-CHAP suite (6.1 has no NVMe auth) and the kernel-6.12 project.
bash test/interop/auth-lab.sh
# A trixie userland (tlshd, nvme-cli 2.13, keyutils) on the same 6.12 kernel for the TLS suite (tls-kernel.test.ts).
bash test/interop/tls-lab.sh
# The newest Debian kernel (trixie-backports 7.x, bookworm userland): the kernel-7 project re-runs kernel-host and
# kernel-target on it (vitest.interop.config.ts), and kernel-resv.test.ts runs the nvmet reservations reference on it.
LAB_OUT=/var/tmp/nvme-lab-7 bash harness/lab/build-newest-kernel.sh >/dev/null
# The TLS lab's trixie userland on that 7.x kernel for secure channel concatenation (tls-concat-kernel.test.ts).
bash test/interop/tls7-lab.sh
echo "labs: $((SECONDS - t0)) s"
# The Linux host patch series (--host-patches, test/interop/host-patches.test.ts), built for the newest lab kernel and
# cached by their hash (build-host-patches.sh): a cold build ~1 min (trixie build root included), ~0 s when cached.
# Like SPDK, the series come from outside: $HOST_PATCHES_SRC (default ../shared/seed-patches).
HOST_PATCHES_SRC="${HOST_PATCHES_SRC:-$(cd .. && pwd)/shared/seed-patches}"
if [ -f "$HOST_PATCHES_SRC/queues-per-hctx/series" ]; then
  t0=$SECONDS
  for s in queues-per-hctx nic-aware-queues parallel-queue-setup; do bash harness/lab/build-host-patches.sh "$HOST_PATCHES_SRC/$s" >/dev/null; done
  echo "host patch series: $((SECONDS - t0)) s"
else
  echo "host patch series not provided: no $HOST_PATCHES_SRC/queues-per-hctx/series; set HOST_PATCHES_SRC to the directory holding queues-per-hctx, nic-aware-queues and parallel-queue-setup, else host-patches.test.ts skips"
fi
SPDK_SRC="${SPDK_SRC:-$(cd .. && pwd)/shared/spdk}"
if [ -f "$SPDK_SRC/build.sh" ]; then
  t0=$SECONDS
  bash "$SPDK_SRC/build.sh"
  # build.sh builds no test apps; nvme_fuzz (spdk-host-cmdsets.test.ts) links against that build, ~1 s when up to date.
  make -s -C "${SPDK_OUT:-/var/tmp/spdk-26.05}/spdk/test/app/fuzz/nvme_fuzz" all >/dev/null
  echo "spdk build: $((SECONDS - t0)) s"
else
  echo "SPDK not provided: no $SPDK_SRC/build.sh; set SPDK_SRC to a directory holding build.sh and the SPDK v26.05 source (or SPDK_DIR to a build), else the SPDK suites skip"
fi
