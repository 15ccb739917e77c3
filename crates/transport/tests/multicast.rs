//! Multicast, fan-out and the kernel filter on 127.0.0.1.
//!
//! Every test uses its own group (239.201+t.x.y, from the pid) and job key. Waits are
//! bounded (`common::drain`) and nothing asserts a duration. A negative check ("rank 2
//! got nothing") is made right after a positive one that proves the kernel already
//! decided: on loopback one multicast packet is handed to all member sockets in the same
//! kernel pass, so when one member has it, every other member's filter has run.

mod common;
#[path = "common/packets.rs"]
mod packets;

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};

use common::{drain, LO};
use packets::{multicast, tag, unicast};
use phalanx_transport::{Transport, UdpTransport};

fn group(t: u8) -> SocketAddrV4 {
    let pid = std::process::id();
    SocketAddrV4::new(
        Ipv4Addr::new(239, 201 + t, (pid >> 8) as u8, pid as u8),
        50000 + (pid % 5000) as u16 * 2 + u16::from(t % 2),
    )
}

fn key(t: u8) -> u64 {
    0x5eed_0000_0000_0000 ^ (u64::from(std::process::id()) << 8) ^ u64::from(t)
}

/// `n` transports on 127.0.0.1 that know each other; `filtered[r]` says whether rank r
/// gets the kernel filter; all join `group`.
fn job(n: usize, key: u64, group: SocketAddrV4, filtered: &[bool]) -> Vec<UdpTransport> {
    let mut ts: Vec<UdpTransport> = (0..n).map(|_| UdpTransport::bind(LO).unwrap()).collect();
    let peers: Vec<SocketAddrV4> = ts.iter().map(|t| t.local_addr()).collect();
    for (r, t) in ts.iter_mut().enumerate() {
        t.set_peers(peers.clone());
        if filtered[r] {
            t.attach_filter(key, r as u32).unwrap();
        }
        t.join_multicast_group(group).unwrap();
        assert!(t.multicast_available());
        assert_eq!(t.fds().len(), 2);
    }
    ts
}

/// Whatever is queued right now (no waiting).
fn now<T: Transport>(t: &mut T) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    while t.recv_batch(&mut |_, d| got.push(d.to_vec())).unwrap() > 0 {}
    got
}

#[test]
fn multicast_reaches_the_others_but_not_the_sender() {
    let (k, g) = (key(0), group(0));
    let mut ts = job(3, k, g, &[true, true, true]);
    let d = multicast(k, 0, 3, &[1, 2], 7);
    assert!(ts[0].send_multicast(&d, &[1, 2]).unwrap());
    for r in [1, 2] {
        let (got, _) = drain(&mut ts[r], 1);
        assert_eq!(got.len(), 1, "rank {r}");
        assert_eq!(
            got[0].0,
            ts[0].local_addr(),
            "source is the sender's unicast address"
        );
        assert_eq!(got[0].1, d);
        let s = ts[r].stats();
        assert_eq!((s.received_multicast, s.received_unicast), (1, 0));
    }
    // Ranks 1 and 2 have it, so the sender's looped-back copy was filtered too.
    assert!(now(&mut ts[0]).is_empty());
    let s = ts[0].stats();
    assert_eq!(
        (s.multicasts_sent, s.sent, s.fanout_sends, s.received),
        (1, 1, 0, 0)
    );
}

#[test]
fn without_the_filter_the_sender_hears_itself() {
    let (k, g) = (key(1), group(1));
    let mut ts = job(2, k, g, &[false, true]);
    let d = multicast(k, 0, 2, &[1], 1);
    assert!(ts[0].send_multicast(&d, &[1]).unwrap());
    assert_eq!(drain(&mut ts[1], 1).0.len(), 1);
    let (own, _) = drain(&mut ts[0], 1);
    assert_eq!(own.len(), 1, "unfiltered sender receives its own multicast");
    assert_eq!(ts[0].stats().received_multicast, 1);
}

#[test]
fn bitmap_without_rank_2_reaches_rank_1_only() {
    let (k, g) = (key(2), group(2));
    let mut ts = job(4, k, g, &[true, true, true, false]);
    let d = multicast(k, 0, 4, &[1], 1);
    assert!(ts[0].send_multicast(&d, &[1]).unwrap());
    let (got, _) = drain(&mut ts[1], 1);
    assert_eq!(got.len(), 1);
    assert_eq!(tag(&got[0].1), 1);
    // Same kernel pass: rank 2 (filtered) has nothing; rank 3 (unfiltered) has the copy.
    assert!(now(&mut ts[2]).is_empty());
    assert_eq!(ts[2].stats().received, 0);
    assert_eq!(
        now(&mut ts[3]).len(),
        1,
        "the unfiltered rank 3 sees what 2 was spared"
    );
    // The next multicast, for rank 2 too, is the first thing rank 2 ever receives.
    let d2 = multicast(k, 0, 4, &[1, 2], 2);
    assert!(ts[0].send_multicast(&d2, &[1, 2]).unwrap());
    let (got, _) = drain(&mut ts[2], 1);
    assert_eq!(got.len(), 1);
    assert_eq!(tag(&got[0].1), 2);
    let s = ts[2].stats();
    assert_eq!((s.received, s.received_multicast), (1, 1));
    // And it carried the kernel's count of what it dropped on that socket: the first one
    // (the kernel counts filter rejections in SO_RXQ_OVFL).
    assert_eq!(s.kernel_drops_multicast, 1, "{s:?}");
    assert_eq!(ts[3].stats().kernel_drops, 0);
}

