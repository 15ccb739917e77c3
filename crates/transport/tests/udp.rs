//! UdpTransport over 127.0.0.1 with ephemeral ports.

mod common;

use std::time::Duration;

use common::{drain, pair, LO};
use phalanx_transport::{wait_readable, Transport, UdpTransport};

#[test]
fn max_datagram_on_loopback_is_65507() {
    let t = UdpTransport::bind(LO).unwrap();
    assert_eq!(t.max_datagram(), 65507);
    assert_eq!(*t.local_addr().ip(), LO);
    assert_ne!(t.local_addr().port(), 0);
    assert_eq!(t.fds().len(), 1);
    assert_eq!(t.next_deadline(), None);
}

#[test]
fn granted_receive_buffer_is_counted_in_full_size_datagrams() {
    let t = UdpTransport::bind(LO).unwrap();
    // Whatever the kernel granted, it holds at least one datagram of the largest size
    // (the default buffer alone is over 200 KiB), and counts it at no less than its size.
    let frames = t.recv_frames();
    assert!(frames >= 1, "{frames}");
    assert!(frames <= (512 << 20) / 65507, "{frames}");
}

#[test]
fn other_loopback_address_uses_lo_mtu() {
    // 127.0.0.2 is not an exact interface address; the subnet match finds lo.
    let t = UdpTransport::bind("127.0.0.2".parse().unwrap()).unwrap();
    assert_eq!(t.max_datagram(), 65507);
}

#[test]
fn exchange_small_and_large() {
    let (mut a, mut b) = pair();
    assert!(a.send_to(1, b"hello").unwrap());
    let (got, _) = drain(&mut b, 1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, a.local_addr());
    assert_eq!(got[0].1, b"hello");

    let big: Vec<u8> = (0..65000u32).map(|i| (i % 251) as u8).collect();
    assert!(b.send_to(0, &big).unwrap());
    let max: Vec<u8> = vec![0xab; 65507];
    assert!(b.send_to(0, &max).unwrap());
    let (got, _) = drain(&mut a, 2);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].0, b.local_addr());
    assert_eq!(got[0].1, big);
    assert_eq!(got[1].1, max);

    let sa = a.stats();
    assert_eq!(sa.sent, 1);
    assert_eq!(sa.received, 2);
    assert_eq!(b.stats().received, 1);
}

#[test]
fn errors_for_oversize_and_unknown_rank() {
    let (mut a, _b) = pair();
    let e = a.send_to(1, &vec![0u8; 65508]).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    let e = a.send_to(7, b"x").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(a.stats().sent, 0);
}

#[test]
fn burst_of_1000_drained_in_batches() {
    let (mut a, mut b) = pair();
    for i in 0..1000u32 {
        let mut d = [0u8; 100];
        d[..4].copy_from_slice(&i.to_le_bytes());
        assert!(a.send_to(1, &d).unwrap());
    }
    assert_eq!(a.stats().sent, 1000);
    let (got, batches) = drain(&mut b, 1000);
    let drops = b.stats().kernel_drops as usize;
    assert_eq!(
        got.len() + drops,
        1000,
        "received {} kernel drops {drops}",
        got.len()
    );
    assert_eq!(drops, 0, "32 MiB receive buffer should hold the burst");
    // Batches are bounded by the batch size and some carry more than one datagram.
    assert!(batches.iter().all(|&n| (1..=32).contains(&n)));
    assert!(batches.iter().any(|&n| n > 1), "batches {batches:?}");
    assert!(batches.len() >= 1000 / 32);
    let st = b.stats();
    assert_eq!(st.received, 1000);
    assert_eq!(st.recv_batches, batches.len() as u64);
    // Loopback keeps order.
    for (i, (_, d)) in got.iter().enumerate() {
        assert_eq!(u32::from_le_bytes(d[..4].try_into().unwrap()), i as u32);
    }
}

#[test]
fn recv_batch_empty_does_not_block() {
    let (_a, mut b) = pair();
    let n = b
        .recv_batch(&mut |_, _| panic!("nothing was sent"))
        .unwrap();
    assert_eq!(n, 0);
    assert_eq!(b.stats().recv_batches, 0);
}

