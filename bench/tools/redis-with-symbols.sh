#!/usr/bin/env bash
# Builds the machine's redis-server version from Debian's source with its symbols kept, for the
# callgrind benchmarks (message-instructions, store-instructions): Debian's binary is stripped, so
# a profile of it cannot tell the Lua interpreter's bytecode from its tables, strings or collector.
# Prints the binary's path; run the benchmark with BENCH_REDIS_SERVER set to it:
#   BENCH_REDIS_SERVER=$(bench/tools/redis-with-symbols.sh) npm run bench -- --quick --only message-instructions
# The build is upstream's own (`make`, its bundled Lua 5.1 and jemalloc), not Debian's packaging,
# so its counts differ from Debian's binary by about 1%: compare rows of one build.
# Needs root (a deb-src entry and apt-get update) once; the build is cached afterwards.
set -euo pipefail

cache="${REDPOINT_REDIS_SYMBOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/redpoint/redis-with-symbols}"
if [ -x "$cache/redis-server" ]; then
  echo "$cache/redis-server"
  exit 0
fi

work="$(mktemp -d)"
sources=/etc/apt/sources.list.d/redpoint-deb-src.sources
added=''
# The deb-src entry this adds is removed again on exit: the machine's package lists are left as
# they were found.
cleanup() {
  rm -rf "$work"
  if [ -n "$added" ]; then
    rm -f "$sources"
    apt-get update -qq >&2 || true
  fi
}
trap cleanup EXIT
if ! apt-get source --print-uris redis >/dev/null 2>&1; then
  # The machine's own deb entries, as deb-src: the source of the same version as the binary.
  sed -n '/^Types: deb$/,/^$/p' /etc/apt/sources.list.d/debian.sources | sed 's/^Types: deb$/Types: deb-src/' >"$sources"
  added=1
  apt-get update -qq >&2
fi
(cd "$work" && apt-get source --download-only -qq redis >&2)
tarball="$(ls "$work"/redis_*.orig.tar.* | head -n 1)"
tar -xf "$tarball" -C "$work"
src="$(find "$work" -maxdepth 1 -mindepth 1 -type d -name 'redis-*' | head -n 1)"
# -O2 with symbols (upstream's default OPTIMIZATION); no TLS, which needs OpenSSL's headers.
make -C "$src" -j"$(nproc)" BUILD_TLS=no >&2
mkdir -p "$cache"
cp "$src/src/redis-server" "$cache/redis-server"
echo "$cache/redis-server"
