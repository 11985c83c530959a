#!/usr/bin/env bash
# build.sh [--force] [--no-probe] — the qemu lab guest, from Debian packages, into LAB_OUT (default /var/tmp/nvme-lab).
# Idempotent: a stamp over this script, guest/init, the kernel .deb, LAB_EXTRA_MODULES and the userland's package
# versions skips the rebuild when nothing changed (about 1 s).
#
#   vmlinuz, vmlinux        the kernel of LAB_KERNEL_PKG (default: what linux-image-amd64 depends on); vmlinux is the
#                           same kernel uncompressed, booted through PVH when the kernel has CONFIG_PVH (faster under TCG)
#   initramfs.cpio[.gz]     busybox-static, kmod, nvme-cli, fio and their libraries, the NVMe/TCP modules, guest/init;
#                           the .gz is padded to 512 bytes so run.sh can append the run's own archive
#   lab.env                 KVER, KERNEL_PKG, KERNEL_DEB and the userland's versions
#   accel                   kvm or tcg, from run.sh --probe-accel (skipped with --no-probe)
#   debs/, kernel/KVER/, staging/   the downloaded .deb, its extracted tree, the initramfs tree (auth-lab.sh and
#                           tls-lab.sh read the last two)
#
# LAB_EXTRA_MODULES="a b": more modules (modprobe names) shipped in the initramfs but not loaded at boot.
# Needs root: apt-get for the host's packages, mknod and chroot for the tree. The kernel is downloaded, never installed.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LAB_OUT=${LAB_OUT:-/var/tmp/nvme-lab}
force=0 probe=1
for a in "$@"; do
  case "$a" in
    --force) force=1 ;;
    --no-probe) probe=0 ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument $a (build.sh --help)" >&2; exit 2 ;;
  esac
