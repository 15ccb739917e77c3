//! The job's IP multicast group: which group, and the sockets' multicast options.
//!
//! Contract:
//! * [`group_for_key`] maps a job key to a group in 239.0.0.0/8 (administratively scoped;
//!   never 239.0.0.x or 239.128.0.x, which alias link-local MAC addresses) and a port in
//!   30000..50000 (`30000 + key % 20000`). Two jobs may collide on a group: the job-key
//!   check of the socket filter (and of the engine) keeps them apart.
//! * [`McastSetting::from_lookup`]: `PHALANX_MCAST=0|off|false|no` disables multicast (all
//!   multicasts become unicast fan-out), `1|on|true|yes` enables it; unset, it is enabled
//!   unless `PHALANX_FAULTS` is set (fault injection can only give a real multicast one fate
//!   for all receivers, fan-out gets one per receiver — see `Faulty`).
//!   `PHALANX_MCAST_GROUP=a.b.c.d:port` overrides the derived group. Either value longer
//!   than [`MAX_SETTING_LEN`] bytes is an error naming the variable (not quoting it).
//! * Multicast is tied to the interface carrying the rank's unicast address (by index):
//!   membership, `IP_MULTICAST_IF`, loop on (ranks on one host), TTL 1 (never routed).

use std::io;
use std::mem;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsRawFd;

use socket2::Socket;

/// Environment variable switching multicast on or off.
pub const ENV_MCAST: &str = "PHALANX_MCAST";
/// Environment variable overriding the group (`a.b.c.d:port`).
pub const ENV_MCAST_GROUP: &str = "PHALANX_MCAST_GROUP";

/// Longest [`ENV_MCAST`] or [`ENV_MCAST_GROUP`] value (an `a.b.c.d:port` takes 21).
pub const MAX_SETTING_LEN: usize = 256;

/// Whether and where to multicast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McastSetting {
    /// Use unicast fan-out only.
    Disabled,
    /// Join this group (`None`: derive it from the job key).
    Enabled(Option<SocketAddrV4>),
}

impl McastSetting {
    /// The setting from [`ENV_MCAST`], [`ENV_MCAST_GROUP`] and `PHALANX_FAULTS` as
    /// `get` returns them (module docs).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> io::Result<McastSetting> {
        let bad = |msg: String| io::Error::new(io::ErrorKind::InvalidInput, msg);
        for name in [ENV_MCAST, ENV_MCAST_GROUP] {
            if let Some(v) = get(name).filter(|v| v.len() > MAX_SETTING_LEN) {
                return Err(bad(format!(
                    "{name} is {} bytes long, more than {MAX_SETTING_LEN}",
                    v.len()
                )));
            }
        }
        let on = match get(ENV_MCAST).map(|v| v.trim().to_ascii_lowercase()) {
            None => get("PHALANX_FAULTS").is_none_or(|f| f.trim().is_empty()),
            Some(v) if v.is_empty() => true,
            Some(v) => match v.as_str() {
                "0" | "off" | "false" | "no" => false,
                "1" | "on" | "true" | "yes" => true,
                other => {
                    return Err(bad(format!(
                        "{ENV_MCAST}={other:?} is not one of 0|1|off|on|false|true|no|yes"
                    )))
                }
            },
        };
        if !on {
            return Ok(McastSetting::Disabled);
        }
        let group = match get(ENV_MCAST_GROUP) {
            None => None,
            Some(g) if g.trim().is_empty() => None,
            Some(g) => {
                let a: SocketAddrV4 = g.trim().parse().map_err(|_| {
                    bad(format!(
                        "{ENV_MCAST_GROUP}={g:?} is not an a.b.c.d:port address"
                    ))
                })?;
                if !a.ip().is_multicast() || a.port() == 0 {
                    return Err(bad(format!(
                        "{ENV_MCAST_GROUP}={g:?} is not a multicast group with a port"
                    )));
                }
                Some(a)
            }
        };
        Ok(McastSetting::Enabled(group))
    }
}

