#!/usr/bin/env bash
# build-host-patches.sh DIR — a Linux nvme-tcp host patch series (DIR: one file per patch and a `series` file naming
# them in order) applied to Debian's kernel source of the lab's newest kernel, and nvme-core, nvme-fabrics and
# nvme-tcp built as modules against that kernel's headers in a trixie build root. Prints HOST_MODULES=CACHEDIR on
# stdout; the lab guest loads CACHEDIR/*.ko instead of its stock modules (harness/kernel-host/host-patches.ts).
#
# The base is pinned below (KVER, DEB_VERSION): a newer backports kernel does not silently change what the series are
# built for; bumping the pin and running this again names the patch that needs a rebase.
# Cache: HOST_PATCHES_WORK (default /var/tmp/nvme-tcp-kbuild)/modules/HASH, HASH = sha256 of the pin, this script,
# the series file and every patch it names. An entry is built in a temporary directory and renamed into place only
# once complete, so a failed or interrupted build never leaves an entry that a later run reuses.
#   root-KVER/      the trixie build root (mmdebstrap: gcc-14, make, libelf1t64, pahole, the kernel's headers and
#                   its source tarball), built once
#   src-KVER/       drivers/nvme/host of the pristine source, extracted once
# Exit 2 with one line "host-patches: ..." naming the patch and the step (apply, build) when the series does not apply
# or does not build; exit 1 when the build root cannot be made (no root, no mirror).
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH

# The one pin: the kernel the series are built for (the lab's newest kernel, build-newest-kernel.sh).
KVER=7.3.4+deb13-amd64
DEB_VERSION=7.3.4-1~bpo13+1
SRC_PKG=linux-source-7.3
BASE="linux-source-${DEB_VERSION%%-*}"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=${HOST_PATCHES_WORK:-/var/tmp/nvme-tcp-kbuild}
case "${1:-}" in
  --kver) echo "$KVER"; exit 0 ;;
  -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
  "") echo "host-patches: give a directory of patches with a series file (build-host-patches.sh --help)" >&2; exit 2 ;;