#[test]
fn wait_readable_timeout_and_pending() {
    let (mut a, mut b) = pair();
    // Nothing pending: returns false after the timeout.
    assert!(!wait_readable(&b.fds(), Some(Duration::from_millis(20))).unwrap());
    assert!(!wait_readable(&b.fds(), Some(Duration::ZERO)).unwrap());
    // Data pending: returns true.
    a.send_to(1, b"ping").unwrap();
    assert!(wait_readable(&b.fds(), Some(Duration::from_secs(5))).unwrap());
    // Still pending until drained; with no timeout it returns at once.
    assert!(wait_readable(&b.fds(), None).unwrap());
    let (got, _) = drain(&mut b, 1);
    assert_eq!(got.len(), 1);
    assert!(!wait_readable(&b.fds(), Some(Duration::from_millis(1))).unwrap());
}

#[test]
fn transport_is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<UdpTransport>();
    // And usable from another thread.
    let (mut a, mut b) = pair();
    let h = std::thread::spawn(move || {
        a.send_to(1, b"from thread").unwrap();
        a
    });
    let _a = h.join().unwrap();
    let (got, _) = drain(&mut b, 1);
    assert_eq!(got[0].1, b"from thread");
}

#[test]
fn kernel_drops_are_reported() {
    let (mut a, mut b) = pair();
    // Shrink b's receive buffer so a burst overflows it.
    let small: libc::c_int = 4096;
    // SAFETY: b's fd is an open socket; we pass a live c_int and its size.
    let rc = unsafe {
        libc::setsockopt(
            b.fds()[0],
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&small as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
    for _ in 0..500 {
        a.send_to(1, &[7u8; 1000]).unwrap();
    }
    let (first, _) = drain(&mut b, 500);
    // The drop counter travels with the next datagram queued after the drops.
    a.send_to(1, b"marker").unwrap();
    let (second, _) = drain(&mut b, 1);
    assert_eq!(second.len(), 1);
    let st = b.stats();
    assert!(st.kernel_drops > 0, "{st:?}");
    assert_eq!(first.len() as u64 + 1 + st.kernel_drops, 501, "{st:?}");
}

#[test]
fn authenticated_transports_take_only_sealed_datagrams() {
    use phalanx_transport::mac::{datagram_key, TRAILER};
    let (mut a, mut b) = pair();
    let key = datagram_key(&[42; 32]);
    a.authenticate(&key, 0);
    b.authenticate(&key, 1);
    assert_eq!(a.max_datagram(), 65507 - TRAILER);
    // Sealed both ways, whole-size too, by send_to and by multi-send.
    assert!(a.send_to(1, b"hello").unwrap());
    let max = vec![0x5a; a.max_datagram()];
    assert_eq!(a.multi_send(&max, &[1]).unwrap(), 1);
    let (got, _) = drain(&mut b, 2);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].1, b"hello");
    assert_eq!(got[1].1, max);
    // A stranger (the job key is not the point here): plain bytes, a copy of a sealed
    // datagram with its payload changed, and a datagram sealed under another key.
    let mut s = UdpTransport::bind(LO).unwrap();
    s.set_peers(vec![b.local_addr(), b.local_addr()]);
    assert!(s
        .send_to(1, b"plain bytes, no trailer at all, long enough")
        .unwrap());
    s.authenticate(&datagram_key(&[43; 32]), 0);
    assert!(s.send_to(1, b"hello").unwrap());
    let (got, _) = drain(&mut b, 1);
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(b.stats().bad_mac, 2);
    assert_eq!(b.stats().received, 2);
    // The right key again (the counter goes on: no nonce of rank 2 repeats): taken.
    s.authenticate(&key, 2);
    assert!(s.send_to(1, b"again").unwrap());
    let (got, _) = drain(&mut b, 1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, b"again");
}

