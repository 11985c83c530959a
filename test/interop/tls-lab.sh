#!/usr/bin/env bash
# tls-lab.sh — a qemu lab with a Debian trixie userland for the NVMe/TCP TLS interop suite
# (test/interop/tls-kernel.test.ts): tlshd (ktls-utils 1.0), keyutils, nvme-cli 2.13, fio, on Debian's 6.12 kernel
# (CONFIG_NVME_TCP_TLS=y, CONFIG_NVME_TARGET_TCP_TLS=y, CONFIG_TLS=m; the kernel of the auth lab, auth-lab.sh). The
# default labs have a bookworm busybox userland, whose nvme-cli 2.3 has no --tls and which has no tlshd.
#
#   test/interop/tls-lab.sh [--print-out]     idempotent; a few minutes the first time (mmdebstrap), ~1 s after
#
# Produces in $LAB_TLS_OUT (default /var/tmp/nvme-lab-tls) what harness/lab/run.sh boots (LAB_OUT=...):
# vmlinux/vmlinuz (copied from the auth lab), initramfs.cpio (the trixie tree + modules + the lab's /init and guest
# helpers), accel, lab.env. Environment: LAB_TLS_OUT, LAB_TLS_MIRROR (default deb.debian.org).
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
LAB=$ROOT/harness/lab
OUT=${LAB_TLS_OUT:-/var/tmp/nvme-lab-tls}
MIRROR=${LAB_TLS_MIRROR:-http://deb.debian.org/debian}
[ "${1:-}" = --print-out ] && { echo "$OUT"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "tls-lab.sh must run as root (mmdebstrap, apt-get)" >&2; exit 1; }
say() { printf '[tls-lab %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

PKGS="nvme-cli,ktls-utils,keyutils,fio,kmod,iproute2,busybox,procps"
# LAB_TLS_KERNEL_LAB: a lab directory whose kernel/ and vmlinuz the guest boots (default: the auth lab's 6.12);
# tls7-lab.sh points it at the newest-kernel lab.
KLAB=${LAB_TLS_KERNEL_LAB:-}
STAMP_IN="$( (cat "$0" "$LAB/guest/init"; echo "$KLAB"; [ -z "$KLAB" ] || cat "$KLAB/lab.env") | sha256sum | cut -c1-16)"
if [ -f "$OUT/stamp" ] && [ "$(cat "$OUT/stamp")" = "$STAMP_IN" ] && [ -f "$OUT/initramfs.cpio" ]; then
    say "up to date ($OUT)"
    exit 0
fi

# The 6.12 kernel and its extracted module tree come from the auth lab (or LAB_TLS_KERNEL_LAB).
if [ -n "$KLAB" ]; then
    BPO=$KLAB
    [ -f "$BPO/lab.env" ] || { echo "tls-lab.sh: LAB_TLS_KERNEL_LAB=$BPO has no lab.env (build that lab first)" >&2; exit 1; }
else
    bash "$HERE/auth-lab.sh" >&2
    BPO=$(bash "$HERE/auth-lab.sh" --print-out)
fi
KVER=$(sed -n 's/^KVER=//p' "$BPO/lab.env")
KDIR=$BPO/kernel/$KVER
KMODDIR=$KDIR/lib/modules/$KVER
[ -d "$KMODDIR" ] || KMODDIR=$KDIR/usr/lib/modules/$KVER
# The 7.x repack ships no boot/config: then the module's TLS code is the evidence (nvme_tcp_start_tls; 7.3 no longer
# names tls_client_hello_psk in the module, older ones have both). grep -c reads to the end: with -q it stops at the
# first match, the decompressor dies of SIGPIPE and pipefail fails the check.
if [ -f "$KDIR/boot/config-$KVER" ]; then
    grep -q '^CONFIG_NVME_TCP_TLS=y' "$KDIR/boot/config-$KVER" || { echo "tls-lab.sh: $KVER lacks CONFIG_NVME_TCP_TLS" >&2; exit 1; }
else
    f=$(find "$KMODDIR" -name 'nvme-tcp.ko*' | head -1)
    case "$f" in *.xz) c="xz -dc" ;; *.zst) c="zstd -qdc" ;; *) c=cat ;; esac
    $c "$f" | grep -acE 'nvme_tcp_start_tls|tls_client_hello_psk' >/dev/null || { echo "tls-lab.sh: $KVER nvme-tcp has no TLS (CONFIG_NVME_TCP_TLS)" >&2; exit 1; }
fi

command -v mmdebstrap >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null; }

mkdir -p "$OUT"
R=$OUT/rootfs
rm -rf "$R"
# The mmdebstrap tarball is kept per package list: changing modules or files below repacks without a new download.
ROOT_TAR=$OUT/trixie-$(echo "$PKGS" | sha256sum | cut -c1-12).tar
# Reuse the default TLS lab's download when this is another output directory.
DEF_TAR=/var/tmp/nvme-lab-tls/$(basename "$ROOT_TAR")
[ -f "$ROOT_TAR" ] || [ ! -f "$DEF_TAR" ] || cp "$DEF_TAR" "$ROOT_TAR"
if [ ! -f "$ROOT_TAR" ]; then
    say "mmdebstrap trixie ($PKGS)"
    mmdebstrap --quiet --variant=minbase --include="$PKGS" --aptopt='APT::Install-Recommends "false"' \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' trixie "$ROOT_TAR.tmp.tar" "$MIRROR" >&2
    mv "$ROOT_TAR.tmp.tar" "$ROOT_TAR"
