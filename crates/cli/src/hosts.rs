//! Where ranks run: hostfiles, placement, and the launcher address each host can reach.
//!
//! Contract:
//! * A hostfile has one host per line, in the conventions of Open MPI and Hydra: `NAME`,
//!   `NAME slots=N` or `NAME:N` (`max_slots=M` is accepted and not used); `slots`
//!   defaults to 1; `#` starts a comment; blank lines are ignored. NAME is
//!   - `localhost`: this machine (started by the launcher itself);
//!   - `netns:NAME`: a Linux network namespace on this machine, as made by `ip netns add`;
//!   - `node:LABEL@IP:PORT`: a node daemon of the job manager (`phalanx gang node`) whose
//!     agent listens on IP:PORT: its ranks are started by that daemon (see
//!     [`crate::agents`]), and the launcher needs the cluster secret (`--agent-secret`);
//!   - anything else, `[USER@]HOST` (letters, digits, `.`, `-`, `_`; not starting with
//!     `-`): a host reached over ssh, whose ranks a `phalanx proxy` started there starts
//!     (see [`crate::agents`], [`crate::proxy`]).
//!
//!   A bad line is an error naming it.
//! * [`place`] fills hosts in file order, `slots` ranks each. More ranks than slots is an
//!   error unless oversubscription is allowed; then it wraps around.
//! * Ranks in a namespace are started as `ip netns exec NAME prog args…` (which execs the
//!   program: the pid the launcher knows is the rank's) with `PHALANX_IP=auto`, and find
//!   the launcher at [`boot_ip_for`]: the root-namespace address on the namespace's subnet
//!   (e.g. the bridge it hangs off), unless `--boot-ip` says otherwise. Ranks on ssh
//!   hosts find it at the address this machine sends from toward that host
//!   ([`source_ip_toward`]), unless `--boot-ip` says otherwise.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::Command;

/// One host of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// This machine, this network namespace.
    Local,
    /// A network namespace on this machine.
    Netns(String),
    /// A node daemon's agent: ranks there are started by it.
    Node { label: String, agent: SocketAddrV4 },
    /// A host reached over ssh (`[USER@]HOST`): ranks there are started by the
    /// `phalanx proxy` ssh starts on it.
    Ssh(String),
}

/// Whether `name` is a `[USER@]HOST` an ssh command line can take safely (no option,
/// no shell syntax).
fn valid_ssh_target(name: &str) -> bool {
    let ok_part = |p: &str| {
        !p.is_empty()
            && !p.starts_with('-')
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    };
    match name.split_once('@') {
        Some((user, host)) => ok_part(user) && ok_part(host),
        None => ok_part(name),
    }
}

/// The host part of an ssh target (`user@host` → `host`).
pub fn ssh_host_part(target: &str) -> &str {
    target.rsplit_once('@').map_or(target, |(_, h)| h)
}

/// A hostfile line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEntry {
    /// The host.
    pub host: Host,
    /// Ranks it takes before the next host's turn.
    pub slots: u32,
}

/// Parses a hostfile (module docs). `Err` names the line.
pub fn parse_hostfile(text: &str) -> Result<Vec<HostEntry>, String> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |why: &str| format!("hostfile line {}: {why}: {raw:?}", i + 1);
        let mut words = line.split_whitespace();
        let mut name = words.next().unwrap_or_default();
        let mut slots = 1;
        // Hydra's `NAME:N` (a node agent's `IP:PORT` is not a slot count).
        if !name.starts_with("node:") {
            if let Some((n, count)) = name.rsplit_once(':') {
                if !n.is_empty() && !n.ends_with(':') && n != "netns" {
                    match count.parse::<u32>() {
                        Ok(c) if c > 0 => (name, slots) = (n, c),
                        _ => return Err(bad("expected `NAME:N` with N ≥ 1 slots")),
                    }
                }
            }
        }
        let host = if name == "localhost" {
            Host::Local
        } else if let Some(ns) = name.strip_prefix("netns:") {
            if ns.is_empty() || ns.contains('/') {
                return Err(bad("bad namespace name"));
            }
            Host::Netns(ns.to_string())
        } else if let Some(node) = name.strip_prefix("node:") {
            let parsed = node
                .split_once('@')
                .and_then(|(l, a)| Some((l, a.parse::<SocketAddrV4>().ok()?)));
            match parsed {
                Some((label, agent)) if !label.is_empty() => Host::Node {
                    label: label.to_string(),
                    agent,
                },
                _ => return Err(bad("expected `node:LABEL@IP:PORT`")),
            }
        } else if valid_ssh_target(name) {
            Host::Ssh(name.to_string())
        } else {
            return Err(bad(
                "expected a host name (`[USER@]HOST`: letters, digits, `.`, `-`, `_`), \
                 `localhost`, `netns:NAME` or `node:LABEL@IP:PORT`",
            ));
        };
        for w in words {
            let (key, value) = w.split_once('=').unwrap_or((w, ""));
            match (key, value.parse::<u32>()) {
                ("slots", Ok(n)) if n > 0 => slots = n,
                ("max_slots", Ok(n)) if n > 0 => {}
                ("slots" | "max_slots", _) => return Err(bad("expected `slots=N` with N ≥ 1")),
                _ => return Err(bad(&format!("unknown setting `{w}` (only slots=N)"))),
            }
        }
        out.push(HostEntry { host, slots });
    }
    if out.is_empty() {
        return Err("hostfile lists no hosts".into());
    }
    Ok(out)
}

