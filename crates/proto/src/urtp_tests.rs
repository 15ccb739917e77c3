use super::*;
use phalanx_wire::{flags, mcast::TargetsView, stamp, Header, Kind, MsgKind, Packet, HEADER_LEN};

const KEY: u64 = 0x5eed;
const MS: u64 = 1_000_000;

/// A transmitted datagram: (from, dest, targets, bytes).
type Wire = Vec<(u32, UrtpDest, Targets, Vec<u8>)>;

fn cfg() -> UrtpConfig {
    UrtpConfig::default()
}

fn group(n: u32, c: UrtpConfig) -> Vec<Urtp> {
    (0..n).map(|r| Urtp::new(c.clone(), KEY, r, n)).collect()
}

fn hdr(tag: i32, aux: u64) -> Header {
    let mut h = Header::new(Kind::UrtpData, 0, 0);
    h.msg = MsgKind::Eager;
    h.context = 9;
    h.tag = tag;
    h.aux32 = 77;
    h.aux = aux;
    h.msg_len = 3;
    h
}

fn t(ranks: &[u32]) -> Targets {
    Targets::from_ranks(ranks)
}

fn drain(u: &mut Urtp, from: u32, now: u64) -> Wire {
    let mut v = Vec::new();
    while let Some(tx) = u.poll_transmit(now) {
        v.push((from, tx.dest, tx.targets.clone(), tx.bytes.to_vec()));
        assert!(v.len() < 100_000, "poll_transmit does not terminate");
    }
    v
}

fn drain_all(g: &mut [Urtp], now: u64) -> Wire {
    let mut v = Vec::new();
    for (i, u) in g.iter_mut().enumerate() {
        v.extend(drain(u, i as u32, now));
    }
    v
}

fn feed(u: &mut Urtp, now: u64, d: &[u8]) -> UrtpVerdict {
    let p = Packet::new_checked(d).expect("valid datagram");
    u.handle_packet(now, &p)
}

/// Delivers `wire` (multicast to its targets) unless `lose(from, to, bytes)`.
fn deliver(g: &mut [Urtp], now: u64, wire: &Wire, mut lose: impl FnMut(u32, u32, &[u8]) -> bool) {
    for (from, dest, targets, bytes) in wire {
        let to: Vec<u32> = match dest {
            UrtpDest::Unicast(r) => vec![*r],
            UrtpDest::Multicast => targets.iter().collect(),
        };
        for r in to {
            if !lose(*from, r, bytes) {
                let _ = feed(&mut g[r as usize], now, bytes);
            }
        }
    }
}

/// Pops everything available from `src` at `u`, returning the `aux` fields.
fn pop_all(u: &mut Urtp, now: u64, src: u32) -> Vec<u64> {
    let mut v = Vec::new();
    while let Some(p) = u.peek(src) {
        v.push(p.aux());
        u.pop(now, src);
    }
    v
}

fn kind_of(b: &[u8]) -> Kind {
    Packet::new_checked(b).expect("valid").kind()
}

#[test]
fn targets_bitset() {
    let a = Targets::from_ranks(&[70, 3, 3, 0, 64]);
    assert_eq!(a.iter().collect::<Vec<_>>(), vec![0, 3, 64, 70]);
    assert_eq!(a.len(), 4);
    assert!(a.contains(64) && !a.contains(65) && !a.contains(1000));
    assert_eq!(a.max(), Some(70));
    let mut b = Targets::from_ranks(&[0, 3, 64, 70, 200]);
    b.remove(200);
    assert_eq!(a, b);
    b.remove(70);
    b.remove(64);
    assert_eq!(b, Targets::from_ranks(&[3, 0]));
    assert_eq!(Targets::single(5).iter().collect::<Vec<_>>(), vec![5]);
    assert!(Targets::new().is_empty());
    assert_eq!(format!("{:?}", Targets::from_ranks(&[1, 2])), "{1, 2}");
}

