#!/bin/sh
# Installs the rooms of the Python package that the server runs into TARGET,
# one file at a time: each is written beside its place and renamed over it,
# so a session that imports nearsim while `make install` runs on a live server
# finds every module, old or new, never a missing or half-written one.  Files
# the new tree no longer has are removed last.
#
# usage: install_python.sh SOURCE TARGET DIR...   (INSTALL_DATA from make)
set -eu
source=$1
target=$2
shift 2
install_data=${INSTALL_DATA:-install -m 644}

installed=$(mktemp)
trap 'rm -f "$installed"' EXIT

for dir in "$@"; do
    mkdir -p "$target/$dir"
    find "$source/$dir" -maxdepth 1 -type f \
        \( -name '*.py' -o -name '*.json' -o -name '*.stop' -o -name README -o -name py.typed \) |
    while IFS= read -r file; do
        name=${file##*/}
        $install_data "$file" "$target/$dir/.$name.new"
        mv -f "$target/$dir/.$name.new" "$target/$dir/$name"
        printf '%s\n' "$target/$dir/$name" | sed 's#//*#/#g; s#/\./#/#g' >> "$installed"
    done
done

# What an earlier install left and this tree no longer has.
sort -o "$installed" "$installed"
find "$target" -type f | sed 's#//*#/#g; s#/\./#/#g' | sort | comm -23 - "$installed" |
while IFS= read -r stale; do
    rm -f "$stale"
done
find "$target" -mindepth 1 -depth -type d -empty -delete
