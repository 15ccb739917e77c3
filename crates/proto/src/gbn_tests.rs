use super::*;
use phalanx_wire::MsgKind;

const KEY: u64 = 42;

fn cfg() -> GbnConfig {
    GbnConfig::default()
}

fn data(src: u32, n: u8) -> Vec<u8> {
    let mut h = Header::new(Kind::GbnData, KEY, src);
    h.msg = MsgKind::Eager;
    h.to_datagram(&[n; 3])
}

fn drain(g: &mut Gbn, now: u64) -> Vec<(u32, Vec<u8>)> {
    let mut v = Vec::new();
    while let Some((p, b)) = g.poll_transmit(now) {
        v.push((p, b.to_vec()));
        assert!(v.len() < 100_000, "poll_transmit does not terminate");
    }
    v
}

/// Bytes a window may refer to.
struct Bytes(Vec<u8>);

impl Shared for Bytes {
    fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// Feeds one datagram; accepts it if deliverable.
fn feed(g: &mut Gbn, now: u64, d: &[u8]) -> Verdict {
    let p = Packet::new_checked(d).expect("valid datagram");
    let v = g.handle_packet(now, &p);
    if v == Verdict::Deliver {
        g.accept(now, p.src());
    }
    v
}

fn pair(c: GbnConfig) -> (Gbn, Gbn) {
    (Gbn::new(c.clone(), KEY, 0, 2), Gbn::new(c, KEY, 1, 2))
}

fn pkt(d: &[u8]) -> Packet<'_> {
    Packet::new_checked(d).expect("valid")
}

#[test]
fn in_order_delivery_and_piggyback() {
    let (mut a, mut b) = pair(cfg());
    for i in 0..5 {
        a.send(0, 1, data(0, i)).expect("space");
    }
    assert_eq!(a.send_space(1), 123);
    let out = drain(&mut a, 0);
    assert_eq!(out.len(), 5);
    for (i, (p, d)) in out.iter().enumerate() {
        assert_eq!(*p, 1);
        let k = pkt(d);
        assert_eq!(k.seq(), i as u32);
        assert_eq!(k.flags() & flags::SEQ_VALID, flags::SEQ_VALID);
        assert_eq!(k.flags() & flags::ACK_VALID, 0, "nothing received yet");
        assert_eq!(feed(&mut b, 1, d), Verdict::Deliver);
    }
    // Lazy: nothing sent back (below threshold), but a delayed ACK is armed.
    assert!(drain(&mut b, 1).is_empty());
    assert!(b.owes_acks());
    assert_eq!(b.poll_timeout(), Some(1 + 1_000_000));
    // Reverse data piggy-backs the ACK and clears the debt.
    b.send(2, 0, data(1, 9)).expect("space");
    let back = drain(&mut b, 2);
    assert_eq!(back.len(), 1);
    let k = pkt(&back[0].1);
    assert_eq!(k.ack(), 4);
    assert_ne!(k.flags() & flags::ACK_VALID, 0);
    assert!(!b.owes_acks());
    assert!(!a.all_acked());
    assert_eq!(feed(&mut a, 3, &back[0].1), Verdict::Deliver);
    assert!(a.all_acked());
    assert_eq!(a.send_space(1), 128);
    assert_eq!(a.stats().data_sent, 5);
    assert_eq!(b.stats().delivered, 5);
}

#[test]
fn window_full_returns_datagram() {
    let c = GbnConfig { window: 3, ..cfg() };
    let (mut a, _) = pair(c);
    for i in 0..3 {
        a.send(0, 1, data(0, i)).expect("space");
    }
    assert_eq!(a.send_space(1), 0);
    let d = data(0, 7);
    assert_eq!(a.send(0, 1, d.clone()), Err(d.clone()));
    assert_eq!(a.send(0, 5, d.clone()), Err(d.clone()), "unknown peer");
    assert_eq!(a.send(0, 1, vec![1, 2]), Err(vec![1, 2]), "short");
    assert_eq!(a.unacked_peers(), vec![1]);
}