/// Total slots of a hostfile.
pub fn total_slots(entries: &[HostEntry]) -> u32 {
    entries.iter().map(|e| e.slots).fold(0, u32::saturating_add)
}

/// The host of every rank `0..n` (module docs); `Err` for more ranks than slots unless
/// `oversubscribe`.
pub fn place(entries: &[HostEntry], n: u32, oversubscribe: bool) -> Result<Vec<Host>, String> {
    let total = total_slots(entries);
    if n > total && !oversubscribe {
        return Err(format!(
            "{n} ranks but the hostfile has only {total} slots \
             (add hosts or slots, or pass --oversubscribe)"
        ));
    }
    // Lazily: a hostfile may claim billions of slots.
    Ok(entries
        .iter()
        .flat_map(|e| std::iter::repeat_n(&e.host, e.slots as usize))
        .cycle()
        .take(n as usize)
        .cloned()
        .collect())
}

/// Ranks per CPU on this machine when `hosts` (one per rank) put more of them on it (its
/// own ranks and its test hosts') than it has `cpus`; `None` otherwise, and when `cpus` is
/// 0 (not known). Other machines' CPUs are not known here, so their ranks are not
/// counted (nor this machine's when they are started over ssh).
pub fn ranks_per_cpu(hosts: &[Host], cpus: usize) -> Option<f64> {
    let here = hosts
        .iter()
        .filter(|h| matches!(h, Host::Local | Host::Netns(_)))
        .count();
    (cpus > 0 && here > cpus).then(|| here as f64 / cpus as f64)
}

/// `(address, prefix length)` of every IPv4 address `ip -4 -o addr show` lists, except
/// loopback ones. `netns`: run inside that namespace (`ip -n NAME`).
fn ipv4_addrs(netns: Option<&str>) -> Result<Vec<(Ipv4Addr, u32)>, String> {
    let mut cmd = Command::new("ip");
    if let Some(ns) = netns {
        cmd.args(["-n", ns]);
    }
    let out = cmd
        .args(["-4", "-o", "addr", "show"])
        .output()
        .map_err(|e| format!("cannot run `ip`: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`ip{} -4 addr show` failed: {}",
            netns.map(|n| format!(" -n {n}")).unwrap_or_default(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let cidr = l.split_whitespace().skip_while(|w| *w != "inet").nth(1)?;
            let (a, len) = cidr.split_once('/')?;
            let a: Ipv4Addr = a.parse().ok()?;
            let len: u32 = len.parse().ok()?;
            (!a.is_loopback() && len <= 32).then_some((a, len))
        })
        .collect())
}

/// The local address the kernel would send from toward `dst` (a route lookup: nothing
/// is sent).
pub fn source_ip_toward(dst: std::net::IpAddr) -> std::io::Result<Ipv4Addr> {
    let s = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    s.connect((dst, 9))?;
    match s.local_addr()?.ip() {
        std::net::IpAddr::V4(ip) => Ok(ip),
        std::net::IpAddr::V6(_) => Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "IPv6 route",
        )),
    }
}

fn same_subnet(a: Ipv4Addr, b: Ipv4Addr, len: u32) -> bool {
    let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
    u32::from(a) & mask == u32::from(b) & mask
}

