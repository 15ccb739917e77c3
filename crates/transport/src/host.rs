//! Host identity.
//!
//! Contract: two processes get equal [`HostId`]s iff they run under the same
//! kernel boot (`/proc/sys/kernel/random/boot_id`) and in the same network
//! namespace (inode of `/proc/self/ns/net`). Equal ids mean the processes can
//! share memory and reach each other's loopback addresses. The hostname is
//! never used (`ip netns exec` keeps it while changing the network).

use std::os::unix::fs::MetadataExt;

/// Identity of the host (kernel instance + network namespace) a process runs on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostId {
    /// Kernel boot id (a UUID string, trimmed).
    pub boot_id: String,
    /// Inode number of the process's network namespace.
    pub netns_ino: u64,
}

impl HostId {
    /// Reads the identity of the calling process's host.
    pub fn current() -> std::io::Result<HostId> {
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map_err(|e| annotate(e, "reading /proc/sys/kernel/random/boot_id"))?
            .trim()
            .to_string();
        if boot_id.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "/proc/sys/kernel/random/boot_id is empty",
            ));
        }
        let netns_ino = std::fs::metadata("/proc/self/ns/net")
            .map_err(|e| annotate(e, "stat /proc/self/ns/net"))?
            .ino();
        Ok(HostId { boot_id, netns_ino })
    }
}

fn annotate(e: std::io::Error, what: &str) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{what}: {e}"))
}