#[test]
fn windows_are_bounded_in_bytes_too() {
    // Datagrams of HEADER_LEN + 3 bytes; 3 of them reach a 2.5-datagram byte budget.
    let len = data(0, 0).len();
    let c = GbnConfig {
        window: 100,
        window_bytes: len * 5 / 2,
        ack_threshold: 100,
        ack_bytes: len * 2,
        ..cfg()
    };
    let (mut a, mut b) = pair(c);
    for i in 0..3 {
        assert!(a.send_space(1) > 0, "bytes left before datagram {i}");
        a.send(0, 1, data(0, i)).expect("space");
    }
    assert_eq!(a.send_space(1), 0, "the byte budget is reached");
    let d = data(0, 9);
    assert_eq!(a.send(0, 1, d.clone()), Err(d));
    // A tail counts with its bytes: one long datagram alone is always let through.
    let (mut t, _) = pair(GbnConfig {
        window_bytes: 10,
        ..cfg()
    });
    let big: Arc<dyn Shared> = Arc::new(Bytes(vec![3; 1000]));
    let head = data(0, 1);
    t.send_tail(0, 1, head.clone(), Tail::new(big.clone(), 0, 1000).unwrap())
        .expect("an empty window takes one datagram");
    assert!(t
        .send_tail(0, 1, head, Tail::new(big, 0, 1000).unwrap())
        .is_err());
    // The receiver owes a pure ACK after `ack_bytes`: here after 2 datagrams, not 100.
    let out = drain(&mut a, 0);
    assert_eq!(out.len(), 3);
    assert_eq!(feed(&mut b, 1, &out[0].1), Verdict::Deliver);
    assert!(
        drain(&mut b, 1).is_empty(),
        "one datagram's bytes owe nothing yet"
    );
    assert_eq!(feed(&mut b, 1, &out[1].1), Verdict::Deliver);
    let acks = drain(&mut b, 1);
    assert_eq!(acks.len(), 1, "pure ACK after ack_bytes");
    assert_eq!(pkt(&acks[0].1).ack(), 1);
    // It frees the bytes of the two acknowledged datagrams.
    assert_eq!(feed(&mut a, 2, &acks[0].1), Verdict::AckOnly);
    assert_eq!(a.send_space(1), 99);
    a.send(0, 1, data(0, 3)).expect("space again");
    a.send(0, 1, data(0, 4)).expect("space again");
    assert_eq!(a.send_space(1), 0);
}

#[test]
fn lazy_ack_threshold_and_delay() {
    let (mut a, mut b) = pair(cfg());
    for i in 0..20 {
        a.send(0, 1, data(0, i)).expect("space");
    }
    let out = drain(&mut a, 0);
    for (i, (_, d)) in out.iter().enumerate() {
        assert_eq!(feed(&mut b, 10, d), Verdict::Deliver);
        let acks = drain(&mut b, 10);
        if i == 15 {
            assert_eq!(acks.len(), 1, "pure ACK after 16 packets");
            let k = pkt(&acks[0].1);
            assert_eq!((k.kind(), k.ack()), (Kind::GbnAck, 15));
            assert_eq!(feed(&mut a, 11, &acks[0].1), Verdict::AckOnly);
        } else {
            assert!(acks.is_empty(), "no ACK at packet {i}");
        }
    }
    assert_eq!(a.unacked_peers(), vec![1]);
    // The remaining 4 are acked by the delayed-ACK timer.
    let t = b.poll_timeout().expect("delayed ack armed");
    assert_eq!(t, 10 + 1_000_000);
    b.handle_timeout(t - 1);
    assert!(drain(&mut b, t - 1).is_empty());
    b.handle_timeout(t);
    let acks = drain(&mut b, t);
    assert_eq!(acks.len(), 1);
    assert_eq!(feed(&mut a, t, &acks[0].1), Verdict::AckOnly);
    assert!(a.all_acked());
    assert_eq!(a.poll_timeout(), None, "timer stopped once all acked");
    assert_eq!(b.poll_timeout(), None);
}

#[test]
fn eager_ack_and_ack_request() {
    let (mut a, mut b) = pair(GbnConfig {
        eager_ack: true,
        ..cfg()
    });
    a.send(0, 1, data(0, 1)).expect("space");
    let out = drain(&mut a, 0);
    assert_eq!(feed(&mut b, 1, &out[0].1), Verdict::Deliver);
    assert_eq!(drain(&mut b, 1).len(), 1);

    let (mut a, mut b) = pair(cfg());
    let mut d = data(0, 1);
    stamp::flags(&mut d, flags::ACK_REQUEST).expect("len");
    a.send(0, 1, d).expect("space");
    let out = drain(&mut a, 0);
    assert_ne!(
        pkt(&out[0].1).flags() & flags::ACK_REQUEST,
        0,
        "caller flag kept"
    );
    assert_eq!(feed(&mut b, 1, &out[0].1), Verdict::Deliver);
    assert_eq!(drain(&mut b, 1).len(), 1, "ACK_REQUEST acked at once");
}

#[test]
fn not_accepted_is_retransmitted() {
    let (mut a, mut b) = pair(cfg());
    a.send(0, 1, data(0, 1)).expect("space");
    let out = drain(&mut a, 0);
    let p = pkt(&out[0].1);
    assert_eq!(b.handle_packet(1, &p), Verdict::Deliver);
    // Not accepted: the same packet is deliverable again.
    assert_eq!(b.handle_packet(2, &p), Verdict::Deliver);
    b.accept(2, 0);
    assert_eq!(b.handle_packet(3, &p), Verdict::Duplicate);
    // accept without a pending delivery does nothing.
    b.accept(3, 0);
    assert_eq!(b.stats().delivered, 1);
}

