// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The traffic classes installed for real: inside a user + network namespace (`unshare -rn`, no
//! root needed where unprivileged user namespaces are allowed), a veth with the testbed's tbf
//! gets the classes over rtnetlink ([`ecn_qdisc::QdiscChanger::install_classes`]), and `tc`
//! shows what the kernel took. A second installation replaces the first (a restarted daemon);
//! a qdisc of someone else's under the parent is left alone (the installation fails).
//!
//! The test re-runs its own binary under `unshare -rn` (the namespace must be entered before
//! any thread of the test harness opens a socket). It is skipped, saying why, only when `unshare
//! -rn true` fails; once the namespace is there every failure fails the test. A kernel without
//! the prio qdisc (`CONFIG_NET_SCH_PRIO` unset: "Specified qdisc kind is unknown" from `tc`)
//! cannot take the whole tree: then the test checks that everything before the prio is
//! installed and that the error names the prio request and the kernel's ENOENT.

use ecn_qdisc::classes::ClassesSpec;
use ecn_qdisc::QdiscChanger;
use std::process::Command;
use std::time::Duration;

/// Set in the re-run inside the namespace.
const INSIDE: &str = "ECN_QDISC_CLASSES_TEST_IN_NETNS";
const TEST: &str = "classes_install_on_a_veth_in_a_user_and_net_namespace";

#[test]
fn classes_install_on_a_veth_in_a_user_and_net_namespace() {
    if std::env::var_os(INSIDE).is_some() {
        inside();
        return;
    }
    match Command::new("unshare").args(["-rn", "true"]).output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            println!(
                "SKIPPED: unprivileged user + network namespaces are unavailable here (`unshare -rn true`: {}, {})",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return;
        }
        Err(e) => {
            println!("SKIPPED: cannot run `unshare -rn true`: {e}");
            return;
        }
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new("unshare")
        .arg("-rn")
        .arg(&exe)
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(INSIDE, "1")
        .output()
        .expect("running the test under unshare -rn");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(out.status.success(), "the test inside the namespace failed");
    assert!(
        stdout.contains("1 passed"),
        "the test did not run inside the namespace"
    );
}

/// Runs `cmd` (split on spaces), returns its stdout; panics naming it and its stderr on failure.
fn sh(cmd: &str) -> String {
    let w: Vec<&str> = cmd.split_whitespace().collect();
    let o = Command::new(w[0])
        .args(&w[1..])
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        o.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn inside() {
    sh("ip link add t-sw0 type veth peer name t-sw1");
    sh("tc qdisc add dev t-sw0 root handle 10: tbf rate 100000kbit burst 64000 latency 5000us");
    let has_prio = Command::new("tc")
        .args([
            "qdisc", "add", "dev", "t-sw1", "root", "handle", "1:", "prio",
        ])
        .output()
        .expect("running tc")
        .status
        .success();
    let parent = ecn_qdisc::parse_handle("10:1").expect("a handle");
    let spec = ClassesSpec::new(parent, vec![34, 26], 100_000, 126_500).expect("a valid spec");
    let mut c = QdiscChanger::new(Duration::from_secs(2));
    // A qdisc already under the parent is not replaced: EEXIST, naming the HTB request.
    sh("tc qdisc add dev t-sw0 parent 10:1 handle 20: bfifo limit 1000");
    let e = c
        .install_classes(&None, "t-sw0", &spec)
        .expect_err("replaced the bfifo under 10:1")
        .to_string();
    assert!(
        e.contains("dev t-sw0")
            && e.contains("RTM_NEWQDISC htb 30: parent 10:1")
            && e.contains("os error 17"),
        "{e}"
    );
    assert!(sh("tc qdisc show dev t-sw0").contains("qdisc bfifo 20: parent 10:1"));
    sh("tc qdisc del dev t-sw0 parent 10:1 handle 20:");
    for round in 0..2 {
        let r = c.install_classes(&None, "t-sw0", &spec);
        let qdiscs = sh("tc -s qdisc show dev t-sw0");
        let classes = sh("tc -d class show dev t-sw0");
        let filters = sh("tc filter show dev t-sw0 parent 30:");
        println!("round {round}: {r:?}\n{qdiscs}{classes}{filters}");
        for want in [
            "qdisc tbf 10: root",
            "qdisc htb 30: parent 10:1 r2q 10 default 0x20",
            "qdisc bfifo 40: parent 30:20 limit 126500b",
        ] {
            assert!(qdiscs.contains(want), "no {want:?} in\n{qdiscs}");
        }
        for want in [
            "class htb 30:1 root rate 200Mbit ceil 200Mbit",
            "class htb 30:10 parent 30:1 prio 0 quantum 1514 rate 100Mbit ceil 200Mbit linklayer ethernet burst 1600b",
            "class htb 30:20 parent 30:1 leaf 40: prio 0 quantum 1514 rate 100Mbit ceil 200Mbit linklayer ethernet burst 1600b",
        ] {
            assert!(classes.contains(want), "no {want:?} in\n{classes}");
        }
        // Exactly the two filters of this round: the first round's went with its HTB.
        for (tos, n) in [("00880000/00fc0000", 1), ("00680000/00fc0000", 1)] {
            assert_eq!(filters.matches(tos).count(), n, "{tos} in\n{filters}");
        }
        assert_eq!(filters.matches("flowid 30:10").count(), 2, "{filters}");
        if has_prio {
            let done = r.expect("installing the classes");
            assert_eq!(done.replaced.is_some(), round == 1, "{done:?}");
            for want in [
                "qdisc prio 31: parent 30:10 bands 2",
                "qdisc bfifo 51: parent 31:1 limit 126500b",
                "qdisc bfifo 52: parent 31:2 limit 126500b",
            ] {
                assert!(qdiscs.contains(want), "no {want:?} in\n{qdiscs}");
            }
            let prio = sh("tc filter show dev t-sw0 parent 31:");
            assert!(
                prio.contains("flowid 31:1") && prio.contains("flowid 31:2"),
                "{prio}"
            );
            assert_eq!(prio.matches("00880000/00fc0000").count(), 1, "{prio}");
        } else {
            println!("this kernel has no prio qdisc: checked the tree up to the prio");
            let e = r
                .expect_err("no prio, yet the classes installed")
                .to_string();
            assert!(
                e.contains("dev t-sw0")
                    && e.contains("RTM_NEWQDISC prio 31: parent 30:10 bands 2")
                    && e.contains("os error 2"),
                "{e}"
            );
        }
    }
}
