# ci/lib.sh: shared settings for the ci/ scripts (sourced, not run).
# MLTCP_CACHE holds every expensive artefact (kernel builds, bindgen, initramfs pieces) outside the
# repository, keyed by what each depends on, so a second run is fast and a fresh machine still works.
MLTCP_CACHE=${MLTCP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mltcp}
BINDGEN=$MLTCP_CACHE/tools/bin/bindgen
CARGO_DEB=$MLTCP_CACHE/tools/bin/cargo-deb
CARGO_FUZZ=$MLTCP_CACHE/tools/bin/cargo-fuzz
K8S_VALIDATE=$MLTCP_CACHE/tools/k8s-venv/bin/kubernetes-validate
# The kernel must be built with Debian's rustc-web (matching rust-web-src), never rustup's rustc,
# which comes first in PATH: a module built with another rustc fails with E0514.
KRUSTC=/usr/bin/rustc
KERNEL_VERSION=6.12
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Where cargo puts the workspace's build output: $CARGO_TARGET_DIR (a relative one is relative to
# the repository, where the scripts run cargo) or target/. Binaries: $TARGET_DIR/release/NAME.
case "${CARGO_TARGET_DIR:-}" in
  "") TARGET_DIR=$REPO_ROOT/target ;;
  /*) TARGET_DIR=$CARGO_TARGET_DIR ;;
  *) TARGET_DIR=$REPO_ROOT/$CARGO_TARGET_DIR ;;
esac
mkdir -p "$MLTCP_CACHE"

log() { printf '[%s] %s\n' "$(basename "$0")" "$*" >&2; }
die() { printf '[%s] error: %s\n' "$(basename "$0")" "$*" >&2; exit 1; }

# The kernel source every kernel build here starts from: Debian's linux-source-6.12 with our patch
# series (patches/linux-6.12/*.patch) applied. ci/build-kernel.sh (the testbed) and
# ci/package-kernel.sh (packages from a user's config) both call these, and both cache keys
# include kernel_source_identity, so a new source package, patch, rustc or bindgen rebuilds both.

# kernel_source_identity: what the patched source and its Rust toolchain are (for cache keys).
kernel_source_identity() {
  echo "linux-source-6.12 $(dpkg-query -W -f='${Version}' linux-source-6.12)"
  "$KRUSTC" --version
  "$BINDGEN" --version
  declare -f extract_patched_kernel
  cat "$REPO_ROOT"/patches/linux-6.12/*.patch 2>/dev/null || true
}

# extract_patched_kernel DIR: unpack the source into DIR/linux and apply the series (dies naming
# the patch that does not apply).
extract_patched_kernel() {
  local dir=$1 p
  tar -xJf /usr/src/linux-source-6.12.tar.xz -C "$dir" || die "cannot extract /usr/src/linux-source-6.12.tar.xz into $dir"
  mv "$dir/linux-source-6.12" "$dir/linux"
  for p in "$REPO_ROOT"/patches/linux-6.12/*.patch; do
    [ -e "$p" ] || continue
    log "applying $(basename "$p")"
    (cd "$dir/linux" && patch -p1 --forward --quiet < "$p") \
      || die "patch $(basename "$p") does not apply to linux-source $(dpkg-query -W -f='${Version}' linux-source-6.12)"
  done
}