#[test]
fn out_of_order_dup_ack_is_rate_limited_and_triggers_fast_retransmit() {
    let (mut a, mut b) = pair(cfg());
    for i in 0..10 {
        a.send(0, 1, data(0, i)).expect("space");
    }
    let out = drain(&mut a, 0);
    assert_eq!(feed(&mut b, 1, &out[0].1), Verdict::Deliver);
    // Packet 1 lost: 2..10 arrive out of order.
    for (_, d) in &out[2..] {
        assert_eq!(feed(&mut b, 1, d), Verdict::OutOfOrder);
    }
    let acks = drain(&mut b, 1);
    assert_eq!(
        acks.len(),
        1,
        "one dup ACK for a burst of out-of-order packets"
    );
    assert_eq!(b.stats().dup_acks_sent, 1);
    let k = pkt(&acks[0].1);
    assert_eq!((k.kind(), k.ack()), (Kind::GbnAck, 0));
    // The sender: ACK progress to 0 with a GAP (a partial ACK) goes back from 1 at once;
    // the same report again, in the same recovery, changes nothing.
    assert_eq!(feed(&mut a, 2, &acks[0].1), Verdict::AckOnly);
    assert_eq!(
        a.stats().fast_retransmits,
        1,
        "a GAP that advances is a loss too"
    );
    assert_eq!(feed(&mut a, 2, &acks[0].1), Verdict::AckOnly);
    assert_eq!(a.stats().fast_retransmits, 1);
    let rtx = drain(&mut a, 2);
    assert_eq!(rtx.len(), 9);
    assert_ne!(pkt(&rtx[0].1).flags() & flags::RETRANSMIT, 0);
    assert_ne!(
        pkt(&rtx[8].1).flags() & flags::ACK_REQUEST,
        0,
        "last of burst"
    );
    // Another dup ACK in the same episode does not go back again.
    assert_eq!(feed(&mut a, 2, &acks[0].1), Verdict::AckOnly);
    assert!(drain(&mut a, 2).is_empty());
    for (_, d) in &rtx {
        assert_eq!(feed(&mut b, 3, d), Verdict::Deliver);
    }
    let acks = drain(&mut b, 3);
    assert_eq!(acks.len(), 1, "ACK_REQUEST on the last retransmission");
    assert_eq!(feed(&mut a, 4, &acks[0].1), Verdict::AckOnly);
    assert!(a.all_acked());
}

#[test]
fn timeout_backoff_clamp_and_unresponsive() {
    let c = GbnConfig {
        max_backoffs: 8,
        ..cfg()
    };
    let (mut a, _) = pair(c);
    a.send(0, 1, data(0, 1)).expect("space");
    assert_eq!(drain(&mut a, 0).len(), 1);
    let mut t = a.poll_timeout().expect("timer armed");
    assert_eq!(t, 4_000_000);
    let mut gaps = Vec::new();
    for i in 0..8 {
        a.handle_timeout(t);
        let r = drain(&mut a, t);
        assert_eq!(r.len(), 1);
        if i < 3 {
            assert_eq!(pkt(&r[0].1).kind(), Kind::GbnAck, "three probes first");
        } else {
            assert_ne!(pkt(&r[0].1).flags() & flags::RETRANSMIT, 0);
        }
        let n = a.poll_timeout().expect("re-armed");
        gaps.push(n - t);
        t = n;
    }
    assert_eq!(
        gaps,
        vec![8, 16, 32, 64, 100, 100, 100, 100]
            .into_iter()
            .map(|ms| ms * 1_000_000)
            .collect::<Vec<u64>>()
    );
    assert_eq!(a.poll_event(), Some(GbnEvent::PeerUnresponsive { peer: 1 }));
    assert_eq!(a.poll_event(), None);
    a.handle_timeout(t);
    assert_eq!(a.poll_event(), None, "reported once per episode");
    assert_eq!(a.stats().timeouts, 9);
}

