#!/bin/sh
# Builds the Debian 12 packages of hypertune with dpkg-deb (`make deb`):
#
#   hypertuned        the server and the CLI (/usr/bin/hypertuned, hypertune),
#                     the systemd unit of deploy/systemd (its programs in
#                     /usr/bin), /etc/default/hypertuned and the system user
#                     (sysusers.d); depends on the packages of the shared
#                     libraries they load (dpkg-shlibdeps, else
#                     deploy/runtime-packages.sh).
#   hypertune-client  the Python client with its generated gRPC stubs, in
#                     /usr/lib/python3/dist-packages; depends on
#                     python3-grpcio and python3-protobuf.
#
# Usage: deploy/deb/build-debs.sh --bin-dir DIR --out-dir DIR
#                                 [--python-dir DIR] [--version V]
#   --bin-dir     where hypertuned and hypertune are (the build's bin/)
#   --python-dir  a built package tree (the build's python/, with
#                 hypertune/v1's stubs); when it has none, the package is built
#                 from python/ by its setup.py, which generates the stubs
#   --version     the packages' version (default: python/pyproject.toml's)
#
# hypertune-train is not packaged: where it is built with CUDA it loads
# libraries from outside Debian (/usr/local/cuda), which no Depends can name.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin_dir="" out_dir="" python_dir="" version=""
while [ $# -gt 0 ]; do
  case $1 in
    --bin-dir) bin_dir=$2; shift 2 ;;
    --out-dir) out_dir=$2; shift 2 ;;
    --python-dir) python_dir=$2; shift 2 ;;
    --version) version=$2; shift 2 ;;
    *) echo "$0: unknown argument $1 (see the usage at the top of this script)" >&2; exit 2 ;;
  esac
done
if [ -z "$bin_dir" ] || [ -z "$out_dir" ]; then
  echo "usage: $0 --bin-dir DIR --out-dir DIR [--python-dir DIR] [--version V]" >&2
  exit 2
fi
for program in hypertuned hypertune; do
  if [ ! -x "$bin_dir/$program" ]; then
    echo "$0: --bin-dir $bin_dir has no program $program (build it first: make build)" >&2
    exit 1
  fi
done
for tool in dpkg-deb python3; do
  command -v $tool >/dev/null 2>&1 || { echo "$0: $tool not found" >&2; exit 1; }
done
if [ -z "$version" ]; then
  version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/python/pyproject.toml")
  [ -n "$version" ] || { echo "$0: no version in python/pyproject.toml" >&2; exit 1; }
fi
arch=$(dpkg --print-architecture)
mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/hypertune-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Installed-Size: the staging tree's size in KiB, as dpkg-gencontrol counts it.
installed_size() {
  du -sk --exclude=DEBIAN "$1" | cut -f1
}

# --- hypertuned --------------------------------------------------------------
stage=$work/hypertuned
install -d "$stage/DEBIAN" "$stage/usr/bin" "$stage/lib/systemd/system" \
  "$stage/etc/default" "$stage/usr/lib/sysusers.d" "$stage/usr/share/doc/hypertuned"
install -m 0755 "$bin_dir/hypertuned" "$bin_dir/hypertune" "$stage/usr/bin/"
# Without their debug information, as Debian ships programs (a
# RelWithDebInfo build's are several times larger, and slow to compress).
if command -v strip >/dev/null 2>&1; then
  strip --strip-debug "$stage/usr/bin/hypertuned" "$stage/usr/bin/hypertune"
fi
# The unit as deploy/systemd has it, for programs in /usr/bin instead of
# /usr/local/bin (where `cmake --install` puts them).
sed 's|/usr/local/bin/|/usr/bin/|g' "$root/deploy/systemd/hypertuned.service" \
  > "$stage/lib/systemd/system/hypertuned.service"
chmod 0644 "$stage/lib/systemd/system/hypertuned.service"
grep -q '^ExecStart=/usr/bin/hypertuned ' "$stage/lib/systemd/system/hypertuned.service" || {
  echo "$0: deploy/systemd/hypertuned.service: no ExecStart of hypertuned found to point at /usr/bin" >&2
  exit 1
}
install -m 0644 "$root/deploy/systemd/hypertuned.default" "$stage/etc/default/hypertuned"
install -m 0644 "$root/deploy/systemd/hypertune.sysusers.conf" \
  "$stage/usr/lib/sysusers.d/hypertune.conf"
echo /etc/default/hypertuned > "$stage/DEBIAN/conffiles"

if command -v dpkg-shlibdeps >/dev/null 2>&1; then
  # dpkg-shlibdeps reads a source package's debian/control: a minimal one.
  mkdir -p "$work/shlibs/debian"
  printf 'Source: hypertune\n\nPackage: hypertuned\nArchitecture: any\n' \
    > "$work/shlibs/debian/control"
  depends=$(cd "$work/shlibs" && dpkg-shlibdeps -O \
    "-e$stage/usr/bin/hypertuned" "-e$stage/usr/bin/hypertune" 2>/dev/null \
    | sed -n 's/^shlibs:Depends=//p')
else
  depends=$("$root/deploy/runtime-packages.sh" "$stage/usr/bin/hypertuned" \
    "$stage/usr/bin/hypertune" | paste -sd, | sed 's/,/, /g')