#[test]
fn unicast_and_multicast_share_one_fifo() {
    let mut g = group(4, cfg());
    let s = &mut g[0];
    s.send(0, &t(&[1]), &hdr(0, 0), b"abc").unwrap();
    s.send(0, &t(&[1, 2, 3]), &hdr(1, 1), b"def").unwrap();
    s.send(0, &t(&[2]), &hdr(2, 2), b"ghi").unwrap();
    s.send(0, &t(&[1, 3]), &hdr(3, 3), b"jkl").unwrap();
    let wire = drain(&mut g[0], 0, 0);
    assert_eq!(wire.len(), 4);
    assert_eq!(wire[0].1, UrtpDest::Unicast(1));
    assert_eq!(wire[1].1, UrtpDest::Multicast);
    assert_eq!(wire[1].2, t(&[1, 2, 3]));
    // The multicast packet carries each target's own counter at the fixed offset.
    let p = Packet::new_checked(&wire[1].3).unwrap();
    assert_ne!(p.flags() & flags::MULTICAST, 0);
    assert_eq!(p.seq(), 0);
    let v = TargetsView::of_packet(&p, 4).unwrap();
    assert_eq!(v.iter().collect::<Vec<_>>(), vec![(1, 1), (2, 0), (3, 0)]);
    let p = Packet::new_checked(&wire[3].3).unwrap();
    let v = TargetsView::of_packet(&p, 4).unwrap();
    assert_eq!(v.iter().collect::<Vec<_>>(), vec![(1, 2), (3, 1)]);
    // Deliver in reverse order: everything is buffered and consumed in order.
    let mut rev = wire.clone();
    rev.reverse();
    deliver(&mut g, 1, &rev, |_, _, _| false);
    assert_eq!(pop_all(&mut g[1], 1, 0), vec![0, 1, 3]);
    assert_eq!(pop_all(&mut g[2], 1, 0), vec![1, 2]);
    assert_eq!(pop_all(&mut g[3], 1, 0), vec![1, 3]);
    assert_eq!(g[1].stats().buffered_out_of_order, 2);
    // Multicast payload and caller fields survive; peek shows the unicast form.
    let mut g2 = group(4, cfg());
    deliver(&mut g2, 1, &wire, |_, _, _| false);
    g2[2].pop(1, 0);
    let p = g2[2].peek(0).unwrap();
    assert_eq!(
        (p.kind(), p.seq(), p.tag(), p.aux()),
        (Kind::UrtpData, 1, 2, 2)
    );
    let p = g2[3].peek(0).unwrap();
    assert_eq!(p.flags() & flags::MULTICAST, 0);
    assert_eq!(p.extension().len(), 0);
    assert_eq!((p.context(), p.aux32(), p.msg_len()), (9, 77, 3));
    assert_eq!(p.payload(), b"def");
    assert_eq!(p.msg_kind(), MsgKind::Eager);
}

#[test]
fn acks_free_the_window_only_when_every_target_acked() {
    let mut c = cfg();
    c.window = 2;
    c.block_ack_threshold = 1;
    let mut g = group(3, c);
    let all = t(&[1, 2]);
    g[0].send(0, &all, &hdr(0, 0), b"a").unwrap();
    g[0].send(0, &all, &hdr(0, 1), b"b").unwrap();
    assert_eq!(g[0].send_space(&all), 0);
    assert_eq!(
        g[0].send(0, &all, &hdr(0, 2), b"c"),
        Err(UrtpSendError::WindowFull { peer: 1 })
    );
    let w = drain(&mut g[0], 0, 0);
    deliver(&mut g, 0, &w, |_, _, _| false);
    // Only rank 1 consumes: its block ACK (threshold 1) frees rank 1's window only.
    assert_eq!(pop_all(&mut g[1], 1, 0), vec![0, 1]);
    let w = drain_all(&mut g, 1);
    assert!(w.iter().all(|x| kind_of(&x.3) == Kind::UrtpAck));
    deliver(&mut g, 1, &w, |_, _, _| false);
    assert_eq!(g[0].send_space(&t(&[1])), 2);
    assert_eq!(g[0].send_space(&all), 0);
    assert!(!g[0].all_acked());
    assert_eq!(g[0].unacked_peers(), vec![2]);
    assert_eq!(g[0].store.iter().flatten().count(), 2, "kept for rank 2");
    assert_eq!(pop_all(&mut g[2], 2, 0), vec![0, 1]);
    let w = drain_all(&mut g, 2);
    deliver(&mut g, 2, &w, |_, _, _| false);
    assert!(g[0].all_acked());
    assert_eq!(g[0].store.iter().flatten().count(), 0, "buffers freed");
}

