#!/usr/bin/env bash
# build-newest-kernel.sh — the lab (build.sh) on the newest Debian kernel, trixie-backports' linux-image-amd64, in
# LAB_OUT (default /var/tmp/nvme-lab-7); the userland stays the host's. Debian ships 7.x kernels as linux-binary-K
# plus linux-modules-K; they are repacked here into one linux-image-K .deb in LAB_OUT/debs, which build.sh takes as
# it takes any kernel package. Idempotent: the repacked .deb is kept. Prints LAB_OUT=DIR on stdout when done.
# LAB_KWORK (default /var/tmp/k7): apt's lists for trixie, kept apart from the host's, and the repack's work files.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${LAB_OUT:-/var/tmp/nvme-lab-7}
work=${LAB_KWORK:-/var/tmp/k7}
mkdir -p "$out/debs" "$work/lists/partial"

# The mirror the host's apt already uses, with trixie and trixie-backports, in a sources file of its own.
mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $1; exit}')
[ -n "$mirror" ] || mirror=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null)
[ -n "$mirror" ] || { echo "build-newest-kernel.sh: no Debian mirror in the apt sources" >&2; exit 1; }
printf 'Types: deb\nURIs: %s\nSuites: trixie-backports trixie\nComponents: main\n' "$mirror" >"$work/trixie.sources"
apt_opts=(-o Dir::Etc::SourceList="$work/trixie.sources" -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$work/lists")

kver=$(find "$out/debs" -maxdepth 1 -name 'linux-image-*_amd64.deb' -printf '%f\n' | sed -n 's/^linux-image-\(.*\)_[^_]*_amd64\.deb$/\1/p' | head -n 1)
if [ -z "$kver" ]; then
  apt-get "${apt_opts[@]}" update -qq >/dev/null 2>&1
  meta=$(apt-cache "${apt_opts[@]}" madison linux-image-amd64 | awk -F'|' '/backports/{gsub(/ /, "", $2); print $2; exit}')
  [ -n "$meta" ] || { echo "build-newest-kernel.sh: trixie-backports has no linux-image-amd64 at $mirror" >&2; exit 1; }
  kver=$(apt-cache "${apt_opts[@]}" depends "linux-image-amd64=$meta" | awk '/Depends: linux-image-[0-9]/{sub("linux-image-", "", $2); print $2; exit}')
  echo "build-newest-kernel.sh: $kver (linux-image-amd64 $meta)" >&2
  rm -rf "$work/dl" "$work/tree" "$work/pkg"
  mkdir -p "$work/dl" "$work/tree" "$work/pkg/DEBIAN" "$work/pkg/boot" "$work/pkg/lib/modules"
  (cd "$work/dl" && apt-get "${apt_opts[@]}" download "linux-binary-$kver" "linux-modules-$kver" 2>/dev/null) >&2
  for d in "$work"/dl/*.deb; do dpkg-deb -x "$d" "$work/tree"; done
  # The split packages put everything under /usr/lib/modules/K, vmlinuz included; build.sh reads the classic layout.
  cp -a "$work/tree/usr/lib/modules/$kver" "$work/pkg/lib/modules/"
  mv "$work/pkg/lib/modules/$kver/vmlinuz" "$work/pkg/boot/vmlinuz-$kver"
  printf 'Package: linux-image-%s\nVersion: 1\nArchitecture: amd64\nMaintainer: nvme-tcp-ts lab\nDescription: %s repacked for the qemu lab\n' \
    "$kver" "linux-binary-$kver + linux-modules-$kver" >"$work/pkg/DEBIAN/control"
  dpkg-deb -Zgzip -b "$work/pkg" "$out/debs/linux-image-${kver}_1_amd64.deb" >/dev/null
  rm -rf "$work/dl" "$work/tree" "$work/pkg"
fi
LAB_OUT=$out LAB_KERNEL_PKG=linux-image-$kver bash "$HERE/build.sh" >&2
echo "LAB_OUT=$out"