/// The launcher's address as seen from namespace `ns`: an address of this (root)
/// namespace inside one of the namespace's subnets.
pub fn boot_ip_for(ns: &str) -> Result<Ipv4Addr, String> {
    let theirs = ipv4_addrs(Some(ns))?;
    if theirs.is_empty() {
        return Err(format!("network namespace {ns} has no IPv4 address"));
    }
    let ours = ipv4_addrs(None)?;
    theirs
        .iter()
        .find_map(|&(t, len)| {
            ours.iter()
                .find(|&&(o, _)| o != t && same_subnet(o, t, len))
                .map(|&(o, _)| o)
        })
        .ok_or_else(|| {
            format!(
                "no address of this host is on a subnet of network namespace {ns}; \
                 pass --boot-ip with an address the namespace can reach"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_per_cpu_counts_this_machine_and_its_test_hosts() {
        let ns = |n: &str| Host::Netns(n.into());
        let ssh = Host::Ssh("far".into());
        assert_eq!(ranks_per_cpu(&[Host::Local, Host::Local], 2), None);
        assert_eq!(ranks_per_cpu(&vec![Host::Local; 8], 2), Some(4.0));
        let spread = [
            ns("a"),
            ns("a"),
            ns("b"),
            Host::Local,
            ssh.clone(),
            ssh.clone(),
        ];
        assert_eq!(ranks_per_cpu(&spread, 2), Some(2.0));
        assert_eq!(
            ranks_per_cpu(&vec![ssh; 64], 2),
            None,
            "other machines' CPUs"
        );
        assert_eq!(
            ranks_per_cpu(&vec![Host::Local; 3], 0),
            None,
            "CPUs not known"
        );
    }

    #[test]
    fn parse_and_place() {
        let text = "# test hosts\nnetns:a slots=2\n\nlocalhost   # the launcher's host\nnetns:b\n";
        let e = parse_hostfile(text).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(
            e[0],
            HostEntry {
                host: Host::Netns("a".into()),
                slots: 2
            }
        );
        assert_eq!(
            e[1],
            HostEntry {
                host: Host::Local,
                slots: 1
            }
        );
        assert_eq!(total_slots(&e), 4);
        let n = parse_hostfile("node:node2@10.1.2.3:4567 slots=2\n").unwrap();
        assert_eq!(
            n[0].host,
            Host::Node {
                label: "node2".into(),
                agent: "10.1.2.3:4567".parse().unwrap()
            }
        );
        let a = Host::Netns("a".into());
        let b = Host::Netns("b".into());
        assert_eq!(
            place(&e, 4, false).unwrap(),
            [a.clone(), a.clone(), Host::Local, b.clone()]
        );
        let huge = parse_hostfile("a slots=4000000000\nb slots=4000000000\n").unwrap();
        assert_eq!(place(&huge, 3, false).unwrap().len(), 3);
        let e5 = place(&e, 5, false).unwrap_err();
        assert!(e5.contains("only 4 slots"), "{e5}");
        assert_eq!(
            place(&e, 6, true).unwrap(),
            [a.clone(), a.clone(), Host::Local, b, a.clone(), a]
        );
    }

    #[test]
    fn open_mpi_and_hydra_lines() {
        let text = "n1 slots=4 max_slots=8\nroot@n2:2\n10.0.0.7\nnetns:x:3\nlocalhost:2\n";
        let e = parse_hostfile(text).unwrap();
        let got: Vec<(Host, u32)> = e.into_iter().map(|e| (e.host, e.slots)).collect();
        assert_eq!(
            got,
            [
                (Host::Ssh("n1".into()), 4),
                (Host::Ssh("root@n2".into()), 2),
                (Host::Ssh("10.0.0.7".into()), 1),
                (Host::Netns("x".into()), 3),
                (Host::Local, 2),
            ]
        );
        assert_eq!(ssh_host_part("root@n2"), "n2");
        assert_eq!(ssh_host_part("n1"), "n1");
    }

    #[test]
    fn parse_errors_name_the_line() {
        for (text, line) in [
            ("localhost\nnode7 slots=2 cores=4\n", 2),
            ("localhost\n-oProxyCommand=x\n", 2),
            ("a;reboot\n", 1),
            ("host$(id)\n", 1),
            ("@host\n", 1),
            ("n1:0\n", 1),
            ("n1:x\n", 1),
            ("n1 max_slots=0\n", 1),
            ("netns:x slots=0\n", 1),
            ("netns:x slots=two\n", 1),
            ("netns:\n", 1),
            ("netns:a/b\n", 1),
            ("node:n1@10.0.0.1\n", 1),
            ("node:@10.0.0.1:5\n", 1),
        ] {
            let e = parse_hostfile(text).unwrap_err();
            assert!(e.contains(&format!("line {line}")), "{text:?}: {e}");
        }
        assert!(parse_hostfile("# nothing\n").is_err());
    }

    #[test]
    fn subnets() {
        let a = Ipv4Addr::new(10, 1, 2, 1);
        assert!(same_subnet(a, Ipv4Addr::new(10, 1, 2, 200), 24));
        assert!(!same_subnet(a, Ipv4Addr::new(10, 1, 3, 1), 24));
        assert!(same_subnet(a, Ipv4Addr::new(99, 0, 0, 0), 0));
    }
}