#[test]
fn lost_multicast_is_requested_and_resent_point_to_point() {
    let mut g = group(3, cfg());
    g[0].send(0, &t(&[1, 2]), &hdr(5, 0), b"xyz").unwrap();
    let w = drain(&mut g[0], 0, 0);
    // Rank 2 loses it.
    deliver(&mut g, 10, &w, |_, to, _| to == 2);
    assert!(g[2].peek(0).is_none());
    g[2].want(20, 0);
    assert_eq!(g[2].poll_timeout(), Some(20 + MS));
    assert!(drain(&mut g[2], 2, 20).is_empty());
    // First REQ δ after the want.
    g[2].handle_timeout(20 + MS);
    let w = drain(&mut g[2], 2, 20 + MS);
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].1, UrtpDest::Unicast(0));
    let req = Packet::new_checked(&w[0].3).unwrap();
    assert_eq!((req.kind(), req.seq()), (Kind::UrtpReq, 0));
    // The packet left exactly δ before: not "recent" any more, resent point-to-point.
    assert_eq!(feed(&mut g[0], MS, &w[0].3), UrtpVerdict::Control);
    let r = drain(&mut g[0], 0, MS);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].1, UrtpDest::Unicast(2));
    assert_eq!(r[0].2, t(&[2]));
    let p = Packet::new_checked(&r[0].3).unwrap();
    assert_eq!(p.flags() & flags::MULTICAST, 0);
    assert_ne!(p.flags() & flags::RETRANSMIT, 0);
    assert_eq!((p.seq(), p.tag(), p.payload()), (0, 5, &b"xyz"[..]));
    assert_eq!(g[0].stats().resent, 1);
    // A second REQ right after the re-send is ignored as recent.
    assert_eq!(feed(&mut g[0], MS + 10, &w[0].3), UrtpVerdict::Control);
    assert!(drain(&mut g[0], 0, MS + 10).is_empty());
    assert_eq!(g[0].stats().reqs_ignored_recent, 1);
    assert_eq!(
        feed(&mut g[2], MS + 20, &r[0].3),
        UrtpVerdict::Buffered { ready: true }
    );
    // The want expired with the arrival: no more REQs.
    assert_eq!(g[2].poll_timeout(), None);
    assert_eq!(pop_all(&mut g[2], MS + 20, 0), vec![0]);
}

#[test]
fn req_backoff_unsent_and_implicit_ack() {
    let mut g = group(2, cfg());
    // Receiver wants a packet the sender never sent: REQs back off exponentially.
    g[1].want(0, 0);
    let mut times = Vec::new();
    let mut now = 0;
    for _ in 0..12 {
        now = g[1].poll_timeout().unwrap();
        g[1].handle_timeout(now);
        let w = drain(&mut g[1], 1, now);
        assert_eq!(w.len(), 1);
        times.push(now);
        deliver(&mut g, now, &w, |_, _, _| false);
        assert!(drain(&mut g[0], 0, now).is_empty());
    }
    let gaps: Vec<u64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(times[0], MS);
    assert_eq!(&gaps[..4], &[2 * MS, 4 * MS, 8 * MS, 16 * MS]);
    assert!(gaps.iter().all(|&d| d <= 100 * MS));
    assert_eq!(*gaps.last().unwrap(), 100 * MS);
    assert_eq!(g[0].stats().reqs_ignored_unsent, 12);
    assert_eq!(g[0].last_sent_to(1), None);
    // Now three packets; the receiver gets #0 and #2, consumes #0 and REQs #1, which
    // implicitly acks #0.
    for i in 0..3 {
        g[0].send(now, &t(&[1]), &hdr(0, i), b"p").unwrap();
    }
    let w = drain(&mut g[0], 0, now);
    assert_eq!(g[0].last_sent_to(1), Some(2));
    deliver(&mut g, now, &w, |_, _, b| {
        Packet::new_checked(b).unwrap().aux() == 1
    });
    assert_eq!(pop_all(&mut g[1], now, 0), vec![0]);
    // The gap at the consume point triggers an immediate REQ for #1.
    let w = drain(&mut g[1], 1, now);
    assert_eq!(w.len(), 1);
    let req = Packet::new_checked(&w[0].3).unwrap();
    assert_eq!((req.kind(), req.seq()), (Kind::UrtpReq, 1));
    assert_eq!(g[0].send_space(&t(&[1])), 61);
    deliver(&mut g, now + 2 * MS, &w, |_, _, _| false);
    assert_eq!(g[0].send_space(&t(&[1])), 62, "REQ acked #0");
    let r = drain(&mut g[0], 0, now + 2 * MS);
    assert_eq!(r.len(), 1);
    deliver(&mut g, now + 2 * MS, &r, |_, _, _| false);
    assert_eq!(pop_all(&mut g[1], now + 2 * MS, 0), vec![1, 2]);
}