#[test]
fn rto_adapts_and_backoff_ends_with_progress() {
    let (mut a, mut b) = pair(GbnConfig { probes: 1, ..cfg() });
    a.send(0, 1, data(0, 1)).expect("space");
    a.send(0, 1, data(0, 2)).expect("space");
    let out = drain(&mut a, 0);
    a.handle_timeout(4_000_000);
    let probe = drain(&mut a, 4_000_000);
    assert_eq!(probe.len(), 1, "a probe, nothing re-sent");
    assert_eq!(pkt(&probe[0].1).kind(), Kind::GbnAck);
    assert_eq!(a.poll_timeout(), Some(12_000_000), "backed off to 8 ms");
    a.handle_timeout(12_000_000);
    let rtx = drain(&mut a, 12_000_000);
    assert_eq!(rtx.len(), 1, "go back: the left edge first");
    assert_eq!(a.poll_timeout(), Some(28_000_000), "backed off to 16 ms");
    // The first original arrives late and is acknowledged: progress (no sample, Karn)
    // ends the back-off.
    assert_eq!(feed(&mut b, 13_000_000, &out[0].1), Verdict::Deliver);
    b.flush_acks(13_000_000);
    let acks = drain(&mut b, 13_000_000);
    assert_eq!(feed(&mut a, 13_000_000, &acks[0].1), Verdict::AckOnly);
    assert_eq!(a.poll_timeout(), Some(17_000_000), "back-off ended");
    // A packet sent once and acknowledged 1 ms later is a valid sample: the timeout
    // falls back to SRTT + 4 RTTVAR, here clamped up to rto_initial (4 ms).
    a.send(14_000_000, 1, data(0, 3)).expect("space");
    let new = drain(&mut a, 14_000_000);
    assert_eq!(feed(&mut b, 15_000_000, &out[1].1), Verdict::Deliver);
    let fresh = new
        .iter()
        .find(|(_, d)| pkt(d).seq() == 2)
        .expect("the new packet");
    assert_eq!(feed(&mut b, 15_000_000, &fresh.1), Verdict::Deliver);
    b.flush_acks(15_000_000);
    for (_, d) in drain(&mut b, 15_000_000) {
        assert_eq!(feed(&mut a, 15_000_000, &d), Verdict::AckOnly);
    }
    assert!(a.all_acked());
    a.send(16_000_000, 1, data(0, 4)).expect("space");
    let _ = drain(&mut a, 16_000_000);
    assert_eq!(a.poll_timeout(), Some(20_000_000), "reset by the sample");
}

#[test]
fn rto_follows_a_slow_receiver() {
    let (mut a, mut b) = pair(cfg());
    a.send(0, 1, data(0, 1)).expect("space");
    let out = drain(&mut a, 0);
    assert_eq!(
        a.poll_timeout(),
        Some(4_000_000),
        "rto_initial before any sample"
    );
    // Answered 3 ms later (a receiver busy elsewhere): SRTT 3 ms, RTTVAR 1.5 ms.
    assert_eq!(feed(&mut b, 3_000_000, &out[0].1), Verdict::Deliver);
    b.flush_acks(3_000_000);
    for (_, d) in drain(&mut b, 3_000_000) {
        let _ = feed(&mut a, 3_000_000, &d);
    }
    a.send(4_000_000, 1, data(0, 2)).expect("space");
    let _ = drain(&mut a, 4_000_000);
    assert_eq!(
        a.poll_timeout(),
        Some(4_000_000 + 9_000_000),
        "SRTT + 4 RTTVAR"
    );
}

#[test]
fn only_a_gap_triggers_fast_retransmit() {
    let (mut a, mut b) = pair(cfg());
    for n in 0..3 {
        a.send(0, 1, data(0, n)).expect("space");
    }
    let out = drain(&mut a, 0);
    // A duplicate of the first packet: its duplicate ACK carries no GAP and makes the
    // sender re-send nothing.
    assert_eq!(feed(&mut b, 10, &out[0].1), Verdict::Deliver);
    b.flush_acks(10);
    for (_, d) in drain(&mut b, 10) {
        assert_eq!(feed(&mut a, 10, &d), Verdict::AckOnly);
    }
    assert_eq!(feed(&mut b, 20, &out[0].1), Verdict::Duplicate);
    let dup = drain(&mut b, 20);
    assert_eq!(dup.len(), 1);
    assert_eq!(
        Packet::new_checked(&dup[0].1).unwrap().flags() & flags::GAP,
        0
    );
    assert_eq!(feed(&mut a, 20, &dup[0].1), Verdict::AckOnly);
    assert!(
        drain(&mut a, 20).is_empty(),
        "no retransmission for a duplicate"
    );
    // The second packet lost: the third arrives out of order, its duplicate ACK
    // reports the gap, and the sender goes back at once.
    assert_eq!(feed(&mut b, 30_000_000, &out[2].1), Verdict::OutOfOrder);
    let gap = drain(&mut b, 30_000_000);
    assert_ne!(
        Packet::new_checked(&gap[0].1).unwrap().flags() & flags::GAP,
        0
    );
    assert_eq!(feed(&mut a, 30_000_000, &gap[0].1), Verdict::AckOnly);
    let again = drain(&mut a, 30_000_000);
    assert_eq!(again.len(), 2, "fast retransmit of both in flight");
    assert_eq!(a.stats().fast_retransmits, 1);
}

#[test]
fn sequence_wrap() {
    let c = GbnConfig {
        initial_seq: u32::MAX - 3,
        window: 4,
        ..cfg()
    };
    let (mut a, mut b) = pair(c);
    let mut got = 0;
    for round in 0..10u8 {
        while a.send_space(1) > 0 {
            a.send(0, 1, data(0, round)).expect("space");
        }
        for (_, d) in drain(&mut a, 0) {
            assert_eq!(feed(&mut b, 0, &d), Verdict::Deliver);
            got += 1;
        }
        b.flush_acks(0);
        for (_, d) in drain(&mut b, 0) {
            assert_eq!(feed(&mut a, 0, &d), Verdict::AckOnly);
        }
        assert!(a.all_acked());
    }
    assert_eq!(got, 40);
}

