#!/usr/bin/env bash
# auth-lab.sh — build a second qemu lab whose kernel has NVMe in-band authentication, for the DH-HMAC-CHAP interop
# suite (test/interop/auth-kernel.test.ts). The default lab (Debian bookworm 6.1, /var/tmp/nvme-lab) is built without
# CONFIG_NVME_AUTH / CONFIG_NVME_TARGET_AUTH; Debian's 6.12 kernel for bookworm (linux-image-6.12.*+deb12-amd64,
# bookworm-security, also bookworm-backports) has CONFIG_NVME_AUTH=m, CONFIG_NVME_HOST_AUTH=y,
# CONFIG_NVME_TARGET_AUTH=y, and the DH/HMAC/SHA crypto built in.
#
#   test/interop/auth-lab.sh [--print-out]     idempotent; ~40 s the first time (107 MB kernel .deb), ~1 s after
#
# Environment: LAB_AUTH_OUT (default /var/tmp/nvme-lab-bpo), LAB_AUTH_KERNEL_PKG (pin a package; default: what the
# linux-image-6.12-amd64 metapackage depends on). The guest is built by the repository's lab, harness/lab/build.sh.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
LAB=$ROOT/harness/lab
OUT=${LAB_AUTH_OUT:-/var/tmp/nvme-lab-bpo}
[ "${1:-}" = --print-out ] && { echo "$OUT"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "auth-lab.sh must run as root (apt-get, mknod in build.sh)" >&2; exit 1; }

say() { printf '[auth-lab %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

resolve() {
    apt-cache depends linux-image-6.12-amd64 2>/dev/null | awk '/Depends: linux-image-6\.12/{print $2; exit}'
}

PKG=${LAB_AUTH_KERNEL_PKG:-}
if [ -z "$PKG" ] && [ -f "$OUT/lab.env" ] && [ -f "$OUT/vmlinuz" ]; then
    # Already built: reuse that kernel without touching apt (CI reruns stay offline-fast).
    PKG=$(sed -n 's/^KERNEL_PKG=//p' "$OUT/lab.env")
fi
if [ -z "$PKG" ]; then
    PKG=$(resolve || true)
    if [ -z "$PKG" ]; then
        # Not in the configured suites: add Debian's bookworm-backports (a separate file, only if missing).
        SRC=/etc/apt/sources.list.d/bookworm-backports.sources
        if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
            say "adding $SRC"
            cat > "$SRC" <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
        fi
        say "apt-get update"
        apt-get update -qq
        PKG=$(resolve || true)
    fi
fi
[ -n "$PKG" ] || { echo "auth-lab.sh: no linux-image-6.12 package found in the apt sources" >&2; exit 1; }
say "kernel package $PKG -> $OUT"
LAB_OUT=$OUT LAB_KERNEL_PKG=$PKG bash "$LAB/build.sh"

KVER=${PKG#linux-image-}
CFG=$OUT/kernel/$KVER/boot/config-$KVER
for opt in CONFIG_NVME_AUTH CONFIG_NVME_HOST_AUTH CONFIG_NVME_TARGET_AUTH; do
    grep -Eq "^$opt=(y|m)" "$CFG" || { echo "auth-lab.sh: $KVER lacks $opt" >&2; exit 1; }
done
find "$OUT/staging/usr/lib/modules/$KVER" -name 'nvme-auth.ko' | grep -q . || { echo "auth-lab.sh: nvme-auth.ko missing from the initramfs" >&2; exit 1; }
say "ready: $KVER with NVMe in-band authentication (LAB_OUT=$OUT)"