#[test]
fn block_ack_delayed_ack_and_piggyback() {
    let mut c = cfg();
    c.block_ack_threshold = 3;
    let mut g = group(2, c);
    for i in 0..5 {
        g[0].send(0, &t(&[1]), &hdr(0, i), b"x").unwrap();
    }
    let w = drain(&mut g[0], 0, 0);
    deliver(&mut g, 0, &w, |_, _, _| false);
    // Two consumed: below the threshold, a delayed ACK is armed.
    g[1].pop(0, 0);
    g[1].pop(0, 0);
    assert!(drain(&mut g[1], 1, 0).is_empty());
    assert!(g[1].owes_acks());
    assert_eq!(g[1].poll_timeout(), Some(2 * MS));
    // Third: block ACK at once.
    g[1].pop(0, 0);
    let w = drain(&mut g[1], 1, 0);
    assert_eq!(w.len(), 1);
    let a = Packet::new_checked(&w[0].3).unwrap();
    assert_eq!((a.kind(), a.ack()), (Kind::UrtpAck, 2));
    assert_eq!(g[1].poll_timeout(), None);
    deliver(&mut g, 0, &w, |_, _, _| false);
    assert_eq!(g[0].unacked_peers(), vec![1]);
    // One more consumed, then unicast data the other way piggy-backs the ACK.
    g[1].pop(0, 0);
    g[1].send(0, &t(&[0]), &hdr(0, 0), b"back").unwrap();
    let w = drain(&mut g[1], 1, 0);
    assert_eq!(w.len(), 1);
    let d = Packet::new_checked(&w[0].3).unwrap();
    assert_ne!(d.flags() & flags::ACK_VALID, 0);
    assert_eq!(d.ack(), 3);
    assert!(!g[1].owes_acks());
    deliver(&mut g, 0, &w, |_, _, _| false);
    assert_eq!(g[0].send_space(&t(&[1])), 63);
    // Last one: delayed ACK fires.
    g[1].pop(10, 0);
    assert_eq!(g[1].poll_timeout(), Some(10 + 2 * MS));
    g[1].handle_timeout(10 + 2 * MS);
    let w = drain(&mut g[1], 1, 10 + 2 * MS);
    deliver(&mut g, 10 + 2 * MS, &w, |_, _, _| false);
    assert!(g[0].all_acked());
    // flush_acks covers the reverse direction at Finalize.
    let w = drain(&mut g[0], 0, 3 * MS);
    assert!(w.is_empty());
    g[0].pop(3 * MS, 1);
    g[0].flush_acks(3 * MS);
    let w = drain(&mut g[0], 0, 3 * MS);
    assert_eq!(kind_of(&w[0].3), Kind::UrtpAck);
    deliver(&mut g, 3 * MS, &w, |_, _, _| false);
    assert!(g[1].all_acked());
}

#[test]
fn safety_net_recovers_a_lost_final_ack() {
    let mut g = group(3, cfg());
    // Larger than PROBE_MIN: the safety net probes instead of re-sending it.
    let big = vec![7u8; PROBE_MIN + 1];
    g[0].send(0, &t(&[1, 2]), &hdr(0, 0), &big).unwrap();
    let w = drain(&mut g[0], 0, 0);
    deliver(&mut g, 0, &w, |_, _, _| false);
    g[1].pop(0, 0);
    g[2].pop(0, 0);
    g[1].flush_acks(0);
    g[2].flush_acks(0);
    let w = drain_all(&mut g, 0);
    // Rank 2's ACK is lost.
    deliver(&mut g, 0, &w, |from, _, _| from == 2);
    assert_eq!(g[0].unacked_peers(), vec![2]);
    let at = g[0].poll_timeout().unwrap();
    assert_eq!(at, 20 * MS);
    g[0].handle_timeout(at);
    let w = drain(&mut g[0], 0, at);
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].1, UrtpDest::Unicast(2));
    // A probe, not the data again: a header-sized ACK asking for one back.
    assert_eq!(kind_of(&w[0].3), Kind::UrtpAck);
    let p = Packet::new_checked(&w[0].3).unwrap();
    assert_ne!(p.flags() & flags::ACK_REQUEST, 0);
    assert_eq!(p.payload().len(), 0);
    assert_eq!(p.seq(), 1, "names the first counter not transmitted");
    assert_eq!(feed(&mut g[2], at, &w[0].3), UrtpVerdict::Control);
    let a = drain(&mut g[2], 2, at);
    assert_eq!(a.len(), 1, "an ACK and no REQ: nothing is missing");
    assert_eq!(kind_of(&a[0].3), Kind::UrtpAck);
    deliver(&mut g, at, &a, |_, _, _| false);
    assert!(g[0].all_acked());
    assert_eq!(g[0].poll_timeout(), None);
    assert_eq!((g[0].stats().probes_sent, g[0].stats().resent), (1, 0));
}

#[test]
fn safety_net_resends_a_small_packet_itself() {
    let mut g = group(2, cfg());
    g[0].send(0, &t(&[1]), &hdr(0, 0), b"last").unwrap();
    let w = drain(&mut g[0], 0, 0);
    deliver(&mut g, 0, &w, |_, _, _| false);
    g[1].pop(0, 0);
    g[1].flush_acks(0);
    let _lost = drain(&mut g[1], 1, 0);
    let at = g[0].poll_timeout().unwrap();
    g[0].handle_timeout(at);
    let w = drain(&mut g[0], 0, at);
    assert_eq!(w.len(), 1);
    assert_eq!(kind_of(&w[0].3), Kind::UrtpData);
    let p = Packet::new_checked(&w[0].3).unwrap();
    assert_ne!(p.flags() & flags::ACK_REQUEST, 0);
    assert_eq!(feed(&mut g[1], at, &w[0].3), UrtpVerdict::Duplicate);
    let a = drain(&mut g[1], 1, at);
    deliver(&mut g, at, &a, |_, _, _| false);
    assert!(g[0].all_acked());
    assert_eq!((g[0].stats().rto_resent, g[0].stats().probes_sent), (1, 0));
}

