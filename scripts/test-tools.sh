#!/usr/bin/env bash
# `npm test`'s first step (package.json "pretest"): the programs the test suites start or drive,
# which npm cannot install. The suites fail (never skip) without them, so this says what is
# missing before minutes of tests do. It installs them with apt only with consent:
# REDPOINT_INSTALL_TEST_TOOLS=1 (the README's test command) or CI=true (.ci/run); otherwise it
# names them, prints the command, and stops. Debian packages are installed without starting
# their services (a policy-rc.d that denies starts): the tests start private servers on free
# ports, and a system Redis on 6379 or a running Prometheus would only be in the way.
set -euo pipefail

# One line per tool: name % how to find it (a shell test, run by this bash) % Debian package % apt options.
# The places are those the suites look in (test/helpers/*.ts).
TOOLS=(
  "redis-server%command -v redis-server%redis-server%"
  "redis-cli%command -v redis-cli%redis-tools%"
  "chromium%test -x /usr/bin/chromium%chromium%"
  "promtool%command -v promtool%prometheus%--no-install-recommends"
  "postgresql (initdb)%compgen -G '/usr/lib/postgresql/*/bin/initdb'%postgresql%"
  "nats-server%command -v nats-server || test -x /usr/sbin/nats-server || test -x /usr/bin/nats-server%nats-server%"
  "openssl (the Redis TLS tests make their certificates)%command -v openssl%openssl%"
)

# `--packages`: the Debian packages of every tool, on one line, and nothing else (the Node 24 run's
# root, scripts/trixie-check.sh, installs exactly these).
if [ "${1:-}" = "--packages" ]; then
  packages=()
  for line in "${TOOLS[@]}"; do
    IFS='%' read -r _ _ package _ <<<"$line"
    packages+=("$package")
  done
  echo "${packages[*]}"
  exit 0
fi

found() {
  "$BASH" -c "$1" >/dev/null 2>&1
}

missing_names=()
missing_lines=()
for line in "${TOOLS[@]}"; do
  IFS='%' read -r name check package options <<<"$line"
  if ! found "$check"; then
    missing_names+=("$name")
    missing_lines+=("$package%$options")
  fi
done

if [ "${#missing_names[@]}" -eq 0 ]; then
  exit 0
fi

consent=""
if [ "${REDPOINT_INSTALL_TEST_TOOLS:-}" = "1" ] || [ "${CI:-}" = "true" ]; then consent=1; fi

if [ -z "$consent" ]; then
  {
    echo "npm test: the test suites need programs that are not installed: ${missing_names[*]}"
    echo "  Install them (Debian/Ubuntu, as root or with sudo), then run npm test again:"
    plain=() quiet=()
    for entry in "${missing_lines[@]}"; do
      IFS='%' read -r package options <<<"$entry"
      if [ -n "$options" ]; then quiet+=("$package"); else plain+=("$package"); fi
    done
    [ "${#plain[@]}" -gt 0 ] && echo "    apt-get install -y ${plain[*]}"
    [ "${#quiet[@]}" -gt 0 ] && echo "    apt-get install -y --no-install-recommends ${quiet[*]}"
    echo "  or let npm test do it: REDPOINT_INSTALL_TEST_TOOLS=1 npm test"
  } >&2
  exit 1
fi

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}
if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
  echo "npm test: installing ${missing_names[*]} needs root or sudo" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "npm test: installing ${missing_names[*]} needs apt-get (Debian/Ubuntu); install them by hand" >&2
  exit 1
fi

echo "npm test: installing what the test suites need: ${missing_names[*]}"
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  as_root sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy"
  trap 'as_root rm -f /usr/sbin/policy-rc.d' EXIT
fi
# A fresh machine's unattended upgrades, or a second test run installing at the same moment, may
# hold apt's locks: wait for them (DPkg::Lock::Timeout covers the dpkg lock; `apt-get update`'s
# lists lock is waited for by retrying) rather than fail the run.
apt_waiting() {
  local tries=0 out
  while true; do
    if out=$(as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@" 2>&1); then
      printf '%s\n' "$out"
      return 0
    fi
    printf '%s\n' "$out" >&2
    tries=$((tries + 1))
    if ! grep -q 'Could not get lock' <<<"$out" || [ "$tries" -ge 60 ]; then return 1; fi
    echo "npm test: apt is busy (another apt holds its lock); trying again in 10 s" >&2
    sleep 10
  done
}
apt_waiting update
for entry in "${missing_lines[@]}"; do
  IFS='%' read -r package options <<<"$entry"
  # shellcheck disable=SC2086 # options is empty or one flag
  apt_waiting install -y $options "$package"
done

still=()
for line in "${TOOLS[@]}"; do
  IFS='%' read -r name check _ _ <<<"$line"
  found "$check" || still+=("$name")
done
if [ "${#still[@]}" -gt 0 ]; then
  echo "npm test: still missing after the install: ${still[*]}" >&2
  exit 1
fi
