#!/bin/sh
# install(1), as PGXS calls it (install [-c] [-m MODE] [-s] SOURCE... DEST),
# for a server that is running: each file is copied beside its destination
# and renamed over it, so a session that loads the library, reads an
# extension script or imports the Python code meanwhile finds the file whole,
# old or new, never missing or half-written.  A session that has the old
# file open keeps it.
set -eu

options=
while [ $# -gt 0 ]; do
    case $1 in
        -c) shift ;;
        -m) [ $# -ge 2 ] || { echo "install_replacing.sh: -m needs a mode" >&2; exit 2; }
            options="$options -m $2"; shift 2 ;;
        -s|-p) options="$options $1"; shift ;;
        --) shift; break ;;
        -*) echo "install_replacing.sh: option $1 is not one PGXS uses" >&2; exit 2 ;;
        *) break ;;
    esac
done
if [ $# -lt 2 ]; then
    echo "usage: install_replacing.sh [-c] [-m MODE] [-s] SOURCE... DEST" >&2
    exit 2
fi

eval "destination=\${$#}"
sources=$(($# - 1))
if [ ! -d "$destination" ] && [ "$sources" -gt 1 ]; then
    echo "install_replacing.sh: $destination is not a directory" >&2
    exit 2
fi

while [ "$sources" -gt 0 ]; do
    source=$1
    shift
    sources=$((sources - 1))
    if [ -d "$destination" ]; then
        target=${destination%/}/${source##*/}
    else
        target=$destination
    fi
    case $target in
        */*) partial=${target%/*}/.${target##*/}.new.$$ ;;
        *) partial=.$target.new.$$ ;;
    esac
    # shellcheck disable=SC2086  # the options are words
    install $options "$source" "$partial" || { rm -f "$partial"; exit 1; }
    mv -f "$partial" "$target"
done
