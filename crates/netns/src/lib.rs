//! Test hosts as Linux network namespaces on a private bridge, for tests anywhere in the
//! workspace and the job manager's emulated nodes (it shells out to iproute2's `ip`).
//!
//! Contract:
//! * [`TestNet::create`]`(n)` makes a bridge in the root namespace and `n` namespaces, each
//!   with `lo` up and a veth (`veth0`, MTU 1500) attached to the bridge, addresses in a
//!   private /24 of 10.100.0.0–10.199.255.0 that no interface of the root namespace uses
//!   yet (bridge `.1`, namespace `i` → `.10+i`), and a multicast route `224.0.0.0/4 dev
//!   veth0`. Namespaces have no default route: they reach each other and the bridge
//!   address, nothing else. Bridge multicast snooping is off (multicast is flooded to all
//!   ports).
//! * Names are unique per process and call (`phxt-<pid>-<n>-<i>` for namespaces,
//!   `pxb<pid:06x><n:02x>` / `pxv<pid:06x><n:02x><i:02x>` for links, ≤ 15 characters).
//!   Leftovers of killed runs (names of processes that no longer exist) are deleted
//!   first; the choice of subnet is serialized between processes with a lock file.
//! * `Drop` deletes the namespaces (their veths go with them) and the bridge — also when
//!   the test panics. A run killed with SIGKILL leaves them for the next run to collect.
//! * [`TestNet::create_cluster`]`(tag, n)` makes the same shape under names of its own
//!   (`phxg-TAG-i`) that outlive the process: the job manager's emulated nodes
//!   (`phalanx gang up --netns`), removed by [`TestNet::remove_cluster`]`(tag)`.
//! * [`TestNet::available`] says why namespaces cannot be made (not root, no `ip`, `ip
//!   netns add` fails). `create` fails with that reason: tests must propagate it as a
//!   failure (`expect`), never skip silently.

mod ssh;
pub use ssh::SshNet;

use std::fs::File;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Prefix of every namespace this crate creates.
pub const NS_PREFIX: &str = "phxt-";
/// Name of the veth inside each namespace.
pub const NS_IFNAME: &str = "veth0";
const BRIDGE_PREFIX: &str = "pxb";
const VETH_PREFIX: &str = "pxv";
/// Prefix of the namespaces of [`TestNet::create_cluster`].
pub const CLUSTER_PREFIX: &str = "phxg-";
const LOCK_PATH: &str = "/run/phalanx-netns.lock";
/// Most namespaces one [`TestNet`] can hold (addresses .10 to .249).
pub const MAX_HOSTS: usize = 240;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A bridge and `n` network namespaces on it. See the crate docs.
#[derive(Debug)]
pub struct TestNet {
    /// Kept when dropped (a cluster's).
    persistent: bool,
    bridge: String,
    names: Vec<String>,
    ips: Vec<Ipv4Addr>,
    bridge_ip: Ipv4Addr,
}