done
say() { printf '[lab %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
t_start=$SECONDS
[ "$(id -u)" = 0 ] || { echo "build.sh: run it as root (apt-get, mknod, chroot)" >&2; exit 1; }
mkdir -p "$LAB_OUT/debs"

# The host runs qemu and socat; the guest's userland is copied from the host's own nvme-cli, fio, busybox and kmod.
need=()
for p in qemu-system-x86 nvme-cli fio busybox-static kmod socat cpio xz-utils zstd gzip; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  say "apt-get install ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
version() { dpkg-query -W -f='${Version}' "$1"; }

kernel_of_meta() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}'; }
pkg=${LAB_KERNEL_PKG:-$(kernel_of_meta)}
if [ -z "$pkg" ]; then apt-get update -qq; pkg=$(kernel_of_meta); fi
[ -n "$pkg" ] || { echo "build.sh: apt knows no linux-image-amd64; set LAB_KERNEL_PKG to a linux-image-* package" >&2; exit 1; }
kver=${pkg#linux-image-}
find_deb() { compgen -G "$LAB_OUT/debs/${pkg}_*.deb" | head -n 1 || true; }
deb=$(find_deb)
if [ -z "$deb" ]; then
  say "apt-get download $pkg"
  # A stale package list names a version the mirror dropped: refresh once and retry.
  (cd "$LAB_OUT/debs" && apt-get download "$pkg" 2>/dev/null) >&2 || { apt-get update -qq; (cd "$LAB_OUT/debs" && apt-get download "$pkg") >&2; }
  deb=$(find_deb)
fi
[ -n "$deb" ] || { echo "build.sh: no .deb of $pkg in $LAB_OUT/debs" >&2; exit 1; }

kdir=$LAB_OUT/kernel/$kver
if [ "$force" = 1 ] || [ ! -f "$kdir/.extracted" ]; then
  say "unpacking $(basename "$deb")"
  rm -rf "$kdir"
  mkdir -p "$kdir"
  dpkg-deb -x "$deb" "$kdir"
  # The package's postinst would run depmod; modprobe --show-depends below needs its modules.dep.
  depmod -b "$kdir" "$kver"
  touch "$kdir/.extracted"
fi
kmods=$kdir/lib/modules/$kver
[ -d "$kmods" ] || { echo "build.sh: $deb has no lib/modules/$kver" >&2; exit 1; }

stamp=$( {
  cat "$HERE/build.sh" "$HERE/guest/init"
  echo "$deb ${LAB_EXTRA_MODULES:-}"
  for p in nvme-cli fio busybox-static kmod libc6; do echo "$p $(version "$p")"; done
} | sha256sum | cut -c1-16)
if [ "$force" = 0 ] && [ -f "$LAB_OUT/vmlinuz" ] && [ -f "$LAB_OUT/initramfs.cpio.gz" ] && [ "$(cat "$LAB_OUT/.stamp" 2>/dev/null)" = "$stamp" ]; then
  say "up to date ($kver, stamp $stamp)"
else
  old_kver=$(sed -n 's/^KVER=//p' "$LAB_OUT/lab.env" 2>/dev/null || true)
  r=$LAB_OUT/staging
  say "initramfs tree in $r"
  rm -rf "$r"
  mkdir -p "$r"/usr/{bin,sbin,lib/x86_64-linux-gnu,lib64} "$r"/{dev,proc,sys,tmp,run,root,etc/lab,etc/nvme,lab,mnt,var}
  # Merged /usr, as on the host, so the libraries ldd names land where the loader looks.
  for d in bin sbin lib lib64; do ln -s "usr/$d" "$r/$d"; done
  mknod -m 600 "$r/dev/console" c 5 1
  mknod -m 666 "$r/dev/null" c 1 3
  mknod -m 666 "$r/dev/ttyS0" c 4 64
  mknod -m 666 "$r/dev/ttyS1" c 4 65

  # FILE at its real path inside the tree (through the host's /usr merge), symlinks followed.
  copy_in() {
    local dir
    dir=$(realpath "$(dirname "$1")")
    mkdir -p "$r$dir"
    [ -e "$r$dir/$(basename "$1")" ] || cp -L "$1" "$r$dir/"
  }
  with_libs() {
    copy_in "$1"
    ldd "$1" 2>/dev/null | awk '/=> \//{print $3} /^[[:space:]]*\//{print $1}' | while read -r lib; do copy_in "$lib"; done
  }
  cp /bin/busybox "$r/usr/bin/busybox"
  # busybox's applets, but the module tools are kmod's (busybox's modprobe cannot read modules.dep.bin's features).
  for app in $(/bin/busybox --list); do
    case "$app" in busybox | modprobe | insmod | rmmod | lsmod | depmod | modinfo) ;; *) [ -e "$r/usr/bin/$app" ] || ln -s busybox "$r/usr/bin/$app" ;; esac
  done
  with_libs /usr/bin/kmod
  for t in modprobe insmod rmmod lsmod depmod modinfo; do ln -sf ../bin/kmod "$r/usr/sbin/$t"; done
  with_libs "$(command -v nvme)"
  with_libs "$(command -v fio)"
  # fio links librados, whose libraries sit in ceph/: a loader cache finds them whatever the RUNPATH says.
  printf '/usr/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu/ceph\n' >"$r/etc/ld.so.conf"
  ldconfig -r "$r" 2>/dev/null || say "ldconfig -r failed; the loader's default paths remain"
  # A library missing from the tree fails the build here, not a suite later.
  for cmd in "/usr/bin/busybox true" "/usr/sbin/nvme version" "/usr/bin/fio --version" "/usr/bin/kmod --version"; do
    # shellcheck disable=SC2086
    chroot "$r" $cmd >/dev/null 2>&1 || { echo "build.sh: '$cmd' does not run in the initramfs tree:" >&2; chroot "$r" $cmd >&2 || true; exit 1; }
  done

  echo 'root:x:0:0:root:/root:/bin/sh' >"$r/etc/passwd"
  echo 'root:x:0:' >"$r/etc/group"
  echo lab >"$r/etc/hostname"
  printf '127.0.0.1 localhost\n10.0.2.15 lab\n' >"$r/etc/hosts"
  # One fixed host identity for the guest's nvme-cli: the suites and the captures in test/fixtures/captures name it.
  echo 'nqn.2014-08.org.nvmexpress:uuid:6c61622d-6e76-6d65-7463-700000000001' >"$r/etc/nvme/hostnqn"
  echo '6c61622d-6e76-6d65-7463-700000000001' >"$r/etc/nvme/hostid"

  # Loaded by /init in this order; the second list ships without loading (scripts modprobe them with parameters).
  boot_modules="virtio_pci virtio_net configfs crc32c_intel crc32c_generic libcrc32c crct10dif_pclmul crc-t10dif
                nvme-core nvme-fabrics nvme-tcp nvmet nvmet-tcp loop"
  extra_modules="null_blk virtio_blk virtio_console virtio_rng 9p 9pnet_virtio qemu_fw_cfg tun veth ${LAB_EXTRA_MODULES:-}"
  gmods=$r/usr/lib/modules/$kver
  mkdir -p "$gmods"
  missing=""
  files=$(for m in $boot_modules $extra_modules; do
    modprobe -d "$kdir" -S "$kver" --show-depends "$m" 2>/dev/null | awk '$1 == "insmod" {print $2}' || echo "MISSING $m"
  done | sort -u)
  n=0
  while read -r f; do
    case "$f" in MISSING*) missing="$missing ${f#MISSING }"; continue ;; "") continue ;; esac
    rel=${f#"$kmods"/}
    mkdir -p "$gmods/$(dirname "$rel")"
    # kmod in the guest gets plain .ko files: no decompressor is needed at boot.
    case "$f" in
      *.ko.xz) xz -dc "$f" >"$gmods/${rel%.xz}" ;;
      *.ko.zst) zstd -qdc "$f" >"$gmods/${rel%.zst}" ;;
      *.ko.gz) gzip -dc "$f" >"$gmods/${rel%.gz}" ;;
      *) cp "$f" "$gmods/$rel" ;;
    esac
    n=$((n + 1))
  done <<<"$files"
  [ -z "$missing" ] || say "not in $kver (built in, or absent):$missing"
  cp "$kmods"/modules.{builtin,builtin.modinfo,order} "$gmods/" 2>/dev/null || true
  depmod -b "$r" "$kver"
  printf '%s\n' $boot_modules >"$r/etc/lab/modules.load"
  echo "$kver" >"$r/etc/lab/kver"
  install -m 0755 "$HERE/guest/init" "$r/init"
  say "$n module files; packing $(du -sh "$r" | cut -f1)"

  (cd "$r" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$LAB_OUT/initramfs.cpio.tmp"
  gzip -6 -c "$LAB_OUT/initramfs.cpio.tmp" >"$LAB_OUT/initramfs.cpio.gz.tmp"
  size=$(stat -c %s "$LAB_OUT/initramfs.cpio.gz.tmp")
  pad=$(((512 - size % 512) % 512))
  [ "$pad" = 0 ] || head -c "$pad" /dev/zero >>"$LAB_OUT/initramfs.cpio.gz.tmp"
  mv "$LAB_OUT/initramfs.cpio.tmp" "$LAB_OUT/initramfs.cpio"
  mv "$LAB_OUT/initramfs.cpio.gz.tmp" "$LAB_OUT/initramfs.cpio.gz"
  cp "$kdir/boot/vmlinuz-$kver" "$LAB_OUT/vmlinuz"

  # A bzImage decompresses itself for seconds under TCG; with CONFIG_PVH qemu boots the ELF inside it directly. Find
  # the compressed payload by its magic and keep the first candidate that unpacks to an ELF (as the kernel's
  # scripts/extract-vmlinux does).
  rm -f "$LAB_OUT/vmlinux" "$LAB_OUT/vmlinux.disabled"
  unpack_elf() {  # MAGIC DECOMPRESSOR...
    local magic=$1 off
    shift
    for off in $(LC_ALL=C grep -abo "$magic" "$LAB_OUT/vmlinuz" 2>/dev/null | cut -d: -f1 | head -n 4); do
      tail -c +$((off + 1)) "$LAB_OUT/vmlinuz" | "$@" >"$LAB_OUT/vmlinux.tmp" 2>/dev/null
      if [ "$(head -c 4 "$LAB_OUT/vmlinux.tmp" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; then
        mv "$LAB_OUT/vmlinux.tmp" "$LAB_OUT/vmlinux"
        return 0
      fi
    done
    return 1
  }
  if grep -q '^CONFIG_PVH=y' "$kdir/boot/config-$kver" 2>/dev/null; then
    if unpack_elf $'\xfd7zXZ' xz -dc --single-stream || unpack_elf $'\x28\xb5\x2f\xfd' zstd -dcq || unpack_elf $'\x1f\x8b\x08' gzip -dc; then
      say "vmlinux unpacked for PVH boot"
    else
      say "no vmlinux unpacked; run.sh boots vmlinuz"
    fi
    rm -f "$LAB_OUT/vmlinux.tmp"
  fi
  cat >"$LAB_OUT/lab.env" <<ENV
KVER=$kver
KERNEL_PKG=$pkg
KERNEL_DEB=$(basename "$deb")
NVME_CLI=$(version nvme-cli)
FIO=$(version fio)
BUSYBOX=$(version busybox-static)
QEMU=$(version qemu-system-x86)
BUILT=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ENV
  echo "$stamp" >"$LAB_OUT/.stamp"
  # Another kernel may boot differently under KVM: probe again.
  [ "$old_kver" = "$kver" ] || rm -f "$LAB_OUT/accel"
  say "built: $kver, initramfs $(du -h "$LAB_OUT/initramfs.cpio.gz" | cut -f1)"
fi

if [ "$probe" = 1 ] && [ ! -s "$LAB_OUT/accel" ]; then
  LAB_OUT=$LAB_OUT bash "$HERE/run.sh" --probe-accel >&2 || true
fi
say "done in $((SECONDS - t_start)) s; accel $(cat "$LAB_OUT/accel" 2>/dev/null || echo 'not probed')"