#[test]
fn invalid_packets() {
    let (mut a, _) = pair(cfg());
    let mut h = Header::new(Kind::GbnData, KEY, 5);
    h.flags = flags::SEQ_VALID;
    let d = h.to_datagram(&[]);
    assert!(matches!(a.handle_packet(0, &pkt(&d)), Verdict::Invalid(_)));
    // ACK for a never-sent sequence number.
    let mut h = Header::new(Kind::GbnAck, KEY, 1);
    h.flags = flags::ACK_VALID;
    h.ack = 0;
    let d = h.to_datagram(&[]);
    assert!(matches!(a.handle_packet(0, &pkt(&d)), Verdict::Invalid(_)));
    // Data without SEQ_VALID, pure ACK without ACK_VALID.
    let d = Header::new(Kind::GbnData, KEY, 1).to_datagram(&[]);
    assert!(matches!(a.handle_packet(0, &pkt(&d)), Verdict::Invalid(_)));
    let d = Header::new(Kind::GbnAck, KEY, 1).to_datagram(&[]);
    assert!(matches!(a.handle_packet(0, &pkt(&d)), Verdict::Invalid(_)));
    assert_eq!(a.stats().invalid, 4);
    assert!(a.all_acked());
    // The initial "nothing received" ACK (initial_seq - 1) is valid.
    let mut h = Header::new(Kind::GbnAck, KEY, 1);
    h.flags = flags::ACK_VALID;
    h.ack = u32::MAX;
    let d = h.to_datagram(&[]);
    assert_eq!(a.handle_packet(0, &pkt(&d)), Verdict::AckOnly);
}

#[test]
fn stream_to_self() {
    let mut a = Gbn::new(cfg(), KEY, 0, 1);
    a.send(0, 0, data(0, 1)).expect("space");
    for (p, d) in drain(&mut a, 0) {
        assert_eq!(p, 0);
        assert_eq!(feed(&mut a, 0, &d), Verdict::Deliver);
    }
    a.flush_acks(0);
    for (_, d) in drain(&mut a, 0) {
        assert_eq!(feed(&mut a, 0, &d), Verdict::AckOnly);
    }
    assert!(a.all_acked() && !a.owes_acks());
}

#[test]
fn retx_after_timeout_starts_at_one_and_is_clocked_by_acks() {
    let c = GbnConfig {
        retx_burst: 4,
        ack_threshold: 1,
        probes: 1,
        ..cfg()
    };
    let (mut a, mut b) = pair(c);
    for i in 0..10 {
        a.send(0, 1, data(0, i)).expect("space");
    }
    let _lost = drain(&mut a, 0);
    a.handle_timeout(4_000_000);
    let probe = drain(&mut a, 4_000_000);
    assert_eq!(probe.len(), 1, "a probe after the first timeout (lost too)");
    a.handle_timeout(12_000_000);
    // Only the left edge, asking for an ACK: the receiver may just have been slow.
    let mut r = drain(&mut a, 12_000_000);
    assert_eq!(r.len(), 1, "the left edge after the second timeout");
    assert_ne!(pkt(&r[0].1).flags() & flags::ACK_REQUEST, 0);
    assert_ne!(pkt(&r[0].1).flags() & flags::RETRANSMIT, 0);
    // Each ACK advance doubles what may be re-sent, up to retx_burst beyond the edge.
    let mut sizes = Vec::new();
    let mut t = 12_000_001;
    while !r.is_empty() {
        for (_, d) in &r {
            assert_eq!(feed(&mut b, t, d), Verdict::Deliver);
        }
        for (_, d) in drain(&mut b, t) {
            let _ = feed(&mut a, t, &d);
        }
        r = drain(&mut a, t);
        sizes.push(r.len());
        t += 1;
    }
    assert_eq!(sizes, [2, 4, 3, 0], "released by ACK progress");
    assert!(a.all_acked());
}

