//! TestNet over real namespaces. Needs root and iproute2: without them these tests fail
//! with the reason (they never pass silently).

use std::net::{SocketAddrV4, UdpSocket};
use std::process::Command;
use std::time::Duration;

use phalanx_netns::TestNet;

fn netns_list() -> String {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn create_talk_and_clean_up() {
    let net = TestNet::create(3).expect("TestNet::create");
    assert_eq!(net.names().len(), 3);
    assert_eq!(net.ips().len(), 3);
    let list = netns_list();
    for n in net.names() {
        assert!(list.contains(n.as_str()), "{n} missing from {list}");
    }
    let bridge_net = net.bridge_ip().octets();
    for ip in net.ips() {
        assert_eq!(ip.octets()[..3], bridge_net[..3]);
    }
    // UDP from namespace 0 to namespace 2, over the bridge.
    let rx = net
        .in_netns(2, || {
            UdpSocket::bind(SocketAddrV4::new(net.ips()[2], 0)).unwrap()
        })
        .unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let to = rx.local_addr().unwrap();
    let from = net
        .in_netns(0, || {
            let tx = UdpSocket::bind(SocketAddrV4::new(net.ips()[0], 0)).unwrap();
            tx.send_to(b"over the bridge", to).unwrap();
            tx.local_addr().unwrap()
        })
        .unwrap();
    let mut buf = [0u8; 64];
    let (n, src) = rx.recv_from(&mut buf).expect("datagram over the bridge");
    assert_eq!(&buf[..n], b"over the bridge");
    assert_eq!(src, from);
    // The MTU inside is the veth's.
    let out = net
        .command(1, "cat")
        .arg("/sys/class/net/veth0/mtu")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1500");

    let names = net.names().to_vec();
    let bridge = net.bridge().to_string();
    drop(net);
    let list = netns_list();
    for n in &names {
        assert!(!list.contains(n.as_str()), "{n} survived drop");
    }
    let links = Command::new("ip").args(["-o", "link"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&links.stdout).contains(&bridge));
}

#[test]
fn cleaned_up_after_a_panic() {
    let names = std::sync::Mutex::new(Vec::new());
    let r = std::panic::catch_unwind(|| {
        let net = TestNet::create(1).expect("TestNet::create");
        names.lock().unwrap().extend(net.names().to_vec());
        panic!("test body fails");
    });
    assert!(r.is_err());
    let names = names.into_inner().unwrap();
    assert_eq!(names.len(), 1);
    assert!(!netns_list().contains(names[0].as_str()));
}
