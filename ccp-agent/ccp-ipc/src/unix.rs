// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! portus's unix-datagram IPC with a pollable descriptor.
//!
//! Same addressing as `portus::ipc::unix::Socket`: the agent binds `/tmp/ccp/<name>` and answers
//! each datapath at the path it sent from. Used with the user-space datapath of the tests
//! (the `ccp-datapath` core over a unix socket).

use portus::ipc::Ipc;
use portus::{Error, Result};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};

/// Directory of the agents' sockets (portus's convention).
pub const SOCKET_DIR: &str = "/tmp/ccp";

/// A unix datagram socket bound at `/tmp/ccp/<name>`.
pub struct UnixIpc {
    sock: UnixDatagram,
    path: PathBuf,
}

impl UnixIpc {
    /// Binds `/tmp/ccp/<name>` (creating the directory, replacing a stale socket file) with a
    /// 1 s receive timeout. Errors: the name contains '/', or the bind fails.
    pub fn bind(name: &str) -> Result<Self> {
        if name.is_empty() || name.contains('/') {
            return Err(Error(format!(
                "unix socket name {name:?}: must be non-empty and without '/'"
            )));
        }
        std::fs::create_dir_all(SOCKET_DIR)
            .map_err(|e| Error(format!("creating {SOCKET_DIR}: {e}")))?;
        let path = Path::new(SOCKET_DIR).join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error(format!("removing stale {}: {e}", path.display()))),
        }
        let sock = UnixDatagram::bind(&path)
            .map_err(|e| Error(format!("binding {}: {e}", path.display())))?;
        sock.set_read_timeout(Some(std::time::Duration::from_secs(1)))
            .map_err(|e| Error(format!("SO_RCVTIMEO on {}: {e}", path.display())))?;
        Ok(Self { sock, path })
    }

    /// The bound path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl AsFd for UnixIpc {
    /// The socket's descriptor (to poll it; it stays owned by `self`).
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

impl Ipc for UnixIpc {
    type Addr = PathBuf;

    fn name() -> String {
        String::from("unix")
    }

    fn send(&self, msg: &[u8], to: &PathBuf) -> Result<()> {
        self.sock.send_to(msg, to).map(|_| ()).map_err(Error::from)
    }

    fn recv(&self, buf: &mut [u8]) -> Result<(usize, PathBuf)> {
        let (n, addr) = self.sock.recv_from(buf).map_err(Error::from)?;
        match addr.as_pathname() {
            Some(p) => Ok((n, p.to_path_buf())),
            None => Err(Error(String::from(
                "datagram from an unbound socket: no address to answer",
            ))),
        }
    }

    fn close(&mut self) -> Result<()> {
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
        let _ = std::fs::remove_file(&self.path);
        Ok(())
    }
}

impl Drop for UnixIpc {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
