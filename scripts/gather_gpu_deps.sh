#!/usr/bin/env bash
# Downloads the Debian bookworm packages the build needs (the library packages
# of scripts/setup.sh and the runtime libraries they pin) as .deb files into a
# git-ignored folder, so they can travel with the working tree to a machine
# that has neither our packages nor network (the GPU machine; at most 64 MiB
# travel). There, `SJD_DEPS_PREFIX=/tmp/sjd-deps scripts/setup.sh` unpacks them
# into that prefix and builds against it. Needs apt (a Debian bookworm machine).
#   scripts/gather_gpu_deps.sh [DEB_DIR]     (default third_party_debs)
set -euo pipefail
cd "$(dirname "$0")/.."
deb_dir=${1:-third_party_debs}
read -r -a dev_packages <<< "$(scripts/setup.sh --print-library-packages)"

# The runtime libraries: what each -dev package depends on at its own exact
# version (libicu72, libpcre2-8-0, libstb0, ...); looser dependencies such as
# icu-devtools or libc6-dev are not needed to link.
runtime_packages=()
for pkg in "${dev_packages[@]}"; do
  while IFS= read -r dep; do
    runtime_packages+=("$dep")
  done < <(apt-cache show --no-all-versions "$pkg" | sed -n 's/^Depends: //p' | tr ',' '\n' |
           sed -n 's/^ *\([a-z0-9.+-]*\) (= .*/\1/p')
done

mkdir -p "$deb_dir"
rm -f "$deb_dir"/*.deb
# apt's download sandbox user may not write here; the files are only unpacked later.
# fonts-dejavu-core: the font sjd compare labels its figure with (scripts/device_check.sh points
# SJD_FONT at the unpacked copy when the machine has none).
(cd "$deb_dir" && apt-get download -q -o APT::Sandbox::User=root "${dev_packages[@]}" "${runtime_packages[@]}" \
  fonts-dejavu-core)
ls -1 "$deb_dir"
total=$(du -cb "$deb_dir"/*.deb | tail -1 | cut -f1)
echo "gather_gpu_deps: $(ls "$deb_dir"/*.deb | wc -l) packages, $(( total / 1024 / 1024 )) MiB in $deb_dir"
if [ "$total" -gt $(( 48 * 1024 * 1024 )) ]; then
  echo "gather_gpu_deps: more than 48 MiB; the working tree that travels holds at most 64 MiB" >&2
  exit 1
fi