#[test]
fn a_probe_recovers_a_lost_packet_nobody_waits_for() {
    let mut g = group(2, cfg());
    let big = vec![1u8; PROBE_MIN + 1];
    for aux in 0..3 {
        g[0].send(0, &t(&[1]), &hdr(0, aux), &big).unwrap();
    }
    let w = drain(&mut g[0], 0, 0);
    // The last packet is lost; the receiver consumes the others and waits for nothing.
    deliver(&mut g, 0, &w[..2].to_vec(), |_, _, _| false);
    assert_eq!(pop_all(&mut g[1], 0, 0), vec![0, 1]);
    g[1].flush_acks(0);
    let a = drain(&mut g[1], 1, 0);
    deliver(&mut g, 0, &a, |_, _, _| false);
    assert_eq!(g[0].unacked_peers(), vec![1]);
    // The safety net probes; the receiver answers with its ACK and a REQ for counter 2.
    let at = g[0].poll_timeout().unwrap();
    g[0].handle_timeout(at);
    let w = drain(&mut g[0], 0, at);
    assert_eq!(w.len(), 1);
    deliver(&mut g, at, &w, |_, _, _| false);
    let back = drain(&mut g[1], 1, at);
    let kinds: Vec<Kind> = back.iter().map(|b| kind_of(&b.3)).collect();
    assert!(kinds.contains(&Kind::UrtpReq), "{kinds:?}");
    deliver(&mut g, at, &back, |_, _, _| false);
    // The sender re-sends it (the REQ names a packet sent long enough ago).
    let r = drain(&mut g[0], 0, at);
    assert_eq!(r.len(), 1);
    assert_eq!(kind_of(&r[0].3), Kind::UrtpData);
    deliver(&mut g, at, &r, |_, _, _| false);
    assert_eq!(pop_all(&mut g[1], at, 0), vec![2]);
    assert_eq!(g[0].stats().resent, 1);
}

#[test]
fn unresponsive_peer_is_reported_once() {
    let mut c = cfg();
    c.max_backoffs = 5;
    let mut g = group(2, c);
    g[1].want(0, 0);
    let mut events = Vec::new();
    for _ in 0..20 {
        let now = g[1].poll_timeout().unwrap();
        g[1].handle_timeout(now);
        let _ = drain(&mut g[1], 1, now);
        events.extend(std::iter::from_fn(|| g[1].poll_event()));
    }
    assert_eq!(events, vec![UrtpEvent::PeerUnresponsive { peer: 0 }]);
    assert_eq!(g[1].stats().reqs_sent, 20);
}

#[test]
fn send_errors() {
    let mut g = group(3, cfg());
    let h = hdr(0, 0);
    assert_eq!(
        g[0].send(0, &Targets::new(), &h, b""),
        Err(UrtpSendError::NoTargets)
    );
    assert_eq!(
        g[0].send(0, &t(&[0, 1]), &h, b""),
        Err(UrtpSendError::BadTarget { rank: 0 })
    );
    assert_eq!(
        g[0].send(0, &t(&[3]), &h, b""),
        Err(UrtpSendError::BadTarget { rank: 3 })
    );
    assert_eq!(g[0].send_space(&t(&[0, 1])), 0);
    assert_eq!(g[0].send_space(&t(&[7])), 0);
    assert_eq!(g[0].send_space(&Targets::new()), 0);
    g[0].set_max_datagram(100);
    assert_eq!(g[0].max_payload(1), 44);
    assert_eq!(g[0].max_payload(2), 44 - 9);
    assert!(g[0].send(0, &t(&[1]), &h, &[0; 44]).is_ok());
    assert_eq!(
        g[0].send(0, &t(&[1]), &h, &[0; 45]),
        Err(UrtpSendError::TooLarge { len: 101, max: 100 })
    );
    assert!(g[0].send(0, &t(&[1, 2]), &h, &[0; 35]).is_ok());
    assert!(g[0].send(0, &t(&[1, 2]), &h, &[0; 36]).is_err());
    assert_eq!(drain(&mut g[0], 0, 0).len(), 2);
}