/// A process stopped with packets in flight (gang scheduling) postpones its timers by the
/// stopped time when it resumes: the stop costs no retransmission and no back-off, and
/// the retransmission timer still fires as late as it would have without the stop.
#[test]
fn postponed_timers_do_not_count_a_stop() {
    const STOP: u64 = 3_600_000_000_000;
    let c = GbnConfig {
        max_backoffs: 2,
        ..cfg()
    };
    let (mut a, mut b) = pair(c);
    a.send(0, 1, data(0, 1)).expect("space");
    let out = drain(&mut a, 0);
    assert_eq!(out.len(), 1);
    assert_eq!(a.unacked(1), 1);
    let rto = a.poll_timeout().expect("retransmission timer armed");
    // Stopped at 0 for an hour, resumed: the timer moves by the stopped time.
    a.postpone_timers(STOP);
    assert_eq!(a.poll_timeout(), Some(rto + STOP));
    a.handle_timeout(STOP + rto - 1);
    assert!(
        drain(&mut a, STOP + rto - 1).is_empty(),
        "nothing is due yet"
    );
    assert_eq!(a.stats().timeouts, 0);
    assert!(
        a.poll_event().is_none(),
        "the stop is no silence of the peer"
    );
    // The datagram arrives after all: acknowledged, nothing was retransmitted.
    assert_eq!(feed(&mut b, STOP + 1, &out[0].1), Verdict::Deliver);
    b.flush_acks(STOP + 1);
    for (_, d) in drain(&mut b, STOP + 1) {
        feed(&mut a, STOP + 2, &d);
    }
    assert!(a.all_acked());
    assert_eq!(a.stats().retransmits, 0);
    // Without the postponement the same stop would have fired the timer.
    let (mut a2, _) = pair(cfg());
    a2.send(0, 1, data(0, 1)).expect("space");
    drain(&mut a2, 0);
    a2.handle_timeout(STOP);
    assert_eq!(a2.stats().timeouts, 1);
}

/// A first timeout on a lossless path costs a probe, never a data retransmission: the
/// slow receiver answers it with an ACK of everything.
#[test]
fn probe_answers_a_slow_receiver_without_retransmission() {
    let (mut a, mut b) = pair(cfg());
    for i in 0..3 {
        a.send(0, 1, data(0, i)).expect("space");
    }
    let out = drain(&mut a, 0);
    // The receiver got everything but has not answered yet (lazy ACK, busy elsewhere).
    for (_, d) in &out {
        assert_eq!(feed(&mut b, 1, d), Verdict::Deliver);
    }
    a.handle_timeout(4_000_000);
    let probe = drain(&mut a, 4_000_000);
    assert_eq!(probe.len(), 1);
    let k = pkt(&probe[0].1);
    assert_eq!(k.kind(), Kind::GbnAck);
    assert_ne!(k.flags() & flags::ACK_REQUEST, 0);
    assert_ne!(k.flags() & flags::TX_HINT, 0);
    assert_eq!(k.seq(), 2, "the last sequence number transmitted");
    assert_eq!(feed(&mut b, 4_000_001, &probe[0].1), Verdict::AckOnly);
    let answer = drain(&mut b, 4_000_001);
    assert_eq!(answer.len(), 1, "answered at once");
    assert_eq!(pkt(&answer[0].1).flags() & flags::GAP, 0);
    assert_eq!(feed(&mut a, 4_000_002, &answer[0].1), Verdict::AckOnly);
    assert!(a.all_acked());
    assert!(drain(&mut a, 4_000_002).is_empty());
    assert_eq!(a.stats().retransmits, 0);
    assert_eq!(a.stats().probes, 1);
    assert_eq!(a.poll_timeout(), None);
}

/// A probe to a receiver that lost data is answered with a GAP: everything in flight is
/// re-sent at once (fast retransmit), without a second timeout.
#[test]
fn probe_reveals_a_loss_and_fast_retransmits() {
    let (mut a, mut b) = pair(cfg());
    for i in 0..3 {
        a.send(0, 1, data(0, i)).expect("space");
    }
    let out = drain(&mut a, 0);
    // The first packet is lost; the receiver drops the others as out of order and its
    // duplicate ACKs are lost too.
    for (_, d) in &out[1..] {
        assert_eq!(feed(&mut b, 1, d), Verdict::OutOfOrder);
    }
    let _lost_dups = drain(&mut b, 1);
    a.handle_timeout(4_000_000);
    let probe = drain(&mut a, 4_000_000);
    assert_eq!(feed(&mut b, 4_000_001, &probe[0].1), Verdict::AckOnly);
    let answer = drain(&mut b, 4_000_001);
    assert_eq!(answer.len(), 1);
    assert_ne!(pkt(&answer[0].1).flags() & flags::GAP, 0, "a gap reported");
    assert_eq!(feed(&mut a, 4_000_002, &answer[0].1), Verdict::AckOnly);
    let rtx = drain(&mut a, 4_000_002);
    assert_eq!(rtx.len(), 3, "the whole window re-sent at once");
    for (_, d) in &rtx {
        assert_eq!(feed(&mut b, 4_000_003, d), Verdict::Deliver);
    }
    for (_, d) in drain(&mut b, 4_000_003) {
        let _ = feed(&mut a, 4_000_004, &d);
    }
    assert!(a.all_acked());
    assert_eq!(a.stats().fast_retransmits, 1);
    assert_eq!(a.stats().timeouts, 1);
}

