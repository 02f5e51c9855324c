// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Helpers shared by the integration tests: a private region directory per test.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// `<tmp>/mltcp-progress-<name>-<pid>`, emptied first.
    pub fn new(name: &str) -> Self {
        let d = std::env::temp_dir().join(format!("mltcp-progress-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("create test dir");
        TempDir(d)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writer options for `dir` with `max_flows` slots.
pub fn opts(dir: &Path, max_flows: u32) -> mltcp_progress::WriterOptions {
    mltcp_progress::WriterOptions {
        dir: Some(dir.to_path_buf()),
        max_flows,
    }
}
