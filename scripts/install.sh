#!/usr/bin/env bash
# Install what the nearsim extension needs on Debian 12, then build and
# install the extension (C helpers, SQL script and its Python code).
# Safe to run again: packages already present are not reinstalled.
# Used by `make setup`, CI and docker/.
set -euo pipefail

PG_MAJOR=${PG_MAJOR:-15}
cd "$(dirname "$0")/.."

if [ "$(id -u)" = 0 ]; then SUDO=(); else SUDO=(sudo); fi

packages=(
  "postgresql-$PG_MAJOR"              # server, initdb, pg_ctl
  "postgresql-server-dev-$PG_MAJOR"   # PGXS and server headers
  "postgresql-plpython3-$PG_MAJOR"    # plpython3u
  python3-numpy python3-xxhash        # what the fingerprint needs in the server's Python
  python3-snowballstemmer python3-langdetect  # stemming and language detection of profiles
  python3-venv python3-pip            # the client's virtual environment
  make gcc libxxhash-dev               # the C fingerprint hashes with xxHash
  bible-kjv                           # the demo corpus
  chromium                            # the tests look at `nearsim report` pages in a browser
  manpages manpages-dev groff-base     # texts of the evaluation corpus (benchmarks/)
)
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
