// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Pins the one table of module parameters (`mltcp_math::params::PARAMS`) to the places that
//! cannot read it: the `module_param!` names of the kernel module (`kmod/tcp_mltcp.rs`, whose
//! macro needs literal names) and the parameter table of the documentation.

use mltcp_math::params::{write_markdown_table, PARAMS};

/// The kernel module's source (not a Cargo crate: read as text).
const MODULE_SRC: &str = include_str!("../../tcp_mltcp.rs");

/// The documentation holding the module's parameter table, under its `## Parameters` heading.
const DOC: &str = include_str!("../../../docs/module.md");

/// [`write_markdown_table`] into a `String`.
fn markdown_table() -> String {
    let mut s = String::new();
    write_markdown_table(&mut s).expect("writing to a String cannot fail");
    s
}

/// The `name: "..."` of every `module_param!` invocation of `src`.
fn module_param_names(src: &str) -> Vec<&str> {
    src.split("module_param!(")
        .skip(1)
        .map(|inv| {
            let at = inv.find("name: \"").expect("module_param! without a name") + 7;
            let len = inv[at..].find('"').expect("unterminated name");
            &inv[at..at + len]
        })
        .collect()
}

#[test]
fn every_table_name_is_a_module_param_and_back() {
    let names = module_param_names(MODULE_SRC);
    assert!(
        !names.is_empty(),
        "no module_param! found in kmod/tcp_mltcp.rs"
    );
    for p in PARAMS {
        assert!(
            names.contains(&p.name),
            "{} is in PARAMS but not a module_param! of kmod/tcp_mltcp.rs",
            p.name
        );
    }
    for n in &names {
        assert!(
            PARAMS.iter().any(|p| p.name == *n),
            "module parameter {n} of kmod/tcp_mltcp.rs is missing from PARAMS"
        );
    }
    assert_eq!(
        names.len(),
        PARAMS.len(),
        "a module parameter declared twice"
    );
}

#[test]
fn the_documented_table_is_the_generated_one() {
    let section = DOC
        .split("\n## Parameters\n")
        .nth(1)
        .expect("docs/module.md has no '## Parameters' section");
    let table: String = section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .map(|l| format!("{l}\n"))
        .collect();
    let want = markdown_table();
    assert_eq!(
        table, want,
        "docs/module.md's '## Parameters' table differs from mltcp_math::params::PARAMS; replace it with:\n{want}"
    );
}
