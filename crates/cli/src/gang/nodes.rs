//! The cluster's emulated nodes on this machine: their network (with `up --netns`, one
//! network namespace per node on a bridge) and their daemons' processes.
//!
//! Contract:
//! * [`network`] makes the namespaces (`phalanx_netns::TestNet::create_cluster`, tag
//!   derived from the state directory) and records them in `DIR/netns.json`; a restart
//!   reuses what the file records when the namespaces still exist.
//! * [`start_daemons`] starts every node daemon that is not alive (pid file
//!   `DIR/nodes/N.pid`, command line checked), each in a session of its own — inside
//!   its namespace with `ip netns exec`, which execs, so the pid is the daemon's — with
//!   its output in `DIR/nodes/N.log`.
//! * [`clean_up`] ends whatever node daemons are still alive (SIGTERM, then SIGKILL
//!   after [`STOP_GRACE`]) and removes the namespaces: after `down` nothing of the
//!   cluster is left.

use phalanx_netns::TestNet;
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Most nodes of one cluster.
pub const MAX_NODES: u32 = 64;
/// Time a node daemon gets between SIGTERM and SIGKILL in [`clean_up`].
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// The nodes' network (`up --netns`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Net {
    pub tag: String,
    pub names: Vec<String>,
    pub ips: Vec<Ipv4Addr>,
    pub bridge_ip: Ipv4Addr,
}

/// The namespace tag of the cluster in `dir`: 6 characters of `[a-z0-9]`.
fn tag(dir: &Path) -> String {
    let abs = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in abs.as_os_str().as_encoded_bytes() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
    }
    (0..6)
        .map(|i| {
            let d = ((h >> (i * 6)) % 36) as u32;
            char::from_digit(d, 36).unwrap_or('0')
        })
        .collect()
}

/// The nodes' network: `None` on loopback, else the namespaces (module docs).
pub fn network(dir: &Path, nodes: u32, netns: bool, restart: bool) -> Result<Option<Net>, String> {
    let file = dir.join("netns.json");
    let recorded: Option<Net> = std::fs::read(&file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    if let Some(net) = recorded {
        if restart && net.names.len() == nodes as usize && namespaces_exist(&net.names) {
            return Ok(Some(net));
        }
        TestNet::remove_cluster(&net.tag);
        let _ = std::fs::remove_file(&file);
    }
    if !netns {
        return Ok(None);
    }
    let t = TestNet::create_cluster(&tag(dir), nodes as usize)
        .map_err(|e| format!("cannot create the nodes' network namespaces: {e}"))?;
    let net = Net {
        tag: tag(dir),
        names: t.names().to_vec(),
        ips: t.ips().to_vec(),
        bridge_ip: t.bridge_ip(),
    };
    let text = serde_json::to_vec(&net).map_err(|e| e.to_string())?;
    std::fs::write(&file, text).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    Ok(Some(net))
}

fn namespaces_exist(names: &[String]) -> bool {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return false;
    };
    let list = String::from_utf8_lossy(&out.stdout);
    let have: Vec<&str> = list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    names.iter().all(|n| have.contains(&n.as_str()))
}

/// The pid of node `n`'s daemon if it is alive.
fn daemon_pid(dir: &Path, n: u32) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(dir.join("nodes").join(format!("{n}.pid")))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let cmd = String::from_utf8_lossy(&cmd);
    let ours = cmd.contains("gang") && cmd.contains("\0node\0");
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let zombie = state.rsplit(')').next()?.trim_start().starts_with('Z');
    (ours && !zombie).then_some(pid)
}

/// Whether any node daemon of the cluster is alive.
pub fn any_alive(dir: &Path, nodes: u32) -> bool {
    (0..nodes.max(MAX_NODES)).any(|n| daemon_pid(dir, n).is_some())
}

/// Starts the node daemons that are not alive (module docs).
pub fn start_daemons(dir: &Path, exe: &Path, nodes: u32, net: Option<&Net>) -> Result<(), String> {
    let logs = dir.join("nodes");
    std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
    for n in 0..nodes {
        if daemon_pid(dir, n).is_some() {
            continue;
        }
        let mut cmd = match net {
            Some(net) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &net.names[n as usize]]).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        cmd.arg("gang").arg("--dir").arg(dir).arg("node");
        cmd.args(["--node", &n.to_string()]);
        if let Some(net) = net {
            cmd.arg(format!("--master={}", net.bridge_ip))
                .arg(format!("--listen={}", net.ips[n as usize]))
                .arg("--netns");
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(logs.join(format!("{n}.log")))
            .map_err(|e| e.to_string())?;
        super::launchers::new_session(&mut cmd);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start node daemon {n}: {e}"))?;
        // The daemon writes it too; written here at once so that `down` finds it
        // however early it comes.
        let _ = std::fs::write(logs.join(format!("{n}.pid")), child.id().to_string());
    }
    Ok(())
}

/// Ends the node daemons still alive and removes the namespaces; whether there was
/// anything to clean.
pub fn clean_up(dir: &Path) -> bool {
    let pids: Vec<u32> = (0..MAX_NODES).filter_map(|n| daemon_pid(dir, n)).collect();
    for &pid in &pids {
        // SAFETY: kill(2) on a node daemon of this cluster (its command line checked).
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    }
    let t = Instant::now();
    while t.elapsed() < STOP_GRACE
        && pids
            .iter()
            .any(|&p| std::path::Path::new(&format!("/proc/{p}")).exists() && !zombie(p))
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &pid in &pids {
        // SAFETY: as above; a daemon that ignored SIGTERM.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    }
    for n in 0..MAX_NODES {
        let _ = std::fs::remove_file(dir.join("nodes").join(format!("{n}.pid")));
    }
    let file = dir.join("netns.json");
    let net: Option<Net> = std::fs::read(&file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    if let Some(net) = &net {
        TestNet::remove_cluster(&net.tag);
        let _ = std::fs::remove_file(&file);
    }
    !pids.is_empty() || net.is_some()
}

fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .map(|r| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}