#[test]
fn a_unicast_limit_lets_packets_to_that_peer_alone_grow() {
    let mut g = group(4, cfg());
    let h = hdr(0, 0);
    g[0].set_max_datagram(100);
    // Rank 1 is reached through a path that takes 300 bytes (a rank of this host);
    // a limit below the group's changes nothing.
    g[0].set_unicast_max_datagram(1, 300);
    g[0].set_unicast_max_datagram(2, 50);
    assert_eq!(g[0].max_payload_to(&t(&[1])), 300 - HEADER_LEN);
    assert_eq!(g[0].max_payload_to(&t(&[2])), 100 - HEADER_LEN);
    assert_eq!(g[0].max_payload_to(&t(&[3])), 100 - HEADER_LEN);
    // To several targets (rank 1 among them) the group's limit holds.
    assert_eq!(g[0].max_payload_to(&t(&[1, 2])), g[0].max_payload(2));
    let big = vec![7u8; 300 - HEADER_LEN];
    assert!(g[0].send(0, &t(&[1]), &h, &big).is_ok());
    assert_eq!(
        g[0].send(0, &t(&[1]), &h, &[0; 300 - HEADER_LEN + 1]),
        Err(UrtpSendError::TooLarge { len: 301, max: 300 })
    );
    assert_eq!(
        g[0].send(0, &t(&[2]), &h, &big),
        Err(UrtpSendError::TooLarge { len: 300, max: 100 })
    );
    assert!(g[0].send(0, &t(&[1, 2]), &h, &big).is_err());
    // The large packet is delivered whole and in order.
    let wire = drain(&mut g[0], 0, 0);
    assert_eq!(wire.len(), 1);
    assert_eq!(wire[0].3.len(), 300);
    deliver(&mut g, 1, &wire, |_, _, _| false);
    assert_eq!(g[1].peek(0).map(|p| p.payload().to_vec()), Some(big));
}

#[test]
fn not_target_duplicates_and_window_bounds() {
    let mut c = cfg();
    c.window = 4;
    let mut g = group(4, c);
    g[0].send(0, &t(&[1, 2]), &hdr(0, 0), b"m").unwrap();
    let w = drain(&mut g[0], 0, 0);
    assert_eq!(feed(&mut g[3], 0, &w[0].3), UrtpVerdict::NotTarget);
    assert_eq!(g[3].stats().not_target, 1);
    assert_eq!(
        feed(&mut g[1], 0, &w[0].3),
        UrtpVerdict::Buffered { ready: true }
    );
    assert_eq!(feed(&mut g[1], 0, &w[0].3), UrtpVerdict::Duplicate);
    g[1].pop(0, 0);
    assert_eq!(feed(&mut g[1], 0, &w[0].3), UrtpVerdict::Duplicate);
    assert_eq!(g[1].stats().duplicates, 2);
    // A forged packet beyond the receive window is dropped, not buffered.
    let mut h = hdr(0, 0);
    h.flags = flags::SEQ_VALID;
    h.job_key = KEY;
    h.seq = 1 + 4;
    let d = h.to_datagram(b"far");
    assert_eq!(
        feed(&mut g[1], 0, &d),
        UrtpVerdict::Dropped("beyond the receive window")
    );
    assert_eq!(g[1].buffered(), 0);
    // ACK for a counter never sent is invalid and changes nothing.
    let mut a = Header::new(Kind::UrtpAck, KEY, 1);
    a.flags = flags::ACK_VALID;
    a.ack = 5;
    assert!(matches!(
        feed(&mut g[0], 0, &a.to_datagram(&[])),
        UrtpVerdict::Invalid(_)
    ));
    assert_eq!(g[0].unacked_peers(), vec![1, 2]);
    // Foreign key, own rank, GBN kind.
    let mut f = Header::new(Kind::UrtpAck, KEY + 1, 1);
    f.flags = flags::ACK_VALID;
    assert!(matches!(
        feed(&mut g[0], 0, &f.to_datagram(&[])),
        UrtpVerdict::Invalid(_)
    ));
    let mut o = Header::new(Kind::UrtpReq, KEY, 0);
    o.seq = 0;
    assert!(matches!(
        feed(&mut g[0], 0, &o.to_datagram(&[])),
        UrtpVerdict::Invalid(_)
    ));
    let gb = Header::new(Kind::GbnAck, KEY, 1);
    assert!(matches!(
        feed(&mut g[0], 0, &gb.to_datagram(&[])),
        UrtpVerdict::Invalid(_)
    ));
    assert_eq!(g[0].stats().invalid, 4);
}

