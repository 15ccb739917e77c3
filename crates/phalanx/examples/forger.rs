//! A forged datagram, sent as an attacker on the host would: it has read the job key off
//! the wire and knows rank 2's address, and from a raw socket (root) it sends rank 1
//! well-formed go-back-n datagrams with rank 2's source address and port, each an eager
//! message "FORGED" on tag 77 — one for each of the first sequence numbers, so that one
//! is the next rank 1 expects from rank 2. Rank 0 plays the attacker; then rank 2 sends
//! the real message on tag 77.
//!
//! Rank 1 prints `forger: received <text> bad_mac=<n> foreign=<n> sealed=<bool>`. With the job's MAC
//! the forgeries are dropped and counted and the real message arrives; with
//! `PHALANX_MAC=0` a forgery is taken instead (the attack the MAC stops). Needs 3 ranks
//! over UDP.
//!
//! With `FORGER_AS=user` rank 0 is an attacker without privileges instead, as another
//! user of the host would be: it cannot bind rank 2's address and port (it prints
//! `forger: bind refused` when the kernel says so) and sends the same datagrams from an
//! ordinary socket of its own, which the MAC drops. (Such a user can still put rank 2's
//! source address and port on a datagram — bind the port on another loopback address,
//! send with `IP_PKTINFO` — which is why loopback datagrams are sealed too.)
use phalanx::traits::*;
use phalanx_wire::{flags, Header, Kind, MsgKind};

const TAG: i32 = 77;
const FORGED: &[u8] = b"FORGED";
const REAL: &[u8] = b"real!!";

/// One UDP datagram from `from` to `to` through a raw socket (the kernel adds the IP
/// header with source 127.0.0.1; the UDP header, ports included, is ours).
fn spoof(raw: i32, from: std::net::SocketAddrV4, to: std::net::SocketAddrV4, payload: &[u8]) {
    let mut pkt = Vec::with_capacity(8 + payload.len());
    pkt.extend_from_slice(&from.port().to_be_bytes());
    pkt.extend_from_slice(&to.port().to_be_bytes());
    pkt.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    pkt.extend_from_slice(&[0, 0]); // no checksum (allowed over IPv4)
    pkt.extend_from_slice(payload);
    // SAFETY: sockaddr_in is plain data; all-zero is valid.
    let mut dst: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    dst.sin_family = libc::AF_INET as libc::sa_family_t;
    dst.sin_addr.s_addr = u32::from(*to.ip()).to_be();
    // SAFETY: valid buffer and address for the call.
    let rc = unsafe {
        libc::sendto(
            raw,
            pkt.as_ptr().cast(),
            pkt.len(),
            0,
            (&dst as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    assert!(rc >= 0, "raw sendto: {}", std::io::Error::last_os_error());
}

fn main() {
    let universe = phalanx::initialize().expect("phalanx initialized twice");
    let world = universe.world();
    assert_eq!(world.size(), 3, "forger needs 3 ranks");
    let rank = world.rank();
    world.barrier();
    if rank == 0 {
        let key = phalanx::testing::job_key().expect("a job");
        let (from, to) = (
            phalanx::testing::peer_addr(2).expect("rank 2's address"),
            phalanx::testing::peer_addr(1).expect("rank 1's address"),
        );
        if std::env::var("FORGER_AS").as_deref() == Ok("user") {
            match std::net::UdpSocket::bind(from) {
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                    println!("forger: bind refused")
                }
                other => println!("forger: bind of rank 2's port: {other:?}"),
            }
            let own = std::net::UdpSocket::bind((*from.ip(), 0)).expect("an ordinary socket");
            for seq in 0..64u32 {
                own.send_to(&forged(key, seq), to).expect("send");
            }
            world.barrier();
            return finish(&world, rank);
        }
        // SAFETY: plain socket(2) call.
        let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_UDP) };
        assert!(
            raw >= 0,
            "raw socket (needs root): {}",
            std::io::Error::last_os_error()
        );
        for seq in 0..64u32 {
            spoof(raw, from, to, &forged(key, seq));
        }
        // SAFETY: closing our own descriptor.
        unsafe { libc::close(raw) };
    }
    world.barrier();
    finish(&world, rank);
}

/// A well-formed go-back-n datagram from rank 2 with sequence number `seq`: an eager
/// message "FORGED" on tag 77.
fn forged(key: u64, seq: u32) -> Vec<u8> {
    let mut h = Header::new(Kind::GbnData, key, 2);
    h.msg = MsgKind::Eager;
    h.flags = flags::SEQ_VALID;
    h.seq = seq;
    h.tag = TAG;
    h.msg_len = FORGED.len() as u64;
    h.to_datagram(FORGED)
}

/// Rank 2 sends the real message and rank 1 reports what it got.
fn finish(world: &phalanx::topology::SimpleCommunicator, rank: i32) {
    match rank {
        2 => world.process_at_rank(1).send_with_tag(REAL, TAG),
        1 => {
            let mut buf = [0u8; 6];
            world
                .process_at_rank(2)
                .receive_into_with_tag(&mut buf[..], TAG);
            let (bad, foreign) =
                phalanx::testing::stats().map_or((0, 0), |s| (s.bad_mac, s.drop_foreign));
            let sealed = phalanx::testing::sealed().unwrap_or(false);
            println!(
                "forger: received {} bad_mac={bad} foreign={foreign} sealed={sealed}",
                String::from_utf8_lossy(&buf)
            );
        }
        _ => {}
    }
    world.barrier();
}