/// The group and port derived from a job key (module docs).
pub fn group_for_key(job_key: u64) -> SocketAddrV4 {
    let h = splitmix64(job_key);
    let mut a = 1 + (h % 254) as u8; // 1..=254
    if a == 128 {
        a = 129;
    }
    let b = (h >> 16) as u8;
    let c = (h >> 24) as u8;
    let port = 30000 + (job_key % 20000) as u16;
    SocketAddrV4::new(Ipv4Addr::new(239, a, b, c), port)
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn mreqn(group: Ipv4Addr, local: Ipv4Addr, ifindex: u32) -> libc::ip_mreqn {
    libc::ip_mreqn {
        imr_multiaddr: libc::in_addr {
            s_addr: u32::from(group).to_be(),
        },
        imr_address: libc::in_addr {
            s_addr: u32::from(local).to_be(),
        },
        imr_ifindex: ifindex as libc::c_int,
    }
}

fn setsockopt_mreqn(sock: &Socket, opt: libc::c_int, m: &libc::ip_mreqn) -> io::Result<()> {
    // SAFETY: passes a pointer to a live ip_mreqn and its exact size; Linux accepts an
    // ip_mreqn for IP_ADD_MEMBERSHIP and IP_MULTICAST_IF.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_IP,
            opt,
            (m as *const libc::ip_mreqn).cast(),
            mem::size_of::<libc::ip_mreqn>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Sending side: multicasts from `sock` leave through interface `ifindex` (source
/// `local`), loop back to this host's members, and are never routed (TTL 1).
pub(crate) fn configure_sender(sock: &Socket, local: Ipv4Addr, ifindex: u32) -> io::Result<()> {
    setsockopt_mreqn(
        sock,
        libc::IP_MULTICAST_IF,
        &mreqn(Ipv4Addr::UNSPECIFIED, local, ifindex),
    )?;
    sock.set_multicast_loop_v4(true)?;
    sock.set_multicast_ttl_v4(1)
}

/// Receiving side: `sock` (already bound to the group's address and port) joins `group`
/// on interface `ifindex` and receives no other group's traffic.
pub(crate) fn join(
    sock: &Socket,
    group: Ipv4Addr,
    local: Ipv4Addr,
    ifindex: u32,
) -> io::Result<()> {
    sock.set_multicast_all_v4(false)?;
    setsockopt_mreqn(sock, libc::IP_ADD_MEMBERSHIP, &mreqn(group, local, ifindex))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn groups_are_scoped_and_stable() {
        for key in [0u64, 1, 42, u64::MAX, 0xdead_beef_0bad_f00d] {
            let g = group_for_key(key);
            let o = g.ip().octets();
            assert_eq!(o[0], 239);
            assert!(o[1] != 0 && o[1] != 128 && o[1] != 255, "{g}");
            assert!((30000..50000).contains(&g.port()));
            assert_eq!(g, group_for_key(key));
        }
        assert_ne!(group_for_key(1), group_for_key(2));
    }

    #[test]
    fn settings() {
        use McastSetting::*;
        assert_eq!(
            McastSetting::from_lookup(lookup(&[])).unwrap(),
            Enabled(None)
        );
        let off = [(ENV_MCAST, "0")];
        assert_eq!(McastSetting::from_lookup(lookup(&off)).unwrap(), Disabled);
        let faults = [("PHALANX_FAULTS", "loss=0.1")];
        assert_eq!(
            McastSetting::from_lookup(lookup(&faults)).unwrap(),
            Disabled
        );
        let forced = [("PHALANX_FAULTS", "loss=0.1"), (ENV_MCAST, "on")];
        assert_eq!(
            McastSetting::from_lookup(lookup(&forced)).unwrap(),
            Enabled(None)
        );
        let g = [(ENV_MCAST_GROUP, "239.1.2.3:4000")];
        assert_eq!(
            McastSetting::from_lookup(lookup(&g)).unwrap(),
            Enabled(Some("239.1.2.3:4000".parse().unwrap()))
        );
        for bad in [
            [(ENV_MCAST_GROUP, "10.0.0.1:4000")],
            [(ENV_MCAST_GROUP, "239.1.2.3")],
            [(ENV_MCAST, "maybe")],
        ] {
            let e = McastSetting::from_lookup(lookup(&bad)).unwrap_err();
            assert!(e.to_string().contains("PHALANX_MCAST"), "{e}");
        }
    }

    #[test]
    fn settings_are_bounded() {
        let edge = format!("{:<width$}", "239.1.2.3:4000", width = MAX_SETTING_LEN);
        let ok = [(ENV_MCAST_GROUP, edge.as_str())];
        assert!(McastSetting::from_lookup(lookup(&ok)).is_ok());
        let past = format!("{edge} ");
        let huge = "1".repeat(1 << 20);
        for (name, v) in [
            (ENV_MCAST_GROUP, past.as_str()),
            (ENV_MCAST, huge.as_str()),
            (ENV_MCAST_GROUP, huge.as_str()),
        ] {
            let e = McastSetting::from_lookup(lookup(&[(name, v)])).unwrap_err();
            let e = e.to_string();
            assert!(e.contains(name) && e.len() < 200, "{e}");
        }
    }
}