/// In an exchange, the peer's delayed ACK carries its transmit hint: a receiver that
/// lost the peer's packet asks for it (GAP) before any timer of the sender fires.
#[test]
fn transmit_hint_on_a_delayed_ack_reveals_a_loss() {
    let (mut a, mut b) = pair(cfg());
    a.send(0, 1, data(0, 1)).expect("space");
    let _lost = drain(&mut a, 0);
    // b's packet to a arrives; a's delayed ACK for it carries a's transmit hint.
    b.send(0, 0, data(1, 2)).expect("space");
    for (_, d) in drain(&mut b, 0) {
        assert_eq!(feed(&mut a, 1, &d), Verdict::Deliver);
    }
    let t = a.poll_timeout().expect("delayed ACK");
    assert_eq!(t, 1 + 1_000_000, "the delayed ACK comes before the RTO");
    a.handle_timeout(t);
    let ack = drain(&mut a, t);
    assert_eq!(ack.len(), 1);
    assert_eq!(feed(&mut b, t, &ack[0].1), Verdict::AckOnly);
    let gap = drain(&mut b, t);
    assert_eq!(gap.len(), 1);
    assert_ne!(pkt(&gap[0].1).flags() & flags::GAP, 0);
    assert_eq!(feed(&mut a, t + 1, &gap[0].1), Verdict::AckOnly);
    let rtx = drain(&mut a, t + 1);
    assert_eq!(rtx.len(), 1);
    assert_eq!(feed(&mut b, t + 2, &rtx[0].1), Verdict::Deliver);
    assert_eq!(a.stats().timeouts, 0);
    assert_eq!(a.stats().fast_retransmits, 1);
    // A hint the receiver has reached asks for nothing.
    b.flush_acks(t + 2);
    let fine = drain(&mut b, t + 2);
    assert_eq!(feed(&mut a, t + 3, &fine[0].1), Verdict::AckOnly);
    assert!(drain(&mut a, t + 3).is_empty());
}

/// A receiver that refuses a delivered packet (no buffer) is full, not lossy: the
/// sender's probe gets a plain ACK, never a GAP that would burst the window at it.
#[test]
fn a_refused_packet_is_no_gap() {
    let (mut a, mut b) = pair(cfg());
    for i in 0..3 {
        a.send(0, 1, data(0, i)).expect("space");
    }
    let out = drain(&mut a, 0);
    // b delivers the first packet but does not accept it (no buffer), then drops the
    // rest as out of order; its duplicate ACKs are lost.
    assert_eq!(b.handle_packet(1, &pkt(&out[0].1)), Verdict::Deliver);
    for (_, d) in &out[1..] {
        assert_eq!(feed(&mut b, 1, d), Verdict::OutOfOrder);
    }
    let _lost = drain(&mut b, 1);
    a.handle_timeout(4_000_000);
    let probe = drain(&mut a, 4_000_000);
    assert_eq!(feed(&mut b, 4_000_001, &probe[0].1), Verdict::AckOnly);
    let answer = drain(&mut b, 4_000_001);
    assert_eq!(answer.len(), 1, "a probe is always answered");
    assert_eq!(pkt(&answer[0].1).flags() & flags::GAP, 0, "but with no GAP");
    assert_eq!(feed(&mut a, 4_000_002, &answer[0].1), Verdict::AckOnly);
    assert!(
        drain(&mut a, 4_000_002).is_empty(),
        "nothing re-sent at once"
    );
    assert_eq!(a.stats().fast_retransmits, 0);
    // The timeouts go on as before: probes, then the left edge again.
    let rtx = {
        a.handle_timeout(12_000_000);
        a.handle_timeout(28_000_000);
        a.handle_timeout(60_000_000);
        drain(&mut a, 60_000_000)
    };
    assert!(rtx.iter().any(|(_, d)| pkt(d).kind() == Kind::GbnData));
}

#[test]
fn peers_added_later_get_fresh_streams() {
    // Rank 0 of a job of 2 grows to 4; rank 3 (spawned later) talks to it from seq 0.
    let mut a = Gbn::new(cfg(), KEY, 0, 2);
    let mut c = Gbn::new(cfg(), KEY, 3, 4);
    // Before the growth the stranger's datagram is not taken.
    c.send(0, 0, data(3, 1)).expect("space");
    let first = drain(&mut c, 0);
    assert_eq!(first.len(), 1);
    assert_ne!(feed(&mut a, 0, &first[0].1), Verdict::Deliver);
    a.add_peers(4);
    a.add_peers(3); // never shrinks
    assert_eq!(feed(&mut a, 1, &first[0].1), Verdict::Deliver);
    // And rank 0 reaches rank 3 on its own fresh stream.
    a.send(2, 3, data(0, 2)).expect("space");
    let out = drain(&mut a, 2);
    let k = pkt(&out.iter().find(|(p, _)| *p == 3).expect("to rank 3").1);
    assert_eq!(k.seq(), 0);
    assert_eq!(
        feed(&mut c, 3, &out.iter().find(|(p, _)| *p == 3).unwrap().1),
        Verdict::Deliver
    );
}

