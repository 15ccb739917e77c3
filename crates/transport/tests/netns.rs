//! The UDP transport between network namespaces on a bridge (veth MTU 1500): the
//! `PHALANX_IP=auto` choice, the MTU, multicast across hosts and the filter there.
//! Needs root and iproute2; without them the test fails with the reason.

mod common;
#[path = "common/packets.rs"]
mod packets;

use std::net::{Ipv4Addr, SocketAddrV4};

use common::drain;
use packets::{multicast, tag, unicast};
use phalanx_netns::TestNet;
use phalanx_transport::{resolve_bind_ip, wait_readable, Transport, UdpTransport};

#[test]
fn three_hosts_on_a_bridge() {
    let net = TestNet::create(3).expect("network namespaces for the transport test");
    let pid = std::process::id();
    let k = 0xfeed_0000_0000_0000 ^ u64::from(pid);
    let g = SocketAddrV4::new(Ipv4Addr::new(239, 210, (pid >> 8) as u8, pid as u8), 41000);
    let mut ts: Vec<UdpTransport> = (0..3)
        .map(|i| {
            net.in_netns(i, || {
                let ip = resolve_bind_ip(Some("auto")).unwrap();
                assert_eq!(ip, net.ips()[i], "auto picks the namespace's veth address");
                let mut t = UdpTransport::bind(ip).unwrap();
                assert_eq!(t.max_datagram(), 1500 - 28);
                t.attach_filter(k, i as u32).unwrap();
                t.join_multicast_group(g).unwrap();
                t
            })
            .unwrap()
        })
        .collect();
    let peers: Vec<SocketAddrV4> = ts.iter().map(|t| t.local_addr()).collect();
    for t in &mut ts {
        t.set_peers(peers.clone());
    }

    // Multicast for rank 1 only, then for ranks 1 and 2.
    let first = multicast(k, 0, 3, &[1], 1);
    let second = multicast(k, 0, 3, &[1, 2], 2);
    assert!(ts[0].send_multicast(&first, &[1]).unwrap());
    assert!(ts[0].send_multicast(&second, &[1, 2]).unwrap());
    let (got, _) = drain(&mut ts[1], 2);
    let tags: Vec<u8> = got.iter().map(|(_, d)| tag(d)).collect();
    assert_eq!(tags, [1, 2]);
    assert_eq!(got[0].0, peers[0]);
    let (got, _) = drain(&mut ts[2], 1);
    assert_eq!(got.len(), 1);
    assert_eq!(tag(&got[0].1), 2);
    let s2 = ts[2].stats();
    assert_eq!((s2.received, s2.kernel_drops_multicast), (1, 1), "{s2:?}");
    // The sender never sees its own multicast.
    let mut own = 0;
    ts[0].recv_batch(&mut |_, _| own += 1).unwrap();
    assert_eq!(own, 0);
    assert_eq!(ts[0].stats().multicasts_sent, 2);

    // Unicast and fan-out across hosts; the veth MTU bounds the datagram.
    let full = {
        let mut d = unicast(k, 2, 0);
        d.resize(1472, 3);
        d
    };
    assert_eq!(ts[2].multi_send(&full, &[0, 1]).unwrap(), 2);
    assert!(ts[2].send_to(0, &[0u8; 1473]).is_err());
    for r in [0, 1] {
        let (got, _) = drain(&mut ts[r], 1);
        assert_eq!(got.len(), 1, "rank {r}");
        assert_eq!(got[0].1, full);
        assert_eq!(got[0].0, peers[2]);
    }
    // Nothing else is pending anywhere (bounded look).
    for t in &mut ts {
        if wait_readable(&t.fds(), Some(std::time::Duration::from_millis(50))).unwrap() {
            let mut extra = Vec::new();
            t.recv_batch(&mut |_, d| extra.push(d.to_vec())).unwrap();
            assert!(extra.is_empty(), "unexpected datagrams: {extra:?}");
        }
    }
}