fi
[ -n "$depends" ] || { echo "$0: could not find the packages of hypertuned's libraries" >&2; exit 1; }

cat > "$stage/DEBIAN/control" <<EOF
Package: hypertuned
Version: $version
Architecture: $arch
Maintainer: hypertune developers <hypertune@localhost>
Section: science
Priority: optional
Installed-Size: $(installed_size "$stage")
Depends: $depends
Recommends: hypertune-client
Description: self-hosted hyperparameter tuning service
 hypertuned keeps studies (search spaces, metrics, budgets) and their trials
 in SQLite or PostgreSQL and suggests parameters with a Gaussian-process
 bandit, TPE or random search; the hypertune command creates studies, runs
 workers and reads the history. A hardened systemd unit is included; it is
 not enabled: put "TOKEN OWNER [admin]" lines in /etc/hypertune/tokens.txt
 (mode 0600), then run systemctl enable --now hypertuned.
EOF

# configure: the system user, the token folder, systemd's view of the unit.
# The unit is left disabled: it needs /etc/hypertune/tokens.txt first.
cat > "$stage/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  if command -v systemd-sysusers >/dev/null 2>&1; then
    systemd-sysusers hypertune.conf
  fi
  install -d -m 0700 /etc/hypertune
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
  fi
  if [ ! -e /etc/hypertune/tokens.txt ]; then
    echo "hypertuned: write /etc/hypertune/tokens.txt (\"TOKEN OWNER [admin]\" lines, mode 0600)," \
         "then: systemctl enable --now hypertuned"
  fi
fi
EOF
cat > "$stage/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
  systemctl stop hypertuned.service || true
fi
EOF
chmod 0755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm"
printf 'hypertuned %s: see docs/install.md and deploy/README.md of hypertune.\n' \
  "$version" > "$stage/usr/share/doc/hypertuned/README"
dpkg-deb --root-owner-group --build "$stage" "$out_dir/hypertuned_${version}_${arch}.deb" >/dev/null

# --- hypertune-client --------------------------------------------------------
stage=$work/hypertune-client
site=$stage/usr/lib/python3/dist-packages
install -d "$stage/DEBIAN" "$site" "$stage/usr/share/doc/hypertune-client"
if [ -n "$python_dir" ] && [ -f "$python_dir/hypertune/v1/hypertune_pb2_grpc.py" ]; then
  package=$python_dir/hypertune
else
  # setup.py's build_py copies the modules and generates the stubs, in a
  # copy of python/ so that its scratch files (egg-info) stay out of the
  # source tree; HYPERTUNE_PROTO says where the proto is.
  mkdir "$work/python-src"
  (cd "$root/python" && tar --exclude=hypertune/v1 --exclude=build --exclude='*.egg-info' \
     --exclude=__pycache__ -cf - .) | (cd "$work/python-src" && tar -xf -)
  (cd "$work/python-src" && HYPERTUNE_PROTO=$root/proto/hypertune.proto \
     python3 setup.py --quiet build --build-base "$work/python-build" \
     --build-lib "$work/python-lib" >"$work/python-build.log" 2>&1) || {
    cat "$work/python-build.log" >&2
    echo "$0: building the Python package from python/ failed" >&2
    exit 1
  }
  package=$work/python-lib/hypertune
fi
cp -r "$package" "$site/hypertune"
find "$site" -name __pycache__ -prune -exec rm -rf {} + 
find "$site" -type d -exec chmod 0755 {} +
find "$site" -type f -exec chmod 0644 {} +
[ -f "$site/hypertune/v1/hypertune_pb2_grpc.py" ] || {
  echo "$0: the Python package has no generated stubs (hypertune/v1)" >&2
  exit 1
}
install -m 0644 "$root/python/README.md" "$stage/usr/share/doc/hypertune-client/README.md"
cat > "$stage/DEBIAN/control" <<EOF
Package: hypertune-client
Version: $version
Architecture: all
Maintainer: hypertune developers <hypertune@localhost>
Section: python
Priority: optional
Installed-Size: $(installed_size "$stage")
Depends: python3 (>= 3.9), python3-grpcio (>= 1.51), python3-protobuf (>= 3.21)
Suggests: python3-pandas, hypertuned
Description: Python client of hypertune, a hyperparameter tuning service
 The package hypertune talks to hypertuned over gRPC: create a study, ask
 for trials and report on them, read the history as trials, a pandas
 DataFrame or a live stream of changes.
EOF
# Byte-compiled on install and removed with the package, as Debian's own
# python3 packages are (py3compile/py3clean, from python3-minimal).
cat > "$stage/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ] && command -v py3compile >/dev/null 2>&1; then
  py3compile -p hypertune-client
fi
EOF
cat > "$stage/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if command -v py3clean >/dev/null 2>&1; then
  py3clean -p hypertune-client
else
  find /usr/lib/python3/dist-packages/hypertune -name __pycache__ -prune -exec rm -rf {} +
fi
EOF
chmod 0755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm"
dpkg-deb --root-owner-group --build "$stage" "$out_dir/hypertune-client_${version}_all.deb" >/dev/null

for deb in "$out_dir/hypertuned_${version}_${arch}.deb" "$out_dir/hypertune-client_${version}_all.deb"; do
  echo "built $deb"
done
