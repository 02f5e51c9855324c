#!/usr/bin/env bash
# ci/build-libzmq.sh: build libzmq with the MLTCP patch (patches/libzmq/) and the progress library,
# plus the parameter-server test program (patches/libzmq/ps-test.c), into a keyed cache directory.
#
# libzmq's source is not in this repository: it is copied at build time out of the `zeromq-src`
# crate (crates.io, version ZEROMQ_SRC below, which bundles libzmq 4.3.5 under vendor/), fetched
# by cargo into ~/.cargo/registry/src. Steps: cargo fetch the crate (a throw-away manifest in the
# cache), copy vendor/ to $MLTCP_CACHE/libzmq/<key>/src, `patch -p1`, build with Debian's cmake
# (installed by ci/deps.sh when missing, as is python3, which reads cargo metadata), link
# libmltcp_progress.a (cargo build -p mltcp-progress).
# The patch is checked against the recorded hashes of the released and patched files
# (patches/check-patch.sh). The key hashes the patch, its hash lists, the progress library, the test
# program and this script: a second run with nothing changed does nothing but print the paths.
#
# Usage: ci/build-libzmq.sh [--print-dir]
#   prints (or, with --print-dir, only prints) the install prefix: <prefix>/lib/libzmq.so,
#   <prefix>/include/zmq.h, <prefix>/bin/mltcp-ps-test.
# Environment: MLTCP_CACHE (see ci/lib.sh), CARGO_TARGET_DIR (where mltcp-progress is built),
#   JOBS (make -j, default 1).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=ci/lib.sh
. "$here/lib.sh"

ZEROMQ_SRC=0.3.6+4.3.5 # zeromq-src crate version (libzmq 4.3.5)
PATCH=$REPO_ROOT/patches/libzmq/libzmq-4.3.5-mltcp.patch
PS_TEST=$REPO_ROOT/patches/libzmq/ps-test.c
PROGRESS=$REPO_ROOT/ccp-agent/progress
JOBS=${JOBS:-1}
print_only=0
[ "${1:-}" = "--print-dir" ] && print_only=1

for tool in cmake python3; do
  command -v "$tool" >/dev/null 2>&1 || "$here/deps.sh"
  command -v "$tool" >/dev/null 2>&1 || die "$tool missing after ci/deps.sh"
done
[ -f "$PATCH" ] || die "patch not found: $PATCH"

# 1. The progress library (static, so the patched libzmq needs nothing at run time).
target=$TARGET_DIR
log "building mltcp-progress (cargo, release)"
(cd "$REPO_ROOT" && cargo build --quiet --release -p mltcp-progress) \
  || die "cargo build -p mltcp-progress failed"
progress_a=$target/release/libmltcp_progress.a
[ -f "$progress_a" ] || die "not found after cargo build: $progress_a"

# 2. The crate's source: a manifest that depends on it, fetched by cargo.
fetch_dir=$MLTCP_CACHE/libzmq/fetch
mkdir -p "$fetch_dir/src"
cat >"$fetch_dir/Cargo.toml" <<TOML
# Written by ci/build-libzmq.sh: only makes cargo download the zeromq-src crate.
[package]
name = "mltcp-fetch-zeromq-src"
version = "0.0.0"
edition = "2021"
publish = false
[dependencies]
zeromq-src = "=$ZEROMQ_SRC"
[workspace]
TOML
[ -f "$fetch_dir/src/lib.rs" ] || echo "// empty" >"$fetch_dir/src/lib.rs"
(cd "$fetch_dir" && cargo fetch --quiet) || die "cargo fetch of zeromq-src $ZEROMQ_SRC failed"
crate_src=$(cd "$fetch_dir" && cargo metadata --format-version 1 --quiet \
  | python3 -c 'import json,sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"]=="zeromq-src"))')
crate_src=$(dirname "$crate_src")
[ -f "$crate_src/vendor/CMakeLists.txt" ] || die "no vendor/CMakeLists.txt in $crate_src"

# 3. Keyed build directory.
key=$(cat "$PATCH" "$REPO_ROOT"/patches/libzmq/SHA256SUMS.* "$REPO_ROOT/patches/check-patch.sh" \
  "$PS_TEST" "$progress_a" "$0" <(echo "$ZEROMQ_SRC") | sha256sum | cut -c1-16)
root=$MLTCP_CACHE/libzmq/$key
prefix=$root/install
if [ -f "$root/done" ]; then
  [ $print_only = 1 ] || log "cached: $prefix"
  echo "$prefix"
  exit 0
fi
rm -rf "$root"
mkdir -p "$root"
log "copying libzmq from $crate_src/vendor and applying $(basename "$PATCH")"
cp -a "$crate_src/vendor" "$root/src"
chmod -R u+w "$root/src"
"$REPO_ROOT/patches/check-patch.sh" "$REPO_ROOT/patches/libzmq" "$root/src" --apply >/dev/null \
  || die "the patch does not apply to zeromq-src $ZEROMQ_SRC (see the message above)"

log "building libzmq (cmake, -j$JOBS)"
cmake -S "$root/src" -B "$root/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib \
  -DBUILD_TESTS=OFF -DBUILD_STATIC=OFF -DWITH_DOCS=OFF -DWITH_LIBSODIUM=OFF -DWITH_LIBBSD=OFF \
  -DENABLE_CURVE=OFF -DENABLE_DRAFTS=OFF -DENABLE_WS=OFF \
  -DMLTCP_PROGRESS="$PROGRESS" -DMLTCP_PROGRESS_LIB="$progress_a" >"$root/cmake.log" 2>&1 \
  || die "cmake configure failed: see $root/cmake.log"
cmake --build "$root/build" -j"$JOBS" >"$root/build.log" 2>&1 || die "libzmq build failed: see $root/build.log"
cmake --install "$root/build" >>"$root/build.log" 2>&1 || die "libzmq install failed: see $root/build.log"
# (Whole outputs to grep: `nm | grep -q` fails under pipefail when grep exits first.)
syms=$(nm -D --defined-only "$prefix/lib/libzmq.so")
grep -q ' zmq_socket$' <<<"$syms" || die "libzmq.so exports no zmq_socket"
grep -q ' mltcp_progress' <<<"$syms" && die "libzmq.so exports the progress library's symbols"
grep -q ' mltcp_progress_add_bytes$' <<<"$(nm "$prefix/lib/libzmq.so")" \
  || die "libzmq.so does not contain the progress library (MLTCP_PROGRESS not honoured?)"

log "building mltcp-ps-test"
mkdir -p "$prefix/bin"
cc -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror -O2 -I "$prefix/include" "$PS_TEST" \
  -L "$prefix/lib" -Wl,-rpath,"$prefix/lib" -lzmq -o "$prefix/bin/mltcp-ps-test" \
  || die "cc mltcp-ps-test failed"
touch "$root/done"
[ $print_only = 1 ] || log "built: $prefix"
echo "$prefix"