#[test]
fn wrong_key_never_reaches_user_space_when_filtered() {
    let k = key(3);
    let mut filtered = UdpTransport::bind(LO).unwrap();
    filtered.attach_filter(k, 0).unwrap();
    assert!(filtered.filter_installed());
    let mut open = UdpTransport::bind(LO).unwrap(); // the PHALANX_BPF=0 case
    assert!(!open.filter_installed());
    let tx = UdpSocket::bind((LO, 0)).unwrap();
    let junk = [
        unicast(k ^ 1, 1, 1),         // other job (low half)
        unicast(k ^ (1 << 63), 1, 2), // other job (high half)
        b"not phalanx at all".to_vec(),
        unicast(k, 1, 4)[..40].to_vec(), // short
    ];
    let marker = unicast(k, 1, 9);
    for to in [filtered.local_addr(), open.local_addr()] {
        for j in &junk {
            tx.send_to(j, to).unwrap();
        }
        tx.send_to(&marker, to).unwrap();
    }
    let (got, _) = drain(&mut open, junk.len() + 1);
    assert_eq!(
        got.len(),
        junk.len() + 1,
        "without the filter everything arrives"
    );
    let (got, _) = drain(&mut filtered, 1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, marker, "only the marker passes the filter");
    assert!(now(&mut filtered).is_empty());
    assert_eq!(filtered.stats().received, 1);
}

#[test]
fn fanout_fallback_delivers_to_every_target() {
    let k = key(4);
    let mut ts: Vec<UdpTransport> = (0..4).map(|_| UdpTransport::bind(LO).unwrap()).collect();
    let peers: Vec<SocketAddrV4> = ts.iter().map(|t| t.local_addr()).collect();
    for (r, t) in ts.iter_mut().enumerate() {
        t.set_peers(peers.clone());
        t.attach_filter(k, r as u32).unwrap();
        assert!(!t.multicast_available());
    }
    let d = multicast(k, 0, 4, &[1, 2, 3], 5);
    assert!(ts[0].send_multicast(&d, &[1, 2, 3]).unwrap());
    // multi_send: one buffer, N destinations (here a unicast datagram to two of them).
    let u = unicast(k, 0, 6);
    assert_eq!(ts[0].multi_send(&u, &[2, 3]).unwrap(), 2);
    for (r, t) in ts.iter_mut().enumerate().skip(1) {
        let want = if r == 1 { 1 } else { 2 };
        let (got, _) = drain(t, want);
        let tags: Vec<u8> = got.iter().map(|(_, d)| tag(d)).collect();
        assert_eq!(tags, if r == 1 { vec![5] } else { vec![5, 6] }, "rank {r}");
        assert_eq!(got[0].1, d);
        assert_eq!(t.stats().received_unicast, want as u64);
    }
    let s = ts[0].stats();
    assert_eq!((s.fanout_sends, s.multicasts_sent, s.sent), (1, 0, 5));
    // Unknown ranks and oversize datagrams are errors, before anything is sent.
    assert!(ts[0].multi_send(&u, &[1, 9]).is_err());
    assert!(ts[0].send_multicast(&vec![0; 65508], &[1]).is_err());
    assert_eq!(ts[0].stats().sent, 5);
}

#[test]
fn filter_constants_match_the_wire_format() {
    use phalanx_transport::bpf;
    assert_eq!(bpf::HEADER_LEN as usize, phalanx_wire::HEADER_LEN);
    assert_eq!(bpf::OFF_FLAGS as usize, phalanx_wire::OFF_FLAGS);
    assert_eq!(bpf::OFF_JOB_KEY as usize, phalanx_wire::OFF_JOB_KEY);
    assert_eq!(bpf::OFF_SRC as usize, phalanx_wire::OFF_SRC);
    assert_eq!(u16::from_le_bytes(bpf::MAGIC_BYTES), phalanx_wire::MAGIC);
    assert_eq!(bpf::OFF_TARGETS as usize, phalanx_wire::mcast::OFF_TARGETS);
    assert_eq!(bpf::FLAG_MULTICAST, phalanx_wire::flags::MULTICAST);
}
