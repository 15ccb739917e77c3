//! Network interfaces: which address to bind, which interface carries it, its MTU.
//!
//! Contract:
//! * [`resolve_bind_ip`] turns a `PHALANX_IP` value into the address a rank binds: unset or
//!   empty → 127.0.0.1; `auto` → the first non-loopback IPv4 address of an interface that
//!   is up (in `getifaddrs` order; inside a test network namespace that is its veth), else
//!   127.0.0.1; anything else must be an IPv4 address.
//! * [`Interface::carrying`] finds the interface of an address: one with exactly that
//!   address, else one whose IPv4 subnet contains it (127.0.0.2 → `lo`).
//! * MTUs come from `SIOCGIFMTU`, falling back to sysfs.

use std::io;
use std::mem;
use std::net::Ipv4Addr;
use std::os::fd::RawFd;

/// Resolves a `PHALANX_IP` specification (see the module docs).
pub fn resolve_bind_ip(spec: Option<&str>) -> io::Result<Ipv4Addr> {
    let spec = spec.map(str::trim).unwrap_or("");
    if spec.is_empty() {
        return Ok(Ipv4Addr::LOCALHOST);
    }
    if spec.eq_ignore_ascii_case("auto") {
        let ifs = ipv4_interfaces()?;
        return Ok(ifs
            .iter()
            .find(|i| i.up && !i.loopback && !i.addr.is_loopback())
            .map_or(Ipv4Addr::LOCALHOST, |i| i.addr));
    }
    spec.parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("PHALANX_IP={spec:?} is neither an IPv4 address nor \"auto\""),
        )
    })
}

/// One IPv4 address of one interface.
#[derive(Debug, Clone)]
pub(crate) struct Interface {
    pub name: String,
    pub addr: Ipv4Addr,
    /// Netmask in host order.
    pub mask: u32,
    pub up: bool,
    pub loopback: bool,
}

impl Interface {
    /// The interface carrying `ip` (exact address first, then subnet match).
    pub fn carrying(ip: Ipv4Addr) -> io::Result<Interface> {
        let ifs = ipv4_interfaces()?;
        let exact = ifs.iter().find(|i| i.addr == ip);
        let subnet = || {
            ifs.iter()
                .find(|i| u32::from(i.addr) & i.mask == u32::from(ip) & i.mask)
        };
        exact.or_else(subnet).cloned().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                format!("no network interface carries {ip}"),
            )
        })
    }

    /// The interface index (`if_nametoindex`).
    pub fn index(&self) -> io::Result<u32> {
        let c = std::ffi::CString::new(self.name.as_str())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name has NUL"))?;
        // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
        let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
        if idx == 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(idx)
        }
    }

    /// The interface MTU; `fd` is any open socket (for the ioctl).
    pub fn mtu(&self, fd: RawFd) -> io::Result<usize> {
        mtu_ioctl(fd, &self.name).or_else(|_| mtu_sysfs(&self.name))
    }
}

/// MTU of the interface carrying `ip`. For 0.0.0.0 the smallest MTU of all up IPv4
/// interfaces (conservative).
pub(crate) fn interface_mtu(fd: RawFd, ip: Ipv4Addr) -> io::Result<usize> {
    if !ip.is_unspecified() {
        return Interface::carrying(ip)?.mtu(fd);
    }
    let mut best: Option<usize> = None;
    for i in ipv4_interfaces()?.iter().filter(|i| i.up) {
        let mtu = i.mtu(fd)?;
        best = Some(best.map_or(mtu, |b| b.min(mtu)));
    }
    best.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            "no network interface is up",
        )
    })
}

pub(crate) fn ipv4_interfaces() -> io::Result<Vec<Interface>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head into the valid out-pointer.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list returned by getifaddrs, valid
        // until freeifaddrs; address pointers are null or point to sockaddrs
        // whose family we check before reading them as sockaddr_in; the name
        // is a NUL-terminated C string.
        unsafe {
            let ifa = &*cur;
            if !ifa.ifa_addr.is_null() && i32::from((*ifa.ifa_addr).sa_family) == libc::AF_INET {
                let a = &*ifa.ifa_addr.cast::<libc::sockaddr_in>();
                let mask = if ifa.ifa_netmask.is_null() {
                    u32::MAX
                } else {
                    u32::from_be(
                        (*ifa.ifa_netmask.cast::<libc::sockaddr_in>())
                            .sin_addr
                            .s_addr,
                    )
                };
                out.push(Interface {
                    name: std::ffi::CStr::from_ptr(ifa.ifa_name)
                        .to_string_lossy()
                        .into_owned(),
                    addr: Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                    mask,
                    up: ifa.ifa_flags & libc::IFF_UP as libc::c_uint != 0,
                    loopback: ifa.ifa_flags & libc::IFF_LOOPBACK as libc::c_uint != 0,
                });
            }
            cur = ifa.ifa_next;
        }
    }
    // SAFETY: `head` came from a successful getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

fn mtu_ioctl(fd: RawFd, name: &str) -> io::Result<usize> {
    // SAFETY: ifreq is a plain C struct/union; all-zero is valid.
    let mut req: libc::ifreq = unsafe { mem::zeroed() };
    let bytes = name.as_bytes();
    if bytes.len() >= req.ifr_name.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "interface name too long",
        ));
    }
    for (d, &s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = s as libc::c_char;
    }
    // SAFETY: SIOCGIFMTU reads the NUL-terminated name from and writes the
    // MTU into the ifreq we own; `fd` is an open socket.
    let rc = unsafe { libc::ioctl(fd, libc::SIOCGIFMTU as _, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: after a successful SIOCGIFMTU the union holds ifru_mtu.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    usize::try_from(mtu).map_err(|_| io::Error::other("negative MTU"))
}

fn mtu_sysfs(name: &str) -> io::Result<usize> {
    std::fs::read_to_string(format!("/sys/class/net/{name}/mtu"))?
        .trim()
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("bad MTU: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_specs() {
        assert_eq!(resolve_bind_ip(None).unwrap(), Ipv4Addr::LOCALHOST);
        assert_eq!(resolve_bind_ip(Some(" ")).unwrap(), Ipv4Addr::LOCALHOST);
        assert_eq!(
            resolve_bind_ip(Some("127.0.0.3")).unwrap(),
            Ipv4Addr::new(127, 0, 0, 3)
        );
        let e = resolve_bind_ip(Some("eth0")).unwrap_err();
        assert!(e.to_string().contains("\"eth0\""), "{e}");
        // `auto` never yields a loopback address unless nothing else is up.
        let a = resolve_bind_ip(Some("AUTO")).unwrap();
        let others = ipv4_interfaces()
            .unwrap()
            .into_iter()
            .any(|i| i.up && !i.loopback && !i.addr.is_loopback());
        assert_eq!(a.is_loopback(), !others);
    }

    #[test]
    fn lo_is_found_by_subnet() {
        let i = Interface::carrying(Ipv4Addr::new(127, 0, 0, 2)).unwrap();
        assert!(i.loopback);
        assert!(i.index().unwrap() > 0);
    }
}