impl TestNet {
    /// `Ok(())` if namespaces can be created here, else why not.
    pub fn available() -> Result<(), String> {
        // SAFETY: geteuid has no preconditions and touches no memory.
        if unsafe { libc::geteuid() } != 0 {
            return Err(
                "network-namespace tests need root (CAP_NET_ADMIN and CAP_SYS_ADMIN)".into(),
            );
        }
        ip(&["-V"]).map_err(|e| format!("network-namespace tests need iproute2's `ip`: {e}"))?;
        let probe = format!(
            "{NS_PREFIX}{}-probe{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        ip(&["netns", "add", &probe])
            .map_err(|e| format!("`ip netns add` does not work here: {e}"))?;
        ip(&["netns", "del", &probe])
            .map_err(|e| format!("`ip netns del` does not work here: {e}"))?;
        Ok(())
    }

    /// Creates the bridge and `n` namespaces (1 ≤ n ≤ [`MAX_HOSTS`]).
    pub fn create(n: usize) -> io::Result<TestNet> {
        check_count(n)?;
        cleanup_stale();
        let pid = std::process::id();
        let call = COUNTER.fetch_add(1, Ordering::Relaxed);
        let bridge = format!("{BRIDGE_PREFIX}{:06x}{:02x}", pid & 0xff_ffff, call & 0xff);
        let names: Vec<String> = (0..n)
            .map(|i| format!("{NS_PREFIX}{pid}-{call}-{i}"))
            .collect();
        let veths: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    "{VETH_PREFIX}{:06x}{:02x}{:02x}",
                    pid & 0xff_ffff,
                    call & 0xff,
                    i
                )
            })
            .collect();
        build(bridge, names, veths, pid.wrapping_add(call), false)
    }

    /// The namespaces of a long-lived cluster (the job manager's emulated nodes):
    /// `phxg-TAG-i`, bridge `pxgTAGb`, veths `pxgTAGvII` (`tag`: 1 to 6 characters of
    /// `[a-z0-9]`). They are not collected as stale and not deleted on drop: they last
    /// until [`TestNet::remove_cluster`]`(tag)`. Leftovers of the same tag are removed
    /// first.
    pub fn create_cluster(tag: &str, n: usize) -> io::Result<TestNet> {
        check_count(n)?;
        if tag.is_empty()
            || tag.len() > 6
            || !tag
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cluster tag {tag:?}: 1 to 6 characters of [a-z0-9]"),
            ));
        }
        TestNet::remove_cluster(tag);
        let names = (0..n)
            .map(|i| format!("{CLUSTER_PREFIX}{tag}-{i}"))
            .collect();
        let veths = (0..n).map(|i| format!("pxg{tag}v{i:02x}")).collect();
        let seed = tag.bytes().fold(0u32, |h, b| h.wrapping_mul(31) ^ b as u32);
        build(format!("pxg{tag}b"), names, veths, seed, true)
    }

    /// Deletes the namespaces and bridge of cluster `tag` (see
    /// [`create_cluster`](TestNet::create_cluster)); what does not exist is skipped.
    pub fn remove_cluster(tag: &str) {
        let prefix = format!("{CLUSTER_PREFIX}{tag}-");
        if let Ok(list) = ip(&["netns", "list"]) {
            for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
                if name
                    .strip_prefix(&prefix)
                    .is_some_and(|i| i.parse::<u32>().is_ok())
                {
                    let _ = ip(&["netns", "del", name]);
                }
            }
        }
        let _ = ip(&["link", "del", &format!("pxg{tag}b")]);
        // A veth goes with its namespace, but asynchronously: delete them now.
        if let Ok(list) = ip(&["-o", "link", "show"]) {
            let veth = format!("pxg{tag}v");
            for line in list.lines() {
                let name = line.split(':').nth(1).map(str::trim).unwrap_or_default();
                let name = name.split('@').next().unwrap_or(name);
                if name.starts_with(&veth) {
                    let _ = ip(&["link", "del", name]);
                }
            }
        }
    }

    /// The namespaces' names (for `ip netns exec NAME …`), index = host.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Each namespace's address on the bridge, index = host.
    pub fn ips(&self) -> &[Ipv4Addr] {
        &self.ips
    }

    /// The bridge's address in the root namespace (reachable from every namespace).
    pub fn bridge_ip(&self) -> Ipv4Addr {
        self.bridge_ip
    }

    /// The bridge's interface name in the root namespace.
    pub fn bridge(&self) -> &str {
        &self.bridge
    }

    /// A command that runs `prog` inside namespace `i` (`ip netns exec NAME prog`).
    pub fn command(&self, i: usize, prog: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.names[i]]).arg(prog);
        c
    }

    /// Runs `f` on a thread that has entered namespace `i`: sockets it creates live in
    /// that namespace (and stay there when moved to other threads).
    pub fn in_netns<R: Send>(&self, i: usize, f: impl FnOnce() -> R + Send) -> io::Result<R> {
        let file = File::open(format!("/run/netns/{}", self.names[i]))?;
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: setns on an open namespace file changes only this thread's
                // network namespace; no memory is involved.
                if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(f())
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }
}

impl Drop for TestNet {
    fn drop(&mut self) {
        if self.persistent {
            return;
        }
        for name in &self.names {
            if let Err(e) = ip(&["netns", "del", name]) {
                eprintln!("phalanx-netns: cannot delete namespace {name}: {e}");
            }
        }
        if let Err(e) = ip(&["link", "del", &self.bridge]) {
            eprintln!("phalanx-netns: cannot delete bridge {}: {e}", self.bridge);
        }
    }
}

fn check_count(n: usize) -> io::Result<()> {
    if n == 0 || n > MAX_HOSTS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("TestNet: between 1 and {MAX_HOSTS} namespaces, not {n}"),
        ));
    }
    TestNet::available().map_err(|why| {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("cannot create test network namespaces: {why}"),
        )
    })
}