fi
mkdir -p "$R"
tar -C "$R" -xf "$ROOT_TAR"
# The lab's /init and helpers use busybox applets (poweroff -f, ...): link those the tree lacks.
chroot "$R" /bin/sh -c 'for a in $(busybox --list); do command -v "$a" >/dev/null 2>&1 || ln -s /usr/bin/busybox "/usr/local/bin/$a"; done'

# Modules: the lab's set (harness/lab/build.sh) plus tls (kTLS, which tlshd hands the session to).
BOOT_MODULES="virtio_pci virtio_net configfs crc32c_generic libcrc32c tls gcm ghash_generic nvme-core nvme-fabrics nvme-tcp nvmet nvmet-tcp loop"
# kTLS asks the crypto API for gcm(aes) (and ccm/chacha20poly1305 for other suites) through request_module.
EXTRA_MODULES="null_blk aesni_intel ghash_clmulni_intel ccm chacha20poly1305"
RM=$R/usr/lib/modules/$KVER
rm -rf "$R/usr/lib/modules"
mkdir -p "$RM"
for f in $(for m in $BOOT_MODULES $EXTRA_MODULES; do modprobe -d "$KDIR" -S "$KVER" --show-depends "$m" 2>/dev/null | awk '$1=="insmod"{print $2}'; done | sort -u); do
    rel=${f#"$KMODDIR"/}
    mkdir -p "$RM/$(dirname "$rel")"
    case "$f" in
        *.ko.xz) xz -dc "$f" > "$RM/${rel%.xz}" ;;
        *.ko.zst) zstd -qdc "$f" > "$RM/${rel%.zst}" ;;
        *) cp "$f" "$RM/$rel" ;;
    esac
done
cp "$KMODDIR"/modules.builtin "$KMODDIR"/modules.builtin.modinfo "$KMODDIR"/modules.order "$RM/" 2>/dev/null || true
depmod -b "$R" "$KVER"
mkdir -p "$R/etc/lab" "$R/etc/nvme"
for m in $BOOT_MODULES; do echo "$m"; done > "$R/etc/lab/modules.load"
echo "$KVER" > "$R/etc/lab/kver"
echo 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000001' > "$R/etc/nvme/hostnqn"
echo '6c61622d-6e76-6d65-7463-700000000001' > "$R/etc/nvme/hostid"
# tlshd looks for PSKs in the kernel's .nvme keyring (ktls-utils' nvme example).
cat > "$R/etc/tlshd.conf" <<'CONF'
[debug]
loglevel=1
tls=0
nl=0
[authenticate]
keyrings=.nvme
CONF
install -m 0755 "$LAB/guest/init" "$R/init"
for b in "$LAB"/guest/bin/*; do install -m 0755 "$b" "$R/usr/local/bin/"; done
# Every tool the suite needs runs in the tree (a missing library fails the build, not the test).
for t in "nvme version" "tlshd --help" "keyctl --version" "fio --version" "busybox true"; do
    chroot "$R" sh -c "$t" >/dev/null 2>&1 || [ "$t" = "tlshd --help" ] || { echo "tls-lab.sh: '$t' fails in the trixie tree" >&2; exit 1; }
done
help=$(chroot "$R" nvme gen-tls-key --help 2>&1 || true)
case "$help" in *--identity*) ;; *) echo "tls-lab.sh: nvme-cli has no gen-tls-key --identity" >&2; exit 1 ;; esac

say "packing initramfs ($(du -sh "$R" | cut -f1))"
(cd "$R" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) > "$OUT/initramfs.cpio.tmp"
sz=$(stat -c %s "$OUT/initramfs.cpio.tmp"); pad=$(( (512 - sz % 512) % 512 ))
[ "$pad" -gt 0 ] && head -c "$pad" /dev/zero >> "$OUT/initramfs.cpio.tmp"
mv "$OUT/initramfs.cpio.tmp" "$OUT/initramfs.cpio"
gzip -1 -c "$OUT/initramfs.cpio" > "$OUT/initramfs.cpio.gz"
cp "$BPO/vmlinuz" "$OUT/vmlinuz"
[ -f "$BPO/vmlinux" ] && cp "$BPO/vmlinux" "$OUT/vmlinux"
cp "$BPO/accel" "$OUT/accel" 2>/dev/null || true
cat > "$OUT/lab.env" <<ENV
KVER=$KVER
USERLAND=trixie
NVME_CLI=$(chroot "$R" dpkg-query -W -f='${Version}' nvme-cli)
LIBNVME=$(chroot "$R" dpkg-query -W -f='${Version}' 'libnvme1*' | head -1)
KTLS_UTILS=$(chroot "$R" dpkg-query -W -f='${Version}' ktls-utils)
BUILT=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ENV
rm -rf "$R"
echo "$STAMP_IN" > "$OUT/stamp"
say "ready: $(tr '\n' ' ' < "$OUT/lab.env")"
