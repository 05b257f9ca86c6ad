#!/bin/sh
# Installs the rooms of the Python package that the server runs into TARGET
# with INSTALL_DATA (install_replacing.sh: each file renamed over the old
# one), then removes what an earlier install left there and this tree no
# longer has.
#
# usage: INSTALL_DATA=... install_python.sh SOURCE TARGET DIR...
set -eu
source=$1
target=$2
shift 2

installed=$(mktemp)
trap 'rm -f "$installed"' EXIT

for dir in "$@"; do
    mkdir -p "$target/$dir"
    find "$source/$dir" -maxdepth 1 -type f \
        \( -name '*.py' -o -name '*.json' -o -name '*.stop' -o -name README -o -name py.typed \) |
    while IFS= read -r file; do
        # shellcheck disable=SC2086  # INSTALL_DATA is a command and its options
        $INSTALL_DATA "$file" "$target/$dir/"
        case $dir in
            .) echo "${file##*/}" ;;
            *) echo "$dir/${file##*/}" ;;
        esac >> "$installed"
    done
done

# Paths under TARGET, as find's %P gives them.
sort -o "$installed" "$installed"
find "$target" -type f -printf '%P\n' | sort | comm -23 - "$installed" |
while IFS= read -r stale; do
    rm -f "$target/$stale"
done
find "$target" -mindepth 1 -depth -type d -empty -delete
