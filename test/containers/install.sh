#!/usr/bin/env bash
# Installs what the container suite needs from Debian: podman (engine), runc (crun refuses this machine's hybrid
# cgroup v1 layout), podman-compose (runs docker/compose*.yaml), mmdebstrap (builds the node:20-slim stand-in),
# netavark/aardvark-dns (container networks; aardvark-dns resolves compose service names), uidmap, slirp4netns.
# Idempotent: ~0.1 s when all are present.
set -euo pipefail
pkgs=(podman runc podman-compose mmdebstrap uidmap slirp4netns netavark aardvark-dns fuse-overlayfs iptables)
missing=()
installed="$(dpkg-query -W -f='${Package} ${Status}\n' "${pkgs[@]}" 2>/dev/null || true)"
for p in "${pkgs[@]}"; do
  grep -qx "$p install ok installed" <<<"$installed" || missing+=("$p")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