#[test]
fn counters_wrap() {
    let mut c = cfg();
    c.initial_seq = u32::MAX - 2;
    c.window = 4;
    c.block_ack_threshold = 2;
    let mut g = group(3, c);
    let mut got = (Vec::new(), Vec::new());
    for round in 0..10u64 {
        for i in 0..4 {
            let tg = if i % 2 == 0 { t(&[1, 2]) } else { t(&[1]) };
            g[0].send(round, &tg, &hdr(0, round * 4 + i), b"w").unwrap();
        }
        let w = drain(&mut g[0], 0, round);
        // Deliver backwards, lose nothing.
        let mut w2 = w.clone();
        w2.reverse();
        deliver(&mut g, round, &w2, |_, _, _| false);
        got.0.extend(pop_all(&mut g[1], round, 0));
        got.1.extend(pop_all(&mut g[2], round, 0));
        g[1].flush_acks(round);
        g[2].flush_acks(round);
        let w = drain_all(&mut g, round);
        deliver(&mut g, round, &w, |_, _, _| false);
        assert!(g[0].all_acked(), "round {round}");
    }
    assert_eq!(got.0, (0..40).collect::<Vec<_>>());
    assert_eq!(got.1, (0..40).step_by(2).collect::<Vec<_>>());
    assert_eq!(g[0].last_sent_to(1), Some((u32::MAX - 2).wrapping_add(39)));
}

/// A tiny deterministic generator (the crate has no RNG dependency).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Seeded random and mutated datagrams (incl. mutated multicast extensions) never panic
/// and never break the bounds; afterwards the engines still work.
#[test]
fn random_and_mutated_input_is_safe() {
    let n = 5;
    for seed in 0..40u64 {
        let mut rng = Lcg(seed);
        let mut c = cfg();
        c.window = 1 + rng.below(8) as u32;
        c.initial_seq = if seed % 2 == 0 { u32::MAX - 3 } else { 0 };
        let mut g = group(n, c.clone());
        // Valid traffic as mutation material.
        let mut corpus: Vec<Vec<u8>> = Vec::new();
        for i in 0..6 {
            let tg = match i % 3 {
                0 => t(&[1, 2, 3, 4]),
                1 => t(&[2]),
                _ => t(&[1, 4]),
            };
            let _ = g[0].send(0, &tg, &hdr(i, i as u64), &[i as u8; 7]);
        }
        for (_, _, _, b) in drain(&mut g[0], 0, 0) {
            corpus.push(b);
        }
        g[2].want(0, 0);
        g[2].handle_timeout(MS);
        corpus.extend(drain(&mut g[2], 2, MS).into_iter().map(|w| w.3));
        let mut now = MS;
        for _ in 0..3000 {
            let mut d = corpus[rng.below(corpus.len() as u64) as usize].clone();
            match rng.below(5) {
                0 => {
                    // Random bytes with a valid-looking header.
                    let len = HEADER_LEN + rng.below(60) as usize;
                    d = (0..len).map(|_| rng.next() as u8).collect();
                    d[0..2].copy_from_slice(&phalanx_wire::MAGIC.to_le_bytes());
                    d[2] = phalanx_wire::VERSION;
                    d[3] = 3 + rng.below(3) as u8;
                    d[4] = 0;
                    d[6] = rng.below(40) as u8;
                    d[7] = 0;
                    d[8..16].copy_from_slice(&KEY.to_le_bytes());
                    d[16..20].copy_from_slice(&(rng.below(7) as u32).to_le_bytes());
                }
                1 => {
                    // Mutate the multicast extension / header fields.
                    for _ in 0..1 + rng.below(4) {
                        let i = rng.below(d.len() as u64) as usize;
                        d[i] = rng.next() as u8;
                    }
                }
                2 => {
                    let i = HEADER_LEN.min(d.len() - 1) + rng.below(8) as usize;
                    if i < d.len() {
                        d[i] ^= 1 << rng.below(8);
                    }
                }
                3 => {
                    // Seq/ack/flags/ext_len fuzz.
                    let v = rng.next() as u32;
                    let _ = match rng.below(3) {
                        0 => stamp::seq(&mut d, v),
                        1 => stamp::ack(&mut d, v),
                        _ => stamp::flags(&mut d, v as u8),
                    };
                    if rng.below(4) == 0 {
                        d[6] = rng.next() as u8;
                    }
                }
                _ => {}
            }
            let to = rng.below(n as u64) as usize;
            if let Ok(p) = Packet::new_checked(&d) {
                let _ = g[to].handle_packet(now, &p);
            }
            now += rng.below(3 * MS);
            let r = rng.below(n as u64) as u32;
            match rng.below(6) {
                0 => g[to].want(now, r),
                1 => g[to].pop(now, r),
                2 => g[to].handle_timeout(now),
                3 => g[to].flush_acks(now),
                _ => {}
            }
            let _ = g[to].peek(r).map(|p| p.payload().len());
            let u = &mut g[to];
            let mut k = 0;
            while let Some(tx) = u.poll_transmit(now) {
                assert!(Packet::new_checked(tx.bytes).is_ok());
                k += 1;
                assert!(k < 10_000);
            }
            while u.poll_event().is_some() {}
            assert!(u.buffered() <= (n as usize - 1) * c.window as usize + c.rx_extra as usize);
            assert!(u.timers.len() <= 3 * n as usize);
            assert!(u.peers.iter().all(|p| p.resend.len() <= RESEND_QUEUE_MAX));
            let _ = (
                u.all_acked(),
                u.unacked_peers(),
                u.last_sent_to(r),
                u.poll_timeout(),
            );
        }
    }
}

