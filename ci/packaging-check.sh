#!/usr/bin/env bash
# ci/packaging-check.sh: the deployment path of docs/deployment.md, tested as an
# operator takes it (a step of ci/test-all):
#   1. the user-space packages (ci/package-userspace.sh) unpack into a scratch root; systemd accepts
#      their units there (systemd-analyze verify, which also checks that every ExecStart binary is
#      where the unit says) with an exposure score of at most 2.5 (systemd-analyze security); the
#      shipped example configuration passes `ccp-agent check`; the binaries run; the preload shim
#      loads; the mltcp-bpf package holds its binary, unit, /etc/default conffile and docs, depends
#      on the libraries the binary links, its unit has the capabilities and sandbox keys that
#      loading struct_ops allows (and not those that would break it), and bad parameters are
#      refused before the kernel is touched;
#   2. the Kubernetes manifest validates against the Kubernetes API schema (kubernetes-validate,
#      offline, --strict), and its ConfigMap's configuration passes `ccp-agent check` for each node;
#   3. the testbed's own kernel config goes through ci/package-kernel.sh (cached); the headers
#      package carries the Rust artefacts; ci/package-module.sh builds tcp_mltcp.ko against that
#      headers package alone and packages it with its modules-load.d/modprobe.d/sysctl.d snippets;
#   3b. the DKMS package (ci/package-module.sh --dkms): `dkms build` and `dkms install` of it
#      against the same headers package, in scratch trees (the host's /var/lib/dkms and /lib/modules
#      untouched, checked), vermagic as the packaged module's, another kernel skipped, `dkms remove`;
#   4. the VM boots the kernel from the linux-image package, loads that module and runs one mltcp
#      flow (ci/vm-tests/packaged.sh).
# What it cannot do here: start the units under systemd (no systemd as PID 1 in the CI container).
# Output: "ok NAME" / "FAIL NAME: reason" per check, then "N passed, M failed". Work files:
# $MLTCP_CACHE/packaging-check.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
"$here/deps.sh" >&2 || die "ci/deps.sh failed"