#[test]
fn runs_hand_over_what_single_polls_would() {
    // Three peers with data, one owed an ACK, one retransmitting: the runs give the very
    // datagrams single polls give, in the same order, each run to one peer.
    let build = || {
        let mut a = Gbn::new(cfg(), KEY, 0, 4);
        let mut b = Gbn::new(cfg(), KEY, 2, 4);
        // Every third datagram with its payload by reference (a tail).
        let shared: Arc<dyn Shared> = Arc::new(Bytes((0..=255).collect()));
        for i in 0..100 {
            if i % 3 == 0 {
                let head = Header::new(Kind::GbnData, KEY, 0).to_datagram(&[i]);
                let tail = Tail::new(shared.clone(), usize::from(i), 7).expect("in range");
                a.send_tail(0, 1, head, tail).expect("space");
            } else {
                a.send(0, 1, data(0, i)).expect("space");
            }
        }
        for i in 0..3 {
            a.send(0, 2, data(0, i)).expect("space");
        }
        // Peer 2 has sent something: rank 0 owes it an ACK (piggy-backed or pure).
        b.send(0, 0, data(2, 9)).expect("space");
        let d = drain(&mut b, 0);
        feed(&mut a, 0, &d[0].1);
        a
    };
    let mut single = build();
    let mut runs = build();
    let want = drain(&mut single, 5);
    let mut got = Vec::new();
    let mut sizes = Vec::new();
    while runs.poll_transmit_run(5, 64, |p, run| {
        sizes.push((p, run.len()));
        got.extend(run.iter().map(|d| (p, d.concat())));
    }) {
        assert!(got.len() < 100_000, "poll_transmit_run does not terminate");
    }
    assert_eq!(got, want);
    assert!(
        sizes.iter().all(|&(_, n)| (1..=RUN_MAX).contains(&n)),
        "{sizes:?}"
    );
    assert!(sizes.len() < want.len() / 2, "runs of one: {sizes:?}");
    // The same after a timeout (go back: retransmissions).
    single.handle_timeout(u64::MAX / 2);
    runs.handle_timeout(u64::MAX / 2);
    let want = drain(&mut single, u64::MAX / 2);
    let mut got = Vec::new();
    while runs.poll_transmit_run(u64::MAX / 2, 7, |p, run| {
        assert!(run.len() <= 7);
        got.extend(run.iter().map(|d| (p, d.concat())));
    }) {}
    assert!(!want.is_empty());
    assert_eq!(got, want);
}

#[test]
fn tails_are_sent_from_where_they_lie_until_acknowledged_or_owned() {
    let shared: Arc<dyn Shared> = Arc::new(Bytes((0..100).collect()));
    let mut a = Gbn::new(cfg(), KEY, 0, 2);
    let mut b = Gbn::new(cfg(), KEY, 1, 2);
    assert!(Tail::new(shared.clone(), 90, 11).is_none(), "out of range");
    for i in 0..4u8 {
        let head = Header::new(Kind::GbnData, KEY, 0).to_datagram(&[i]);
        let tail = Tail::new(shared.clone(), 10 * usize::from(i), 10).expect("in range");
        a.send_tail(0, 1, head, tail).expect("space");
    }
    assert_eq!(
        Arc::strong_count(&shared),
        5,
        "the window holds a reference each"
    );
    // On the wire: the header datagram, then the referred bytes.
    let out = drain(&mut a, 0);
    assert_eq!(out.len(), 4);
    for (i, (_, d)) in out.iter().enumerate() {
        let p = Packet::new_checked(d).expect("valid");
        assert_eq!(p.payload()[0], i as u8);
        let want: Vec<u8> = (10 * i as u8..10 * i as u8 + 10).collect();
        assert_eq!(&p.payload()[1..], &want[..]);
    }
    // The first two acknowledged: their references are dropped.
    feed(&mut b, 0, &out[0].1);
    feed(&mut b, 0, &out[1].1);
    b.flush_acks(0);
    for (_, ack) in drain(&mut b, 0) {
        feed(&mut a, 0, &ack);
    }
    assert_eq!(Arc::strong_count(&shared), 3);
    // The owner gives the bytes up: the rest become copies, the same on the wire.
    assert_eq!(a.own_tails(&*shared), 2);
    assert_eq!(Arc::strong_count(&shared), 1);
    // Timeouts until the unacknowledged two are re-sent (after the probes).
    let mut resent = 0;
    let mut now = 1_000_000_000;
    for _ in 0..20 {
        now += 1_000_000_000;
        a.handle_timeout(now);
        for (_, d) in drain(&mut a, now) {
            let p = Packet::new_checked(&d).expect("valid");
            if p.payload().len() == 11 {
                let i = p.payload()[0];
                assert!(i == 2 || i == 3, "only the unacknowledged: {i}");
                let want: Vec<u8> = (10 * i..10 * i + 10).collect();
                assert_eq!(&p.payload()[1..], &want[..]);
                resent += 1;
            }
        }
    }
    assert!(resent > 0, "the owned copies were re-sent");
}
