//! Where ranks reach the launcher: the rendezvous addresses and their listeners.
//!
//! Contract: [`listen`] binds one TCP listener on each distinct address the job's ranks
//! reach the launcher at, and on nothing else (never the wildcard address): 127.0.0.1
//! for this machine's ranks, for a namespace the `--boot-ip` or this host's address on
//! the namespace's subnet, for an ssh host the `--boot-ip` or the address this host
//! sends from toward it, for a node daemon on loopback 127.0.0.1 (elsewhere
//! `--boot-ip`). Each rank gets the address and port of its listener.

use crate::hosts::{boot_ip_for, Host};
use crate::job::Config;
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};

/// The listeners (nonblocking) and every rank's rendezvous address.
pub fn listen(cfg: &Config) -> Result<(Vec<TcpListener>, Vec<SocketAddr>), String> {
    let mut ips = boot_addresses(cfg, 0)?;
    let mut listeners: Vec<TcpListener> = Vec::new();
    let mut port_of: HashMap<std::net::IpAddr, u16> = HashMap::new();
    for a in &mut ips {
        let port = match port_of.get(&a.ip()) {
            Some(&p) => p,
            None => {
                let l = TcpListener::bind((a.ip(), 0))
                    .and_then(|l| l.set_nonblocking(true).map(|()| l))
                    .map_err(|e| format!("cannot listen for ranks on {}: {e}", a.ip()))?;
                let p = l
                    .local_addr()
                    .map_err(|e| format!("cannot read the listening address: {e}"))?
                    .port();
                listeners.push(l);
                port_of.insert(a.ip(), p);
                p
            }
        };
        a.set_port(port);
    }
    Ok((listeners, ips))
}

/// The launcher's address for every rank: 127.0.0.1 on this host, for a namespace the
/// `--boot-ip` or the address of this host on the namespace's subnet, for an ssh host
/// the `--boot-ip` or the address this host sends from toward it.
fn boot_addresses(cfg: &Config, port: u16) -> Result<Vec<SocketAddr>, String> {
    let mut per_ns: HashMap<&str, Ipv4Addr> = HashMap::new();
    let mut per_host: HashMap<&str, Ipv4Addr> = HashMap::new();
    let mut out = Vec::with_capacity(cfg.hosts.len());
    for host in &cfg.hosts {
        let ip = match host {
            Host::Local => Ipv4Addr::LOCALHOST,
            Host::Node { agent, .. } if agent.ip().is_loopback() => Ipv4Addr::LOCALHOST,
            Host::Node { label, .. } => cfg.boot_ip.ok_or_else(|| {
                format!("node {label} is not on loopback: --boot-ip must say how it reaches us")
            })?,
            Host::Ssh(target) => match (cfg.boot_ip, per_host.get(target.as_str())) {
                (Some(ip), _) => ip,
                (None, Some(&ip)) => ip,
                (None, None) => {
                    let ip = ssh_boot_ip(target)?;
                    per_host.insert(target, ip);
                    ip
                }
            },
            Host::Netns(ns) => match (cfg.boot_ip, per_ns.get(ns.as_str())) {
                (Some(ip), _) => ip,
                (None, Some(&ip)) => ip,
                (None, None) => {
                    let ip = boot_ip_for(ns)?;
                    per_ns.insert(ns, ip);
                    ip
                }
            },
        };
        out.push(SocketAddr::from((ip, port)));
    }
    // An ssh host that is this machine (`localhost` with `--launcher ssh`) in a job with
    // remote hosts: its ranks must publish an address the others reach.
    if let Some(outward) = out.iter().map(SocketAddr::ip).find(|ip| !ip.is_loopback()) {
        for (a, h) in out.iter_mut().zip(&cfg.hosts) {
            if a.ip().is_loopback() && matches!(h, Host::Ssh(_)) {
                a.set_ip(outward);
            }
        }
    }
    Ok(out)
}

/// The address ranks on ssh host `target` reach the launcher at: the one this host
/// sends from toward it (loopback for this machine).
fn ssh_boot_ip(target: &str) -> Result<Ipv4Addr, String> {
    use std::net::ToSocketAddrs;
    let host = crate::hosts::ssh_host_part(target);
    let addr = (host, 22)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve host {host}: {e}"))?
        .find(SocketAddr::is_ipv4)
        .ok_or_else(|| format!("host {host} has no IPv4 address"))?;
    crate::hosts::source_ip_toward(addr.ip()).map_err(|e| {
        format!(
            "no route to host {host} ({}): {e}; pass --boot-ip",
            addr.ip()
        )
    })
}
