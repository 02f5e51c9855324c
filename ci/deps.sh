#!/usr/bin/env bash
# ci/deps.sh: install every system package and tool the project needs, idempotently, on a fresh
# Debian 12 machine. Safe to run repeatedly: it only installs what is missing.
#
#   ci/deps.sh [--fuzz]    --fuzz: also rustup's nightly and cargo-fuzz (ci/fuzz.sh passes it;
#                          the tests never fuzz, so ci/test-all does not install them)
#
# Kernel toolchain facts (versions, why Debian's rustc-web and not rustup's rustc): see
# ../shared/REFERENCE.md section 7 and ci/README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=ci/lib.sh
. "$here/lib.sh"
fuzz=0
case "${1:-}" in
  --fuzz) fuzz=1 ;;
  '') ;;
  *) die "ci/deps.sh: unknown argument '$1' (only --fuzz)" ;;
esac

APT_PACKAGES=(
  # Linux 6.12 source and the Rust toolchain Debian pairs with it for the kernel.
  linux-source-6.12 rustc-web rust-web-src libclang-dev
  # The kernel rustc's clippy, for the module's `make CLIPPY=1` lint (ci/build-module.sh --clippy).
  rust-web-clippy
  # Kernel build.
  bc flex bison libelf-dev libssl-dev cpio kmod build-essential xz-utils
  # VM testbed: emulator, initramfs userland, traffic tools.
  qemu-system-x86 busybox-static iperf3 iproute2
  # Text in the PNG plots of trainemu report.
  fonts-dejavu-core
  # Patched libzmq (ci/build-libzmq.sh).
  cmake
  # JSON in scripts: cargo metadata in ci/build-libzmq.sh, results.json in ci/sim-bench.
  python3
  # Packaging tests (ci/vm-tests/packaging.sh): systemd-analyze verify of the units, dpkg-deb,
  # and a venv for the Kubernetes manifest's offline validator.
  systemd dpkg-dev python3-venv
  # make bindeb-pkg (ci/package-kernel.sh): its build dependencies; pahole (dwarves, 1.24 on
  # Debian 12: >= 1.24 has --lang_exclude, which RUST needs beside BTF) so that the testbed's
  # kernel (ci/kernel.config: DEBUG_INFO_BTF, for mltcp-bpf) and a distribution config keep
  # DEBUG_INFO_BTF (and sched_ext, which needs it).
  debhelper rsync dwarves
  # The module's DKMS package (ci/package-module.sh --dkms): packaging-check.sh runs a real
  # `dkms build` of it against the packaged headers.
  dkms
  # On-demand profiling of the CCP path (ci/scenarios/ccp-profile.sh ships the host's perf).
  linux-perf
  # On-demand instruction counts of the CCP datapath's per-ACK path on the host
  # (ci/ack-instructions.sh runs it under callgrind).
  valgrind
  # mltcp-bpf (kmod/mltcp-bpf): clang compiles the BPF C at build time (libbpf-cargo; llvm for
  # its tools), libbpf-sys builds its vendored libbpf against libelf (above) and zlib found
  # through pkg-config, and the BPF C includes linux/bpf.h from linux-libc-dev.
  clang llvm zlib1g-dev pkg-config linux-libc-dev
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # A fresh machine may have no (or stale) package lists.
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# bindgen-cli, pinned: the kernel's Rust build checks its version, and 0.69.5 is the one verified
# with Linux 6.12 and libclang 14. Installed into the cache, not the repo.
# cargo_tool CRATE VERSION [+TOOLCHAIN]: `cargo install --locked` into the cache, with rustup's
# TOOLCHAIN when given, tried twice (a registry hiccup or another cargo holding the package
# cache's lock should not fail a run); the log is shown on failure.
cargo_tool() {
  local log_file=$MLTCP_CACHE/tools/install-$1.log try
  mkdir -p "$MLTCP_CACHE/tools"
  for try in 1 2; do
    cargo ${3:+"$3"} install --locked "$1" --version "$2" --root "$MLTCP_CACHE/tools" >"$log_file" 2>&1 && return 0
    log "cargo install $1 $2 failed (try $try of 2)"
  done
  tail -n 20 "$log_file" >&2
  die "cargo install $1 $2 failed (log: $log_file)"
}
if [ ! -x "$BINDGEN" ]; then
  log "installing bindgen-cli 0.69.5 into $MLTCP_CACHE/tools"
  cargo_tool bindgen-cli 0.69.5
fi
# cargo-deb, pinned: builds the user-space .deb packages (ci/package-userspace.sh).
if [ ! -x "$CARGO_DEB" ]; then
  log "installing cargo-deb 3.8.0 into $MLTCP_CACHE/tools"
  cargo_tool cargo-deb 3.8.0
fi
# cargo-fuzz, pinned, built with the nightly toolchain that runs the CCP datapath's fuzz target
# (kmod/ccp-datapath/fuzz: libFuzzer's sanitizer flags need nightly); ci/fuzz.sh runs it and
# asks for it with --fuzz.
if [ "$fuzz" = 1 ] && [ ! -x "$CARGO_FUZZ" ]; then
  if ! rustup toolchain list | grep -q '^nightly'; then
    log "installing rustup's nightly toolchain (for cargo-fuzz)"
    rustup toolchain install nightly --profile minimal >/dev/null \
      || die "rustup toolchain install nightly failed"
  fi
  log "installing cargo-fuzz 0.13.2 into $MLTCP_CACHE/tools"
  cargo_tool cargo-fuzz 0.13.2 +nightly
fi
# kubernetes-validate, pinned, in a venv in the cache: validates the Kubernetes manifest offline
# against the API's JSON schemas it carries (ci/packaging-check.sh).
if [ ! -x "$K8S_VALIDATE" ]; then
  log "installing kubernetes-validate 1.37.0 into $MLTCP_CACHE/tools/k8s-venv"
  rm -rf "$MLTCP_CACHE/tools/k8s-venv"
  python3 -m venv "$MLTCP_CACHE/tools/k8s-venv" \
    && "$MLTCP_CACHE/tools/k8s-venv/bin/pip" install -q kubernetes-validate==1.37.0 >/dev/null \
    || die "installing kubernetes-validate 1.37.0 (PyPI) into a venv failed"
fi
log "dependencies ready"