/// Makes the bridge and the namespaces with these names (module docs); `seed` picks
/// where the search for a free /24 starts.
fn build(
    bridge: String,
    names: Vec<String>,
    veths: Vec<String>,
    seed: u32,
    persistent: bool,
) -> io::Result<TestNet> {
    // Same names from a dead process that had our pid: they are stale.
    for name in &names {
        let _ = ip(&["netns", "del", name]);
    }
    let _ = ip(&["link", "del", &bridge]);

    let lock = lock_file()?;
    let base = choose_subnet(seed, 0)?;
    let host = |last: u8| {
        let o = base.octets();
        Ipv4Addr::new(o[0], o[1], o[2], last)
    };
    // Not persistent until complete: an error drops it and cleans up.
    let mut net = TestNet {
        persistent: false,
        bridge: bridge.clone(),
        names: Vec::new(),
        ips: Vec::new(),
        bridge_ip: host(1),
    };
    ip(&[
        "link",
        "add",
        &bridge,
        "type",
        "bridge",
        "mcast_snooping",
        "0",
    ])?;
    ip(&["addr", "add", &format!("{}/24", host(1)), "dev", &bridge])?;
    ip(&["link", "set", &bridge, "up"])?;
    drop(lock);
    for (i, (name, veth)) in names.iter().zip(&veths).enumerate() {
        let addr = host(10 + i as u8);
        ip(&["netns", "add", name])?;
        net.names.push(name.clone());
        ip(&[
            "link", "add", veth, "type", "veth", "peer", "name", NS_IFNAME, "netns", name,
        ])?;
        ip(&["link", "set", veth, "mtu", "1500", "master", &bridge, "up"])?;
        let nsip = |args: &[&str]| {
            let mut v = vec!["-n", name.as_str()];
            v.extend_from_slice(args);
            ip(&v)
        };
        nsip(&["link", "set", "lo", "up"])?;
        nsip(&["link", "set", NS_IFNAME, "mtu", "1500", "up"])?;
        nsip(&["addr", "add", &format!("{addr}/24"), "dev", NS_IFNAME])?;
        nsip(&["route", "add", "224.0.0.0/4", "dev", NS_IFNAME])?;
        net.ips.push(addr);
    }
    net.persistent = persistent;
    Ok(net)
}

/// Runs `ip args…`; an error carries the command and its stderr.
fn ip(args: &[&str]) -> io::Result<String> {
    let out = Command::new("ip").args(args).output()?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(io::Error::other(format!(
            "`ip {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// An exclusive lock on [`LOCK_PATH`], held until dropped.
fn lock_file() -> io::Result<File> {
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOCK_PATH)?;
    // SAFETY: flock on an open file descriptor; no memory is involved.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(f)
}

/// A /24 (as its .0 address) in 10.100.0.0–10.199.255.0 that no root-namespace interface
/// address falls into, starting from one derived from `pid` and `call`.
fn choose_subnet(pid: u32, call: u32) -> io::Result<Ipv4Addr> {
    let used: Vec<[u8; 3]> = ip(&["-4", "-o", "addr", "show"])?
        .lines()
        .filter_map(|l| {
            let w = l.split_whitespace().skip_while(|w| *w != "inet").nth(1)?;
            let a: Ipv4Addr = w.split('/').next()?.parse().ok()?;
            let o = a.octets();
            Some([o[0], o[1], o[2]])
        })
        .collect();
    let start = (pid % 100) * 256 + (call % 256);
    (0..100 * 256)
        .map(|k| (start + k) % (100 * 256))
        .map(|s| [10u8, 100 + (s / 256) as u8, (s % 256) as u8])
        .find(|o| !used.contains(o))
        .map(|o| Ipv4Addr::new(o[0], o[1], o[2], 0))
        .ok_or_else(|| io::Error::other("no free /24 in 10.100.0.0/14.. for a test network"))
}

fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Deletes namespaces and links of this crate's naming scheme whose process is gone.
fn cleanup_stale() {
    let me = std::process::id();
    if let Ok(list) = ip(&["netns", "list"]) {
        for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
            let Some(rest) = name.strip_prefix(NS_PREFIX) else {
                continue;
            };
            let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
            if pid.is_some_and(|p| p != me && !pid_alive(p)) {
                let _ = ip(&["netns", "del", name]);
            }
        }
    }
    if let Ok(list) = ip(&["-o", "link", "show"]) {
        for line in list.lines() {
            let Some(name) = line.split(':').nth(1).map(str::trim) else {
                continue;
            };
            let name = name.split('@').next().unwrap_or(name);
            let hex = name
                .strip_prefix(BRIDGE_PREFIX)
                .or_else(|| name.strip_prefix(VETH_PREFIX))
                .and_then(|r| r.get(..6));
            let pid = hex.and_then(|h| u32::from_str_radix(h, 16).ok());
            if pid.is_some_and(|p| p != me & 0xff_ffff && !pid_alive(p)) {
                let _ = ip(&["link", "del", name]);
            }
        }
    }
}