#[test]
fn runs_hand_over_what_single_polls_would() {
    // Data to one peer (or multicast to one target set) in a row comes as runs; control
    // datagrams and data going elsewhere end a run; the datagrams and their order are
    // poll_transmit's.
    let build = || {
        let mut g = group(4, cfg());
        for i in 0..50 {
            g[0].send(0, &t(&[1]), &hdr(i, 0), b"abc").unwrap();
        }
        for i in 0..3 {
            g[0].send(0, &t(&[1, 2, 3]), &hdr(50 + i, 0), b"def")
                .unwrap();
        }
        g[0].send(0, &t(&[1, 2]), &hdr(55, 0), b"def").unwrap();
        for i in 0..5 {
            g[0].send(0, &t(&[2]), &hdr(60 + i, 0), b"ghi").unwrap();
        }
        // Rank 3 sends to rank 0, which then owes it an ACK (control work).
        g[3].send(0, &t(&[0]), &hdr(99, 0), b"xyz").unwrap();
        let w = drain(&mut g[3], 3, 0);
        feed(&mut g[0], 0, &w[0].3);
        g.swap_remove(0)
    };
    let mut single = build();
    let mut runs = build();
    let want = drain(&mut single, 0, 5 * MS);
    let mut got: Wire = Vec::new();
    let mut lens = Vec::new();
    while runs.poll_transmit_run(5 * MS, 64, |tx, run| {
        lens.push(run.len());
        for d in run {
            got.push((0, tx.dest, tx.targets.clone(), d.to_vec()));
        }
    }) {
        assert!(got.len() < 100_000, "poll_transmit_run does not terminate");
    }
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!((g.1, &g.3), (w.1, &w.3));
    }
    assert!(lens.iter().any(|&n| n > 40), "{lens:?}");
    assert!(
        lens.contains(&3),
        "the three multicasts to 1, 2, 3: {lens:?}"
    );
}

#[test]
fn in_order_unicast_is_consumed_straight_from_the_datagram() {
    let mut c = cfg();
    c.block_ack_threshold = 2;
    let mut g = group(2, c);
    for aux in 0..4 {
        g[0].send(0, &t(&[1]), &hdr(1, aux), b"abc").unwrap();
    }
    let w = drain(&mut g[0], 0, 0);
    assert_eq!(w.len(), 4);
    let offer = |u: &mut Urtp, d: &[u8], take: bool, seen: &mut Vec<u64>| {
        let p = Packet::new_checked(d).expect("valid datagram");
        u.handle_packet_consume(0, &p, &mut |q| {
            assert_eq!(q.payload(), b"abc");
            seen.push(q.aux());
            take
        })
    };
    let mut seen = Vec::new();
    // In order, taken: consumed without a buffer.
    assert_eq!(
        offer(&mut g[1], &w[0].3, true, &mut seen),
        UrtpVerdict::Consumed
    );
    assert!(g[1].peek(0).is_none());
    // Out of order (counter 2 before 1): never offered, buffered.
    assert_eq!(
        offer(&mut g[1], &w[2].3, true, &mut seen),
        UrtpVerdict::Buffered { ready: false }
    );
    // In order but something is buffered behind it: buffered, consumed in order by pop.
    assert_eq!(
        offer(&mut g[1], &w[1].3, true, &mut seen),
        UrtpVerdict::Buffered { ready: true }
    );
    assert_eq!(pop_all(&mut g[1], 0, 0), vec![1, 2]);
    // In order, refused by the caller: buffered as usual.
    assert_eq!(
        offer(&mut g[1], &w[3].3, false, &mut seen),
        UrtpVerdict::Buffered { ready: true }
    );
    assert_eq!(seen, vec![0, 3]);
    assert_eq!(pop_all(&mut g[1], 0, 0), vec![3]);
    // A duplicate of the consumed packet is recognised as one.
    assert_eq!(
        offer(&mut g[1], &w[0].3, true, &mut seen),
        UrtpVerdict::Duplicate
    );
    assert_eq!(g[1].stats().delivered, 4);
    // The ACK debt of all four (block threshold 2) went back to the sender.
    let acks = drain(&mut g[1], 1, 0);
    assert!(!acks.is_empty());
    for a in &acks {
        assert_eq!(feed(&mut g[0], 0, &a.3), UrtpVerdict::Control);
    }
    assert_eq!(g[0].send_space(&t(&[1])), g[0].config().window);
}
