#!/usr/bin/env bash
# Everything the container suite needs before it starts: Debian packages, the node:24-slim stand-in, the project
# image from docker/Dockerfile (tagged nvme-tcp-ts:latest, as compose.yaml names it), and the gateway lab's etcd from
# docker/etcd.Dockerfile (nvme-tcp-ts-etcd:latest: Debian's etcd-server on the same base). The project image
# carries a label with a hash of its build inputs (the Dockerfile, the lockfile, every source file it copies, the
# base image's id); when the label matches, the build is skipped, so a rerun with nothing changed takes ~1 s.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$here/containers.conf}"
bash "$here/install.sh"
bash "$here/base-image.sh"
TAG=localhost/nvme-tcp-ts:latest
cd "$root"
base_id="$(podman image inspect --format '{{.Id}}' docker.io/library/node:24-slim)"

# etcd: rebuilt when its Dockerfile or the base image changes (~10 s: apt-get install etcd-server).
ETCD_TAG=localhost/nvme-tcp-ts-etcd:latest
etcd_hash="$( { echo "$base_id"; sha256sum docker/etcd.Dockerfile; } | sha256sum | cut -c1-16)"
if [ "$(podman image inspect --format '{{index .Labels "nvme-tcp-ts.src-hash"}}' "$ETCD_TAG" 2>/dev/null || true)" != "$etcd_hash" ]; then
  old="$(podman image inspect --format '{{.Id}}' "$ETCD_TAG" 2>/dev/null || true)"
  podman build --quiet --format docker --pull=never --network host --label "nvme-tcp-ts.src-hash=$etcd_hash" \
    -f docker/etcd.Dockerfile -t "$ETCD_TAG" docker >/dev/null
  new="$(podman image inspect --format '{{.Id}}' "$ETCD_TAG")"
  [ -z "$old" ] || [ "$old" = "$new" ] || podman rmi "$old" >/dev/null 2>&1 || true
fi

hash="$( {
  echo "$base_id"
  git ls-files -co --exclude-standard -z -- docker/Dockerfile docker/Dockerfile.dockerignore docker/target.json docker/lab.fio \
    package.json package-lock.json tsconfig.json tsconfig.build.json protocol connection target initiator harness cli bin test/fixtures | LC_ALL=C sort -z |
    xargs -0 sha256sum
} | sha256sum | cut -c1-16)"
have="$(podman image inspect --format '{{index .Labels "nvme-tcp-ts.src-hash"}}' "$TAG" 2>/dev/null || true)"
[ "$have" = "$hash" ] && exit 0
old="$(podman image inspect --format '{{.Id}}' "$TAG" 2>/dev/null || true)"
# The machine's CA bundle goes in as a build secret (a TLS-intercepting proxy's CA; never part of a layer).
# --network host: the RUN steps reach the npm registry through the host's own resolver and routes.
ca="${NVME_LAB_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
secret=()
[ -s "$ca" ] && secret=(--secret "id=ca,src=$ca")
podman build --quiet --format docker --pull=never --network host "${secret[@]}" \
  --label "nvme-tcp-ts.src-hash=$hash" -f docker/Dockerfile -t "$TAG" . >/dev/null
new="$(podman image inspect --format '{{.Id}}' "$TAG")"
[ -z "$old" ] || [ "$old" = "$new" ] || podman rmi "$old" >/dev/null 2>&1 || true
