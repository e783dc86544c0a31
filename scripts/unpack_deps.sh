#!/usr/bin/env bash
# Unpacks the Debian packages gathered by scripts/gather_gpu_deps.sh into a
# prefix folder (never into /), for a machine that has none of them and no
# network. scripts/setup.sh calls it when SJD_DEPS_PREFIX is set.
#   scripts/unpack_deps.sh DEB_DIR PREFIX
# Idempotent: a prefix already holding exactly DEB_DIR's packages is kept.
# Checks that every symbolic link in the prefix (the -dev packages' libfoo.so)
# resolves inside it, so nothing is taken from the system by accident.
set -euo pipefail
# Byte order for every listing and glob: the stamp below must not change with the machine's locale
# (en_US sorts libfoo1 before libfoo-dev, C after), or a prefix would be unpacked again for nothing.
export LC_ALL=C
if [ $# -ne 2 ]; then
  echo "usage: scripts/unpack_deps.sh DEB_DIR PREFIX" >&2; exit 2
fi
deb_dir=$1 prefix=$2
debs=("$deb_dir"/*.deb)
if [ ! -e "${debs[0]}" ]; then
  echo "unpack_deps: no .deb files in $deb_dir (run scripts/gather_gpu_deps.sh on a machine with apt)" >&2
  exit 2
fi
case "$(realpath -m "$prefix")" in
  /|/usr|/usr/local) echo "unpack_deps: refusing to unpack into $prefix" >&2; exit 2 ;;
esac

stamp=$prefix/.sjd-debs
listing=$(cd "$deb_dir" && ls -1 ./*.deb | sed 's|^\./||')
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$listing" ]; then
  echo "unpack_deps: $prefix already holds the ${#debs[@]} packages of $deb_dir"
  exit 0
fi
# Replaced only when this script made it (or it is empty): the prefix is a name
# the caller typed, and anything else there is not ours to delete.
if [ -d "$prefix" ] && [ ! -f "$stamp" ] && [ -n "$(ls -A "$prefix")" ]; then
  echo "unpack_deps: $prefix is not empty and was not made by unpack_deps.sh; name a new folder" >&2
  exit 2
fi
rm -rf "$prefix"
mkdir -p "$prefix"
for deb in "${debs[@]}"; do
  if command -v dpkg >/dev/null; then
    dpkg -x "$deb" "$prefix"
  else  # no dpkg: a .deb is an ar archive holding data.tar.* (tar finds the compression)
    member=$(ar t "$deb" | grep '^data\.tar')
    ar p "$deb" "$member" > "$prefix/$member"
    tar -x -f "$prefix/$member" -C "$prefix"
    rm "$prefix/$member"
  fi
done
prefix_real=$(realpath "$prefix")
while IFS= read -r link; do
  target=$(realpath -m "$link")
  case "$target" in
    "$prefix_real"/*) [ -e "$target" ] || { echo "unpack_deps: dangling link $link" >&2; exit 1; } ;;
    *) echo "unpack_deps: $link points outside the prefix ($target)" >&2; exit 1 ;;
  esac
done < <(find "$prefix" -type l)
echo "$listing" > "$stamp"
echo "unpack_deps: unpacked ${#debs[@]} packages into $prefix ($(du -sh "$prefix" | cut -f1))"
