#!/usr/bin/env bash
# Install what the nearsim extension needs on Debian 12, then build and
# install the extension (C helpers, SQL script and its Python code).
# Safe to run again: packages already present are not reinstalled.
# Used by `make setup`, CI and docker/.
#
#   PG_MAJOR=15                  the PostgreSQL major version to build for
#   NEARSIM_PACKAGES=all         everything, for the tests (the default), with the
#                                Java runtime of the Spark back end
#   NEARSIM_PACKAGES=demo        the server's, the client's virtual environment and
#                                the demo corpus: what `make demo` uses
#   NEARSIM_PACKAGES=server      only what the database server needs (no client
#                                virtual environment, demo corpus, browser or
#                                manual pages): for server images
#   NEARSIM_LIST_PACKAGES=1      print the package set, one a line, and stop
#   NEARSIM_REMOVE_BUILD_DEPS=1  purge the compiler and server headers after
#                                installing, keeping what the extension runs on
set -euo pipefail

PG_MAJOR=${PG_MAJOR:-15}
NEARSIM_PACKAGES=${NEARSIM_PACKAGES:-all}
NEARSIM_REMOVE_BUILD_DEPS=${NEARSIM_REMOVE_BUILD_DEPS:-0}
case $NEARSIM_PACKAGES in
  all|demo|server) ;;
  *) echo "install.sh: NEARSIM_PACKAGES must be all, demo or server, not $NEARSIM_PACKAGES" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."

if [ "$(id -u)" = 0 ]; then SUDO=(); else SUDO=(sudo); fi

build_packages=(
  "postgresql-server-dev-$PG_MAJOR"   # PGXS and server headers
  make gcc libxxhash-dev               # the C fingerprint hashes with xxHash
)
packages=(
  "postgresql-$PG_MAJOR"              # server, initdb, pg_ctl, pgbench
  "postgresql-plpython3-$PG_MAJOR"    # plpython3u
  python3-numpy python3-xxhash        # what the fingerprint needs in the server's Python
  python3-snowballstemmer python3-langdetect  # stemming and language detection of profiles
  "${build_packages[@]}"
)
if [ "$NEARSIM_PACKAGES" != server ]; then
  packages+=(
    python3-venv python3-pip            # the client's virtual environment
    bible-kjv                           # the demo corpus
  )
fi
if [ "$NEARSIM_PACKAGES" = all ]; then
  packages+=(
    chromium                            # the tests look at `nearsim report` pages in a browser
    manpages manpages-dev groff-base     # texts of the evaluation corpus (benchmarks/)
    manpages-de manpages-ru             # German and Russian texts of the fingerprint benchmark
    manpages-zh fortunes-zh manpages-ja libreoffice-help-km  # Chinese, Japanese and Khmer texts (make bench-languages)
    pgbouncer                           # the tests load through a pooler in transaction mode
    openjdk-17-jre-headless             # Spark (nearsim[spark], tests/spark) runs on Java 17
  )
fi
if [ "${NEARSIM_LIST_PACKAGES:-0}" = 1 ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
    missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install.sh: installing ${missing[*]}"
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

PG_CONFIG=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config
make -s -C extension PG_CONFIG="$PG_CONFIG"
"${SUDO[@]}" make -s -C extension PG_CONFIG="$PG_CONFIG" install

# Server images keep the runtime (PostgreSQL, PL/Python, the server's Python
# libraries) and drop what only the build needed.
if [ "$NEARSIM_REMOVE_BUILD_DEPS" = 1 ]; then
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq --auto-remove "${build_packages[@]}"
  "${SUDO[@]}" rm -rf /var/lib/apt/lists/*
fi