esac
dir=$(cd "$1" 2>/dev/null && pwd) || { echo "host-patches: $1 is not a directory (give a directory of patches with a series file)" >&2; exit 2; }
name=$(basename "$dir")
die2() { echo "host-patches: $*" >&2; exit 2; }
say() { printf '[host-patches %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
[ -f "$dir/series" ] || die2 "$dir has no series file (one patch file name per line, in order)"
mapfile -t patches < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' "$dir/series" | grep -v '^$' || true)
[ ${#patches[@]} -gt 0 ] || die2 "$dir/series names no patch"
for p in "${patches[@]}"; do [ -f "$dir/$p" ] || die2 "$p is named in $dir/series but missing (step: apply)"; done

hash=$( {
  echo "$KVER $DEB_VERSION"
  cat "$0" "$dir/series"
  for p in "${patches[@]}"; do echo "== $p"; cat "$dir/$p"; done
} | sha256sum | cut -c1-16)
cache=$work/modules/$hash
if [ -f "$cache/.complete" ]; then
  say "$name: cached ($cache)"
  echo "HOST_MODULES=$cache"
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "host-patches: building the modules needs root (mmdebstrap, chroot): run it with sudo" >&2; exit 1; }
mkdir -p "$work/modules"
t0=$SECONDS

# The build root, once per pin: trixie's gcc-14 (what the headers were built with), the headers and the source.
root=$work/root-$KVER
if [ ! -f "$root/.complete" ]; then
  say "trixie build root in $root (mmdebstrap)"
  command -v mmdebstrap >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null; }
  mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $1; exit}')
  [ -n "$mirror" ] || mirror=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  mirror=${mirror:-http://deb.debian.org/debian}
  rm -rf "$root" "$root.tmp"
  if ! mmdebstrap --variant=apt --mode=root --quiet \
    --include="gcc-14,make,libelf1t64,pahole,libc6-dev,patch,xz-utils,bc,linux-headers-$KVER=$DEB_VERSION,$SRC_PKG=$DEB_VERSION" \
    trixie "$root.tmp" "deb $mirror trixie main" "deb $mirror trixie-backports main" >"$work/mmdebstrap.log" 2>&1; then
    tail -n 5 "$work/mmdebstrap.log" >&2
    echo "host-patches: the trixie build root with linux-headers-$KVER=$DEB_VERSION could not be made (see $work/mmdebstrap.log; has the mirror dropped $DEB_VERSION? then bump the pin in $0)" >&2
    exit 1
  fi
  touch "$root.tmp/.complete"
  mv -T "$root.tmp" "$root"
fi

# drivers/nvme/host of the pristine source (every file the series touch lives there).
src=$work/src-$KVER
if [ ! -f "$src/.complete" ]; then
  say "extracting drivers/nvme/host from $SRC_PKG $DEB_VERSION"
  rm -rf "$src" "$src.tmp"
  mkdir -p "$src.tmp"
  tar -xJf "$root/usr/src/$SRC_PKG.tar.xz" -C "$src.tmp" --strip-components=1 "$SRC_PKG/drivers/nvme/host"
  touch "$src.tmp/.complete"
  mv -T "$src.tmp" "$src"
fi

# Everything below happens in a temporary entry: only a complete build is renamed to $cache.
tmp=$(mktemp -d "$work/modules/.tmp-$hash-XXXXXX")
build=$root/build/$(basename "$tmp")
cleanup() { rm -rf "$tmp" "$build"; }
trap cleanup EXIT
mkdir -p "$build"
cp -a "$src/drivers" "$build/"
: >"$tmp/apply.log"
for p in "${patches[@]}"; do
  if ! out=$(cd "$build" && patch -p1 --forward --batch --no-backup-if-mismatch <"$dir/$p" 2>&1); then
    echo "$out" >>"$tmp/apply.log"
    why=$(grep -m1 -E 'FAILED|malformed|Only garbage|previously applied|can.t find file' <<<"$out" || echo "$out" | tail -n 1)
    die2 "$p does not apply to $BASE (step: apply): $why"
  fi
  echo "$out" >>"$tmp/apply.log"
done
say "$name: ${#patches[@]} patch(es) applied; building nvme-core, nvme-fabrics, nvme-tcp against linux-headers-$KVER"

# The kernel's own config decides the module contents (multipath, auth, hwmon...); the other NVMe transports are off.
mk=(make -C "/usr/src/linux-headers-$KVER" M="/build/$(basename "$tmp")/drivers/nvme/host" -j"$(nproc)"
  CONFIG_NVME_CORE=m CONFIG_NVME_FABRICS=m CONFIG_NVME_TCP=m
  CONFIG_BLK_DEV_NVME=n CONFIG_NVME_RDMA=n CONFIG_NVME_FC=n CONFIG_NVME_APPLE=n modules)
# objtool reads /proc: a private mount namespace keeps that mount from outliving the build.
if ! unshare --mount --fork sh -c 'mount -t proc proc "$1/proc" && shift && exec chroot "$@"' sh "$root" "$root" "${mk[@]}" >"$tmp/build.log" 2>&1; then
  err=$(grep -m1 -E '(error|Error)[: ]' "$tmp/build.log" || tail -n 1 "$tmp/build.log")
  # The patch to blame: the last one in the series that touches the file the first error names.
  file=$(sed -n 's#^\([^: ]*\.[ch]\):[0-9].*#\1#p' <<<"$err" | head -n 1)
  culprit=${patches[-1]}
  if [ -n "$file" ]; then
    for p in "${patches[@]}"; do grep -q "^+++ b/.*$(basename "$file")\$" "$dir/$p" && culprit=$p; done
  fi
  cp "$tmp/build.log" "$work/modules/last-failed-build.log"
  die2 "$culprit does not build against linux-headers-$KVER (step: build): $(basename "${file:-?}"): ${err#*: }"
fi
for m in nvme-core nvme-fabrics nvme-tcp; do
  f=$build/drivers/nvme/host/$m.ko
  [ -f "$f" ] || die2 "$name built no $m.ko (step: build; see $work/modules/last-failed-build.log)"
  vm=$(modinfo -F vermagic "$f" | awk '{print $1}')
  [ "$vm" = "$KVER" ] || die2 "$m.ko has vermagic $vm, not $KVER (step: build)"
  cp "$f" "$tmp/"
done
printf 'series=%s\nkver=%s\nbase=%s %s\npatches=%s\nbuilt=%s\nbuild_s=%s\n' "$name" "$KVER" "$SRC_PKG" "$DEB_VERSION" "${patches[*]}" \
  "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$((SECONDS - t0))" >"$tmp/build.env"
touch "$tmp/.complete"
rm -rf "$build"
chmod 755 "$tmp"
mv -T "$tmp" "$cache" 2>/dev/null || { [ -f "$cache/.complete" ] || die2 "cannot move the build into $cache (step: cache)"; }
trap - EXIT
rm -rf "$tmp"
say "$name: built in $((SECONDS - t0)) s -> $cache"
echo "HOST_MODULES=$cache"
