//! HostId and environment-driven selection. Environment variables are
//! process-global, so everything touching them runs in one test.

use phalanx_transport::{transport_kind_from_env, FaultConfig, HostId, TransportKind};

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
fn env_selection() {
    std::env::remove_var("PHALANX_TRANSPORT");
    assert_eq!(transport_kind_from_env(), Ok(TransportKind::Auto));
    for (v, k) in [
        ("udp", TransportKind::Udp),
        ("auto", TransportKind::Auto),
        ("", TransportKind::Auto),
        ("shm", TransportKind::Shm),
    ] {
        std::env::set_var("PHALANX_TRANSPORT", v);
        assert_eq!(transport_kind_from_env(), Ok(k), "{v}");
    }
    std::env::set_var("PHALANX_TRANSPORT", "tcp");
    assert!(transport_kind_from_env().unwrap_err().contains("tcp"));
    std::env::remove_var("PHALANX_TRANSPORT");

    std::env::remove_var("PHALANX_FAULTS");
    assert_eq!(FaultConfig::from_env(), Ok(None));
    std::env::set_var("PHALANX_FAULTS", "  ");
    assert_eq!(FaultConfig::from_env(), Ok(None));
    std::env::set_var("PHALANX_FAULTS", "loss=0.05,seed=9");
    let c = FaultConfig::from_env().unwrap().unwrap();
    assert_eq!((c.loss, c.seed), (0.05, 9));
    std::env::set_var("PHALANX_FAULTS", "loss=2");
    assert!(FaultConfig::from_env().is_err());
    std::env::remove_var("PHALANX_FAULTS");
}