work=$MLTCP_CACHE/packaging-check
rm -rf "$work"; mkdir -p "$work"
passed=0 failed=0
ok() { echo "ok $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
finish() { echo "$passed passed, $failed failed"; [ "$failed" = 0 ]; exit; }

# --- 1. user-space packages ---
if "$here/package-userspace.sh" "$work/debs" > "$work/debs.txt" 2> "$work/package-userspace.log"; then
  ok "userspace_packages ($(xargs -n1 basename < "$work/debs.txt" | tr '\n' ' '))"
else
  bad userspace_packages "ci/package-userspace.sh failed: $(tail -n 5 "$work/package-userspace.log")"
fi
root=$work/root
mkdir -p "$root"
for d in "$work"/debs/*.deb; do [ -f "$d" ] && dpkg-deb -x "$d" "$root"; done
# The units' After=/Wants= name the system's own targets: give the scratch root the host's units.
mkdir -p "$root/lib/systemd/system"
cp -an /lib/systemd/system/. "$root/lib/systemd/system/" 2>/dev/null
units="ccp-agent.service ccp-switch@s1.service mltcp-bpf.service"
# shellcheck disable=SC2086
if out=$(systemd-analyze verify --root="$root" $units 2>&1) && [ -z "$out" ]; then
  ok "units_verify ($units)"
else
  bad units_verify "systemd-analyze verify: ${out:-exit status non-zero}"
fi
for u in $units; do
  line=$(systemd-analyze security --offline=yes --root="$root" "$u" 2>&1 | tail -n 1)
  score=$(echo "$line" | sed -n 's/.*: \([0-9.]*\) .*/\1/p')
  if [ -n "$score" ] && awk -v s="$score" 'BEGIN { exit !(s <= 2.5) }'; then ok "units_exposure $u ($score)"
  else bad "units_exposure" "$u: '$line' (at most 2.5 expected)"; fi
done
etc=$work/etc-ccp-agent
mkdir -p "$etc"
if cp "$root"/usr/share/doc/ccp-agent/examples/{agent.toml,topo.toml} "$etc/" 2>/dev/null \
   && [ -f "$root/usr/share/ccp-agent/mlcc-slot.ccp" ]; then
  # As installed, but with the program path inside the scratch root.
  sed -i "s#/usr/share/ccp-agent/mlcc-slot.ccp#$root/usr/share/ccp-agent/mlcc-slot.ccp#" "$etc/agent.toml"
  if out=$("$root/usr/bin/ccp-agent" check --config "$etc/agent.toml" 2>&1); then ok "example_config ($out)"
  else bad example_config "$out"; fi
else
  bad example_config "examples or the datapath program missing from the ccp-agent package"
fi
for b in ccp-agent mltcp-stat mltcp-burst ecn-qdisc mltcp-bpf; do
  if "$root/usr/bin/$b" --help >/dev/null 2>&1; then ok "binary_help $b"; else bad binary_help "$b --help failed"; fi
done
if out=$(LD_PRELOAD="$root/usr/lib/mltcp/libmltcp_preload.so" /bin/true 2>&1) && [ -z "$out" ]; then
  ok preload_loads
else
  bad preload_loads "LD_PRELOAD of the packaged shim: ${out:-failed}"
fi

# mltcp-bpf: the package's files, its dependencies against what the binary links, the unit's keys.
bpfdeb=$(ls "$work"/debs/mltcp-bpf_*.deb 2>/dev/null | head -n 1)
if [ -n "$bpfdeb" ]; then
  listing=$(dpkg-deb -c "$bpfdeb")
  missing=""
  for f in usr/bin/mltcp-bpf lib/systemd/system/mltcp-bpf.service etc/default/mltcp-bpf \
           usr/share/doc/mltcp-bpf/bpf.md usr/share/doc/mltcp-bpf/deployment.md; do
    grep -q " \./$f\$" <<<"$listing" || missing="$missing $f"
  done
  conffiles=$(dpkg-deb --ctrl-tarfile "$bpfdeb" | tar -xO ./conffiles 2>/dev/null)
  grep -qx /etc/default/mltcp-bpf <<<"$conffiles" || missing="$missing conffile:/etc/default/mltcp-bpf"
  control=$(dpkg-deb --ctrl-tarfile "$bpfdeb" | tar -t 2>/dev/null)
  for script in postinst prerm postrm; do
    grep -qx "\./$script" <<<"$control" || missing="$missing DEBIAN/$script"
  done
  if [ -z "$missing" ]; then ok "mltcp_bpf_package_files ($(basename "$bpfdeb"))"
  else bad mltcp_bpf_package_files "$(basename "$bpfdeb") lacks:$missing"; fi
  # Every shared library the binary needs comes from a package in Depends, but for those dpkg
  # keeps installed (Essential or Protected, e.g. libgcc-s1), which cargo-deb leaves out.
  depends=$(dpkg-deb -f "$bpfdeb" Depends)
  undeclared=""
  for lib in $(ldd "$root/usr/bin/mltcp-bpf" 2>/dev/null | awk '$3 ~ /^\// { print $3 }'); do
    owner=$(dpkg -S "$(readlink -f "$lib")" 2>/dev/null | head -n 1 | cut -d: -f1)
    [ -n "$owner" ] || owner=$(dpkg -S "$lib" 2>/dev/null | head -n 1 | cut -d: -f1)
    [ -n "$owner" ] && [[ "$(dpkg-query -W -f='${Essential}${Protected}' "$owner" 2>/dev/null)" == *yes* ]] && continue
    grep -qE "(^|[ ,])$owner( |,|$)" <<<"$depends" || undeclared="$undeclared $lib(${owner:-no package})"
  done
  if [ -z "$undeclared" ]; then ok "mltcp_bpf_depends ($depends)"
  else bad mltcp_bpf_depends "Depends '$depends' lacks the packages of:$undeclared"; fi
else
  bad mltcp_bpf_package_files "no mltcp-bpf package in $work/debs"
fi
unit=$root/lib/systemd/system/mltcp-bpf.service
want="Type=oneshot
RemainAfterExit=yes
ConditionPathExists=!/sys/module/tcp_mltcp
EnvironmentFile=-/etc/default/mltcp-bpf
ExecStop=-/usr/bin/mltcp-bpf unload
DynamicUser=yes
AmbientCapabilities=CAP_BPF CAP_PERFMON CAP_SYS_ADMIN
CapabilityBoundingSet=CAP_BPF CAP_PERFMON CAP_SYS_ADMIN
NoNewPrivileges=yes
PrivateNetwork=yes
RestrictAddressFamilies=none
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
SystemCallArchitectures=native
SystemCallFilter=bpf
SystemCallErrorNumber=EPERM"
missing=""
while IFS= read -r line; do grep -qxF "$line" "$unit" 2>/dev/null || missing="$missing '$line'"; done <<<"$want"
# Keys that would break loading: a user namespace (capabilities there do not count for bpf()),
# /proc without /proc/sys.
for key in PrivateUsers=yes ProcSubset=pid; do
  grep -qxF "$key" "$unit" 2>/dev/null && missing="$missing (has $key)"
done
if [ -z "$missing" ]; then ok mltcp_bpf_unit_keys
else bad mltcp_bpf_unit_keys "mltcp-bpf.service:$missing"; fi
# The unit's bad parameters fail before the kernel is touched (no BPF call on this host).
if out=$("$root/usr/bin/mltcp-bpf" load --exist-ok nosuch=1 2>&1); then
  bad mltcp_bpf_bad_param "load with an unknown parameter succeeded"
elif grep -qF 'unknown parameter "nosuch"' <<<"$out"; then ok "mltcp_bpf_bad_param ($out)"
else bad mltcp_bpf_bad_param "load nosuch=1 said '$out'"; fi

# --- 2. Kubernetes manifest ---
manifest=$REPO_ROOT/ccp-agent/packaging/k8s/ccp-agent.yaml
if out=$("$K8S_VALIDATE" --strict --quiet "$manifest" 2>&1); then ok "k8s_manifest_schema"
else bad k8s_manifest_schema "$out"; fi
k8s_etc=$work/k8s-etc
mkdir -p "$k8s_etc"
if "$(dirname "$K8S_VALIDATE")/python" - "$manifest" "$k8s_etc" <<'PY'
import sys, yaml
for doc in yaml.safe_load_all(open(sys.argv[1])):
    if doc and doc.get("kind") == "ConfigMap":
        for name, text in doc["data"].items():
            open(f"{sys.argv[2]}/{name}", "w").write(text)
PY
then
  sed -i "s#/usr/share/ccp-agent/mlcc-slot.ccp#$root/usr/share/ccp-agent/mlcc-slot.ccp#" "$k8s_etc/agent.toml"
  for node in node-a node-b; do
    if out=$(CCP_AGENT_HOSTS=$node "$root/usr/bin/ccp-agent" check --config "$k8s_etc/agent.toml" 2>&1); then
      ok "k8s_config $node"
    else
      bad k8s_config "$node: $out"
    fi
  done
else
  bad k8s_config "cannot read the ConfigMap of $manifest"
fi

# --- 3. kernel, headers and module packages ---
kdir=$("$here/build-kernel.sh") || { bad kernel_packages "ci/build-kernel.sh failed"; finish; }
# --reuse-tree: the testbed's built tree is the packages' starting point, so a first run on a fresh
# machine does not build the same kernel twice.
if "$here/package-kernel.sh" --config "$kdir/.config" --reuse-tree "$kdir" --deb "$work/kernel" \
     > "$work/kernel.txt" 2> "$work/package-kernel.log"; then
  ok "kernel_packages ($(xargs -n1 basename < "$work/kernel.txt" | tr '\n' ' '))"
else
  bad kernel_packages "ci/package-kernel.sh failed: $(tail -n 5 "$work/package-kernel.log")"; finish
fi
image=$(ls "$work"/kernel/linux-image-*_amd64.deb 2>/dev/null | grep -v -- '-dbg_' | head -n 1)
headers=$(ls "$work"/kernel/linux-headers-*_amd64.deb 2>/dev/null | head -n 1)
[ -n "$image" ] && [ -n "$headers" ] || { bad kernel_packages "no linux-image or linux-headers package"; finish; }
# The listing first: grep -q on dpkg-deb's pipe would end it early (SIGPIPE, a failure under pipefail).
listing=$(dpkg-deb -c "$headers")
if grep -q '/rust/libkernel.rmeta$' <<<"$listing" && grep -q '/rust/libmacros.so$' <<<"$listing"; then
  ok headers_rust_artefacts
else
  bad headers_rust_artefacts "$(basename "$headers") lacks rust/libkernel.rmeta or rust/libmacros.so"
fi
if moddeb=$("$here/package-module.sh" --headers-deb "$headers" --deb "$work/module" 2> "$work/package-module.log"); then
  ok "module_package ($(basename "$moddeb"))"
else
  bad module_package "ci/package-module.sh failed: $(tail -n 5 "$work/package-module.log")"; finish
fi
modroot=$work/module-root
dpkg-deb -x "$moddeb" "$modroot"
ko=$(ls "$modroot"/lib/modules/*/updates/tcp_mltcp.ko 2>/dev/null | head -n 1)
if [ -n "$ko" ] && [ -f "$modroot/etc/modules-load.d/tcp_mltcp.conf" ] && [ -f "$modroot/etc/modprobe.d/tcp_mltcp.conf" ] \
   && [ -f "$modroot/etc/sysctl.d/60-mltcp.conf" ]; then
  ok module_package_files
else
  bad module_package_files "the module package lacks tcp_mltcp.ko or its modules-load.d/modprobe.d/sysctl.d files"; finish
fi

# --- 3b. the DKMS package, built by dkms against the same headers package ---
# A real `dkms build` and `dkms install`, in scratch trees (--dkmstree, --sourcetree, --installtree,
# --kernelsourcedir, --no-depmod): the host's /var/lib/dkms and /lib/modules stay as they were
# (checked). Not run: the package's postinst/prerm (dpkg would run them on the host's trees).
dkms_check() {
  local deb droot dtree inst hroot ksrc release version out ko want st
  deb=$("$here/package-module.sh" --dkms --deb "$work/dkms" 2> "$work/package-dkms.log") \
    || { bad dkms_package "ci/package-module.sh --dkms failed: $(tail -n 5 "$work/package-dkms.log")"; return; }
  droot=$work/dkms-root dtree=$work/dkms-tree inst=$work/dkms-root/lib/modules hroot=$work/dkms-headers
  dpkg-deb -x "$deb" "$droot"
  version=$(dpkg-deb -f "$deb" Version)
  local src=$droot/usr/src/tcp-mltcp-$version
  if [ -f "$src/dkms.conf" ] && grep -q '^AUTOINSTALL="yes"$' "$src/dkms.conf" && [ -f "$src/Kbuild" ] \
     && [ -f "$droot/etc/modules-load.d/tcp_mltcp.conf" ] && [ -f "$droot/etc/modprobe.d/tcp_mltcp.conf" ] \
     && [ -f "$droot/etc/sysctl.d/60-mltcp.conf" ]; then
    ok "dkms_package ($(basename "$deb"))"
  else
    bad dkms_package "$(basename "$deb") lacks usr/src/tcp-mltcp-$version/dkms.conf (AUTOINSTALL=yes), the sources or the /etc snippets"; return
  fi
  dpkg-deb -x "$headers" "$hroot"
  ksrc=$(ls -d "$hroot"/usr/src/linux-headers-* | head -n 1)
  release=$(cat "$ksrc/include/config/kernel.release")
  mkdir -p "$dtree" "$inst/$release"
  local host_before host_after
  host_before=$(ls -laR /var/lib/dkms /lib/modules 2>&1 | sha256sum)
  local opts=(-m tcp-mltcp -v "$version" --dkmstree "$dtree" --sourcetree "$droot/usr/src"
              --installtree "$inst" --kernelsourcedir "$ksrc" --no-depmod)
  if out=$(dkms build "${opts[@]}" -k "$release" 2>&1) \
     && out=$(dkms install "${opts[@]}" -k "$release" 2>&1); then
    ko=$inst/$release/updates/dkms/tcp_mltcp.ko
    want=$(modinfo -F vermagic "$modroot/lib/modules/$release/updates/tcp_mltcp.ko" 2>/dev/null)
    st=$(dkms status -m tcp-mltcp -v "$version" --dkmstree "$dtree" --installtree "$inst" 2>&1)
    if [ -f "$ko" ] && [ "$(modinfo -F vermagic "$ko")" = "$want" ] && [[ "$want" == "$release "* ]] \
       && [[ "$st" == *"$release"*": installed"* ]] && depmod -b "$droot" "$release" 2>/dev/null \
       && grep -q '^updates/dkms/tcp_mltcp.ko:' "$inst/$release/modules.dep"; then
      ok "dkms_build_install (kernel $release, vermagic '${want% }' as the .deb's module, depmod finds it)"
    else
      bad dkms_build_install "after dkms install: module ${ko#"$work"/} vermagic '$(modinfo -F vermagic "$ko" 2>&1)' (want '$want'), status '$st'"
    fi
  else
    bad dkms_build_install "dkms failed: $(tail -n 8 <<<"$out") $(tail -n 5 "$dtree"/tcp-mltcp/"$version"/build/make.log 2>/dev/null)"
  fi
  # A distribution kernel (another suffix): dkms skips it (BUILD_EXCLUSIVE_KERNEL, exit 77), as
  # autoinstall does for the host's other kernels, instead of failing the package's installation.
  dkms build "${opts[@]}" -k "${release%-mltcp}-other" > "$work/dkms-other.log" 2>&1
  st=$?
  if [ "$st" = 77 ]; then ok "dkms_skips_other_kernels (${release%-mltcp}-other: exit 77)"
  else bad dkms_skips_other_kernels "dkms build for ${release%-mltcp}-other exited $st, not 77: $(tail -n 3 "$work/dkms-other.log")"; fi
  if out=$(dkms remove "${opts[@]}" --all 2>&1) && [ ! -e "$inst/$release/updates/dkms/tcp_mltcp.ko" ]; then
    ok dkms_remove
  else
    bad dkms_remove "the module is still installed after dkms remove --all: $(tail -n 3 <<<"$out")"
  fi
  host_after=$(ls -laR /var/lib/dkms /lib/modules 2>&1 | sha256sum)
  if [ "$host_before" = "$host_after" ]; then ok dkms_host_untouched
  else bad dkms_host_untouched "the host's /var/lib/dkms or /lib/modules changed during the DKMS check"; fi
  rm -rf "$hroot"
}
dkms_check

# --- 4. boot the packaged kernel with the packaged module ---
"$here/vm-run" --results "$work/vm" --timeout 600 --kernel-deb "$image" --module "$ko" \
  "$here/vm-tests/packaged.sh" > "$work/vm.log" 2>&1
vm_status=$?
cat "$work/vm.log" | grep -aE '^(ok|FAIL) ' || true
line=$(tr -d '\r' < "$work/vm.log" | grep -aE '^[0-9]+ passed, [0-9]+ failed' | tail -n 1)
if [ -n "$line" ]; then
  read -r p _ f _ <<<"$line"
  passed=$((passed + p)) failed=$((failed + f))
  [ "$vm_status" = 0 ] || [ "$f" != 0 ] || bad packaged_vm "ci/vm-run exited with $vm_status"
else
  bad packaged_vm "the VM with the packaged kernel reported nothing (exit $vm_status): $(tail -n 5 "$work/vm.log")"
fi
finish