#[test]
fn runs_leave_segmented_and_arrive_as_their_datagrams() {
    use phalanx_transport::mac::datagram_key;
    // Sealed and plain, receivers coalescing (GRO) or not: every datagram of a run
    // arrives whole, in order, opened on its own; a stranger's run is dropped datagram
    // by datagram.
    for (sealed, gro) in [(true, true), (true, false), (false, true), (false, false)] {
        let (mut a, mut b) = pair();
        if sealed {
            let key = datagram_key(&[7; 32]);
            a.authenticate(&key, 0);
            b.authenticate(&key, 1);
        }
        a.set_segmentation(true);
        b.set_segmentation(gro);
        // 1400-byte datagrams as over a 1500-byte MTU, then a short one, then a run that
        // no batch may join (longer than the first).
        let data: Vec<Vec<u8>> = (0..100u32)
            .map(|i| {
                let len = match i {
                    0..=89 => 1400,
                    90 => 333,
                    _ => 1500,
                };
                (0..len).map(|j| (i * 7 + j) as u8).collect()
            })
            .collect();
        let run: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
        assert_eq!(
            a.send_run(1, &run).unwrap(),
            100,
            "sealed {sealed} gro {gro}"
        );
        // Fewer system calls than datagrams: 44 + 44 + 3 (last 1400s and the 333), then
        // the 1500s, which form a batch of their own.
        let calls = a.stats().send_calls;
        assert!(calls < 10, "{calls} send calls for 100 datagrams");
        assert_eq!(a.stats().sent, 100);
        let (got, _) = drain(&mut b, 100);
        assert_eq!(got.len(), 100, "sealed {sealed} gro {gro}");
        for (g, d) in got.iter().zip(&data) {
            assert_eq!(&g.1, d);
        }
        assert_eq!(b.stats().received, 100);
        assert_eq!(b.stats().bad_mac, 0);
    }
}

#[test]
fn a_strangers_segmented_run_is_dropped_datagram_by_datagram() {
    use phalanx_transport::mac::datagram_key;
    let (_a, mut b) = pair();
    b.authenticate(&datagram_key(&[7; 32]), 1);
    b.set_segmentation(true);
    let mut s = UdpTransport::bind(LO).unwrap();
    s.set_peers(vec![b.local_addr(), b.local_addr()]);
    s.authenticate(&datagram_key(&[8; 32]), 0);
    s.set_segmentation(true);
    let data = vec![vec![1u8; 1000]; 10];
    let run: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
    assert_eq!(s.send_run(1, &run).unwrap(), 10);
    let (got, _) = drain(&mut b, 1);
    assert!(got.is_empty());
    assert_eq!(b.stats().bad_mac, 10);
}

#[test]
fn datagrams_in_pieces_arrive_as_their_concatenation() {
    use phalanx_transport::mac::datagram_key;
    use phalanx_transport::Parts;
    // A header and a payload left where it lies: short ones (gathered into one staging
    // buffer, sealed whole) and long ones (one iovec per piece, sealed in pieces), in
    // segmented runs and alone, sealed and plain: on the wire, their concatenation.
    for sealed in [true, false] {
        let (mut a, mut b) = pair();
        if sealed {
            let key = datagram_key(&[5; 32]);
            a.authenticate(&key, 0);
            b.authenticate(&key, 1);
        }
        a.set_segmentation(true);
        b.set_segmentation(true);
        let payload: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for (body, count) in [(1380usize, 50usize), (9000, 5), (1380, 1), (20_000, 1)] {
            let heads: Vec<Vec<u8>> = (0..count).map(|i| vec![i as u8; 36]).collect();
            let run: Vec<Parts<'_>> = heads
                .iter()
                .enumerate()
                .map(|(i, h)| [&h[..], &payload[i * body..(i + 1) * body]])
                .collect();
            let before = a.stats().send_calls;
            assert_eq!(a.send_run_parts(1, &run).unwrap(), count);
            if count > 1 {
                assert!(a.stats().send_calls - before < count as u64, "segmented");
            }
            let (got, _) = drain(&mut b, count);
            assert_eq!(got.len(), count, "sealed {sealed} body {body}");
            for (g, d) in got.iter().zip(&run) {
                assert_eq!(g.1, [d[0], d[1]].concat(), "sealed {sealed} body {body}");
            }
        }
        assert_eq!(b.stats().bad_mac, 0);
    }
}
