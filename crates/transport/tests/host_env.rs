//! HostId, and parsing the values of the transport's environment variables (the library
//! reads the variables themselves, once).

use phalanx_transport::{parse_switch, parse_transport_kind, FaultConfig, HostId, TransportKind};

#[test]
fn host_id_current() {
    let a = HostId::current().unwrap();
    let b = HostId::current().unwrap();
    assert_eq!(a, b);
    assert!(!a.boot_id.is_empty());
    assert!(!a.boot_id.contains('\n'));
    assert_ne!(a.netns_ino, 0);
    // Same process, other thread: same host.
    let c = std::thread::spawn(|| HostId::current().unwrap())
        .join()
        .unwrap();
    assert_eq!(a, c);
}

#[test]
fn parsed_selection() {
    for (v, k) in [
        ("udp", TransportKind::Udp),
        ("auto", TransportKind::Auto),
        ("", TransportKind::Auto),
        (" SHM ", TransportKind::Shm),
    ] {
        assert_eq!(parse_transport_kind(v), Ok(k), "{v}");
    }
    assert!(parse_transport_kind("tcp").unwrap_err().contains("tcp"));
    let c = FaultConfig::parse("loss=0.05,seed=9").unwrap();
    assert_eq!((c.loss, c.seed), (0.05, 9));
    assert!(FaultConfig::parse("loss=2").is_err());
    assert_eq!(parse_switch("PHALANX_BPF", None, true), Ok(true));
    assert_eq!(parse_switch("PHALANX_BPF", Some(" Off "), true), Ok(false));
    assert!(parse_switch("PHALANX_BPF", Some("maybe"), true)
        .unwrap_err()
        .contains("PHALANX_BPF"));
}
