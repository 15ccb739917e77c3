//! Shared helpers for the transport integration tests.
#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use phalanx_transport::{wait_readable, Transport, UdpTransport};

pub const LO: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// Two transports on 127.0.0.1 (ephemeral ports) that know each other as ranks 0 and 1.
pub fn pair() -> (UdpTransport, UdpTransport) {
    let mut a = UdpTransport::bind(LO).expect("bind a");
    let mut b = UdpTransport::bind(LO).expect("bind b");
    let peers = vec![a.local_addr(), b.local_addr()];
    a.set_peers(peers.clone());
    b.set_peers(peers);
    (a, b)
}

/// Receives until `want` datagrams arrived or nothing arrives for a while.
/// Returns the datagrams and the sizes of the non-empty batches.
pub fn drain<T: Transport>(t: &mut T, want: usize) -> (Vec<(SocketAddrV4, Vec<u8>)>, Vec<usize>) {
    let mut got = Vec::new();
    let mut batches = Vec::new();
    while got.len() < want {
        let n = t
            .recv_batch(&mut |from, bytes| got.push((from, bytes.to_vec())))
            .expect("recv_batch");
        if n > 0 {
            batches.push(n);
            continue;
        }
        if !wait_readable(&t.fds(), Some(Duration::from_secs(2))).expect("wait_readable") {
            break;
        }
    }
    (got, batches)
}
