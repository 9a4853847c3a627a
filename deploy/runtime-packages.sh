#!/bin/sh
# Prints the Debian packages that hold the shared libraries PROGRAM... load,
# one per line, sorted: what a runtime image installs to run programs built
# in another (deploy/Dockerfile). Fails, naming them, when a library is not
# found or no package holds it.
set -eu
if [ $# -eq 0 ]; then
  echo "usage: $0 PROGRAM..." >&2
  exit 2
fi
missing=$(ldd "$@" | awk '/=> not found/ {print $1}' | sort -u)
if [ -n "$missing" ]; then
  echo "$0: libraries not found:" $missing >&2
  exit 1
fi
status=0
packages=""
for lib in $(ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u); do
  # dpkg knows a file by the path its package installed (usrmerge: /lib or
  # /usr/lib), so try the resolved path too.
  owner=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null) || {
    echo "$0: no Debian package holds $lib" >&2
    status=1
    continue
  }
  packages="$packages ${owner%%:*}"
done
printf '%s\n' $packages | sort -u
exit $status
