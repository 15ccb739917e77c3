use super::*;
use phalanx_wire::{flags, mcast, Header, Kind, MsgKind, Packet};

const KEY: u64 = 0x00c0_ffee_d00d;

fn cfg(buffers: u32, peers: u32) -> CarefulConfig {
    CarefulConfig {
        buffers,
        peers,
        ..CarefulConfig::default()
    }
}

fn data(payload: &[u8]) -> Vec<u8> {
    let mut h = Header::new(Kind::CarefulData, 0, 0);
    h.msg = MsgKind::Eager;
    h.tag = 42;
    h.to_datagram(payload)
}

fn drain(c: &mut Careful) -> Vec<(Vec<u32>, Vec<u8>)> {
    let mut v = Vec::new();
    while let Some(t) = c.poll_transmit(0) {
        assert!(
            Packet::new_checked(t.bytes).is_ok(),
            "invalid datagram emitted"
        );
        v.push((t.targets.to_vec(), t.bytes.to_vec()));
        assert!(v.len() < 100_000, "poll_transmit does not terminate");
    }
    v
}

fn feed(c: &mut Careful, bytes: &[u8]) -> Verdict {
    let p = Packet::new_checked(bytes).expect("valid datagram");
    c.handle_packet(0, &p)
}

/// Delivers everything `from` has queued for `to_rank` to `to`.
fn pump(from: &mut Careful, to: &mut Careful, to_rank: u32) -> Vec<Verdict> {
    drain(from)
        .into_iter()
        .filter(|(t, _)| t.contains(&to_rank))
        .map(|(_, b)| feed(to, &b))
        .collect()
}

#[test]
fn window_and_threshold() {
    let c = Careful::new(cfg(64, 0), KEY, 0, 5);
    assert_eq!(c.config().peers, 4);
    assert_eq!(c.window(), 16);
    assert_eq!(c.update_threshold(), 8);
    // R < 3P is raised so that W >= 3.
    let c = Careful::new(cfg(8, 4), KEY, 0, 5);
    assert_eq!(c.config().buffers, 12);
    assert_eq!(c.window(), 3);
    assert_eq!(c.update_threshold(), 2);
    // Degenerate fractions are clamped.
    let c = Careful::new(
        CarefulConfig {
            update_fraction: f64::NAN,
            ..cfg(40, 1)
        },
        KEY,
        0,
        2,
    );
    assert_eq!(c.update_threshold(), 20);
    let c = Careful::new(
        CarefulConfig {
            update_fraction: 5.0,
            ..cfg(40, 1)
        },
        KEY,
        0,
        2,
    );
    assert_eq!(c.update_threshold(), 39);
}

#[test]
fn never_closes_window_without_update() {
    // W = 4: three data frames, then the fourth would close the window without an update.
    let mut a = Careful::new(cfg(4, 1), KEY, 0, 2);
    let mut b = Careful::new(cfg(4, 1), KEY, 1, 2);
    for i in 0..3u8 {
        a.send(0, &[1], data(&[i])).unwrap();
    }
    assert_eq!(a.send_space(&[1]), 0);
    let r = a.send(0, &[1], data(&[9])).unwrap_err();
    assert_eq!(r.reason, SendError::WindowClosed { peer: 1 });
    assert_eq!(r.datagram, data(&[9]));
    assert_eq!(a.stats().window_blocked, 1);
    let v = pump(&mut a, &mut b, 1);
    assert_eq!(v, vec![Verdict::Deliver; 3]);
    // b consumes one: below the threshold (2) but a's window to b is 1 -> update owed.
    b.consumed(0, 0);
    let out = drain(&mut b);
    assert_eq!(out.len(), 1);
    let p = Packet::new_checked(&out[0].1).unwrap();
    assert_eq!(p.kind(), Kind::CarefulUpdate);
    assert_eq!((p.seq(), p.ack()), (0, 1));
    assert_eq!(feed(&mut a, &out[0].1), Verdict::Update);
    assert_eq!(a.credit(1), 2);
    // a's credit 2: the next data frame carries the update a owes b (it freed b's update
    // frame); the one after would close the window without an update.
    a.send(0, &[1], data(b"x")).unwrap();
    assert_eq!(a.credit(1), 1);
    assert_eq!(
        a.send(0, &[1], data(b"y")).unwrap_err().reason,
        SendError::WindowClosed { peer: 1 }
    );
    let out = drain(&mut a);
    assert_eq!(out.len(), 1);
    assert_eq!(Packet::new_checked(&out[0].1).unwrap().ack(), 1);
    assert_eq!(feed(&mut b, &out[0].1), Verdict::Deliver);
    // b consumes "x": a's window (as b sees it) is 1, so b owes an update at once.
    b.consumed(0, 0);
    let out = drain(&mut b);
    assert_eq!(out.len(), 1);
    assert_eq!(feed(&mut a, &out[0].1), Verdict::Update);
    assert_eq!(a.credit(1), 2);
    a.send(0, &[1], data(b"y")).unwrap();
    assert!(a.send(0, &[1], data(b"z")).is_err());
    assert_eq!(Packet::new_checked(&drain(&mut a)[0].1).unwrap().ack(), 1);
    // The ignore-rule mutant would have sent "z" and closed the window.
    let mut m = Careful::new(
        CarefulConfig {
            test_ignore_close_rule: true,
            ..cfg(4, 1)
        },
        KEY,
        0,
        2,
    );
    for _ in 0..4 {
        m.send(0, &[1], data(b"m")).unwrap();
    }
    assert_eq!(m.credit(1), 0);
}

#[test]
fn update_after_half_window_and_piggyback() {
    let mut a = Careful::new(cfg(8, 1), KEY, 0, 2);
    let mut b = Careful::new(cfg(8, 1), KEY, 1, 2);
    assert_eq!(a.window(), 8);
    for i in 0..4u8 {
        a.send(0, &[1], data(&[i])).unwrap();
    }
    pump(&mut a, &mut b, 1);
    b.consumed(0, 0);
    b.consumed(0, 0);
    b.consumed(0, 0);
    // 3 freed < threshold 4, a's window (as b sees it) is 4: no update yet.
    assert!(drain(&mut b).is_empty());
    b.consumed(0, 0);
    let out = drain(&mut b);
    assert_eq!(out.len(), 1);
    assert_eq!(Packet::new_checked(&out[0].1).unwrap().ack(), 4);
    feed(&mut a, &out[0].1);
    assert_eq!(a.credit(1), 8);
    // Data flowing back carries the update instead of an explicit frame.
    for i in 0..4u8 {
        a.send(0, &[1], data(&[i])).unwrap();
    }
    pump(&mut a, &mut b, 1);
    for _ in 0..4 {
        b.consumed(0, 0);
    }
    b.send(0, &[0], data(b"reply")).unwrap();
    let out = drain(&mut b);
    assert_eq!(out.len(), 1, "no explicit update when data can carry it");
    let p = Packet::new_checked(&out[0].1).unwrap();
    assert_eq!(
        (p.kind(), p.ack(), p.payload()),
        (Kind::CarefulData, 4, &b"reply"[..])
    );
    assert_eq!(b.stats().updates_sent, 1);
    assert_eq!(b.stats().piggybacked, 1);
    assert_eq!(feed(&mut a, &out[0].1), Verdict::Deliver);
    // a got its 4 credits back.
    assert_eq!(a.credit(1), 8);
}

#[test]
fn multi_target_min_window() {
    // Rank 0 sends to ranks 1, 2, 3 in one datagram; W = 3.
    let mut c: Vec<Careful> = (0..4).map(|r| Careful::new(cfg(9, 3), KEY, r, 4)).collect();
    assert_eq!(c[0].window(), 3);
    // Use up two credits towards rank 2 only.
    c[0].send(0, &[2], data(b"u")).unwrap();
    c[0].send(0, &[2], data(b"v")).unwrap();
    assert_eq!(c[0].send_space(&[1, 2, 3]), 0);
    let r = c[0].send(0, &[3, 1, 2], data(b"m")).unwrap_err();
    assert_eq!(r.reason, SendError::WindowClosed { peer: 2 });
    let out = drain(&mut c[0]);
    for (_, b) in &out {
        assert_eq!(feed(&mut c[2], b), Verdict::Deliver);
    }
    c[2].consumed(0, 0);
    c[2].consumed(0, 0);
    for (_, b) in drain(&mut c[2]) {
        assert_eq!(feed(&mut c[0], &b), Verdict::Update);
    }
    // Now every window allows it; duplicates in the target list are fine.
    assert_eq!(c[0].send_space(&[1, 2, 3]), 2);
    c[0].send(0, &[3, 1, 2, 1], data(b"m")).unwrap();
    let out = drain(&mut c[0]);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, vec![1, 2, 3]);
    let p = Packet::new_checked(&out[0].1).unwrap();
    assert_ne!(p.flags() & flags::MULTICAST, 0);
    // Rank 0 freed rank 2's update frame but nothing of ranks 1 and 3: minimum is 0.
    assert_eq!(p.ack(), 0);
    assert_eq!(p.payload(), b"m");
    let view = mcast::TargetsView::of_packet(&p, 4).unwrap();
    assert_eq!(
        view.iter().collect::<Vec<_>>(),
        vec![(1, 0), (2, 2), (3, 0)]
    );
    for e in &mut c[1..] {
        assert_eq!(feed(e, &out[0].1), Verdict::Deliver);
    }
    // The multicast frame is not for rank 0 itself.
    assert!(matches!(feed(&mut c[0], &out[0].1), Verdict::Invalid(_)));
    assert_eq!(c[0].stats().multi_sent, 1);
}

#[test]
fn multi_target_carries_minimum_update() {
    let mut c: Vec<Careful> = (0..3).map(|r| Careful::new(cfg(8, 2), KEY, r, 3)).collect();
    // Ranks 1 and 2 send 2 and 3 frames to rank 0, which consumes them all.
    for (r, n) in [(1usize, 2), (2, 3)] {
        for _ in 0..n {
            c[r].send(0, &[0], data(b"d")).unwrap();
        }
        for (_, b) in drain(&mut c[r]) {
            assert_eq!(feed(&mut c[0], &b), Verdict::Deliver);
            c[0].consumed(0, r as u32);
        }
    }
    c[0].send(0, &[1, 2], data(b"bcast")).unwrap();
    let out = drain(&mut c[0]);
    // The broadcast carries min(2, 3) = 2; the remaining 1 for rank 2 stays owed but is
    // below the threshold and rank 2's window is not closing: no explicit update.
    assert_eq!(out.len(), 1);
    assert_eq!(Packet::new_checked(&out[0].1).unwrap().ack(), 2);
    feed(&mut c[1], &out[0].1);
    feed(&mut c[2], &out[0].1);
    assert_eq!(c[1].credit(0), 4);
    assert_eq!(c[2].credit(0), 3);
    c[0].send(0, &[2], data(b"uni")).unwrap();
    let out = drain(&mut c[0]);
    assert_eq!(Packet::new_checked(&out[0].1).unwrap().ack(), 1);
}

#[test]
fn gap_duplicate_and_broken_link() {
    let mut a = Careful::new(cfg(16, 1), KEY, 3, 5);
    let mut b = Careful::new(cfg(16, 1), KEY, 1, 5);
    for i in 0..4u8 {
        a.send(0, &[1], data(&[i])).unwrap();
    }
    let out = drain(&mut a);
    assert_eq!(feed(&mut b, &out[0].1), Verdict::Deliver);
    // Frame #1 lost.
    let v = feed(&mut b, &out[2].1);
    let fault = LinkFault::Gap {
        expected: 1,
        got: 2,
    };
    assert_eq!(v, Verdict::Error(fault));
    let e = b.poll_event().unwrap();
    assert_eq!(
        e,
        CarefulEvent::LinkError {
            from: 3,
            to: 1,
            detail: fault
        }
    );
    assert!(e.to_string().contains("3→1"), "{e}");
    assert!(e.to_string().contains("gap"), "{e}");
    // Later frames: error again, no second event; sends to the broken link are refused.
    assert_eq!(feed(&mut b, &out[1].1), Verdict::Error(fault));
    assert_eq!(b.poll_event(), None);
    assert_eq!(b.broken(3), Some(fault));
    let r = b.send(0, &[3], data(b"x")).unwrap_err();
    assert_eq!(r.reason, SendError::Broken { peer: 3 });
    assert_eq!(b.stats().link_errors, 1);

    // Duplicate on a fresh receiver.
    let mut c = Careful::new(cfg(16, 1), KEY, 1, 5);
    assert_eq!(feed(&mut c, &out[0].1), Verdict::Deliver);
    assert_eq!(
        feed(&mut c, &out[0].1),
        Verdict::Error(LinkFault::Duplicate {
            expected: 1,
            got: 0
        })
    );
    assert!(c.poll_event().unwrap().to_string().contains("duplicate"));
}

#[test]
fn overrun_and_bad_update_are_detected() {
    let mut b = Careful::new(cfg(6, 2), KEY, 1, 3);
    assert_eq!(b.window(), 3);
    let frame = |seq: u32, ack: u32| {
        let mut h = Header::new(Kind::CarefulData, KEY, 0);
        h.flags = flags::SEQ_VALID | flags::ACK_VALID;
        h.seq = seq;
        h.ack = ack;
        h.to_datagram(b"p")
    };
    for s in 0..3 {
        assert_eq!(feed(&mut b, &frame(s, 0)), Verdict::Deliver);
    }
    assert_eq!(
        feed(&mut b, &frame(3, 0)),
        Verdict::Error(LinkFault::WindowOverrun { window: 3 })
    );
    // Rank 2 grants credits for frames b never sent to it.
    let mut h = Header::new(Kind::CarefulUpdate, KEY, 2);
    h.flags = flags::SEQ_VALID | flags::ACK_VALID;
    h.ack = 1;
    assert_eq!(
        feed(&mut b, &h.to_datagram(&[])),
        Verdict::Error(LinkFault::BadUpdate {
            granted: 1,
            outstanding: 0
        })
    );
    assert_eq!(b.stats().link_errors, 2);
}

#[test]
fn stall_only_while_waiting() {
    let mut a = Careful::new(
        CarefulConfig {
            stall_ns: 1_000,
            ..cfg(8, 1)
        },
        KEY,
        0,
        2,
    );
    let mut b = Careful::new(cfg(8, 1), KEY, 1, 2);
    assert_eq!(a.poll_timeout(), None);
    a.waiting_on(100, 1);
    a.waiting_on(500, 1); // already waiting: the clock keeps running
    assert_eq!(a.poll_timeout(), Some(1_100));
    // A frame from the peer restarts the clock.
    b.send(0, &[0], data(b"x")).unwrap();
    let out = drain(&mut b);
    let p = Packet::new_checked(&out[0].1).unwrap();
    assert_eq!(a.handle_packet(900, &p), Verdict::Deliver);
    assert_eq!(a.poll_timeout(), Some(1_900));
    a.handle_timeout(1_899);
    assert_eq!(a.poll_event(), None);
    a.handle_timeout(1_900);
    let e = a.poll_event().unwrap();
    assert_eq!(e, CarefulEvent::SuspectedLoss { from: 1, to: 0 });
    assert!(e.to_string().contains("suspected loss 1→0"), "{e}");
    // Reported once per episode: no timer until the peer speaks again.
    assert_eq!(a.poll_timeout(), None);
    a.stop_waiting(1);
    a.waiting_on(5_000, 1);
    assert_eq!(a.poll_timeout(), Some(6_000));
    a.stop_waiting(1);
    assert_eq!(a.poll_timeout(), None);
    // Waiting on oneself or an unknown rank is ignored.
    a.waiting_on(0, 0);
    a.waiting_on(0, 99);
    assert_eq!(a.poll_timeout(), None);
}

#[test]
fn copy_out_unblocks_a_flood() {
    // b never consumes; a floods it. Copy-out advice keeps a going.
    let mut a = Careful::new(cfg(4, 1), KEY, 0, 2);
    let mut b = Careful::new(cfg(4, 1), KEY, 1, 2);
    let mut sent = 0;
    let mut copied = 0;
    for _round in 0..100 {
        while a.send(0, &[1], data(b"f")).is_ok() {
            sent += 1;
        }
        for v in pump(&mut a, &mut b, 1) {
            assert_eq!(v, Verdict::Deliver);
        }
        while let Some((p, n)) = b.copy_out_advice() {
            assert_eq!(p, 0);
            copied += b.copied_out(p, n);
        }
        for (_, bytes) in drain(&mut b) {
            feed(&mut a, &bytes);
        }
    }
    assert!(sent > 100, "flood stalled after {sent} frames");
    assert_eq!(copied as usize, sent);
    assert_eq!(b.held(0), 0);
    assert_eq!(b.stats().copied_out, sent as u64);
    assert_eq!(b.free_buffers(), 4);
}

#[test]
fn copy_out_below_global_threshold() {
    // R = 12, P = 3 (W = 4), threshold 6: two senders with 3 frames each leave 6 free.
    let c = CarefulConfig {
        copy_out_threshold: 7,
        ..cfg(12, 3)
    };
    let mut r = Careful::new(c.clone(), KEY, 0, 4);
    for s in [1u32, 2] {
        let mut x = Careful::new(c.clone(), KEY, s, 4);
        for _ in 0..2 {
            x.send(0, &[0], data(b"d")).unwrap();
        }
        pump(&mut x, &mut r, 0);
    }
    assert_eq!(r.free_buffers(), 8);
    assert_eq!(r.copy_out_advice(), None);
    let mut x = Careful::new(c, KEY, 3, 4);
    x.send(0, &[0], data(b"d")).unwrap();
    x.send(0, &[0], data(b"d")).unwrap();
    pump(&mut x, &mut r, 0);
    assert_eq!(r.free_buffers(), 6);
    let (p, n) = r.copy_out_advice().unwrap();
    assert_eq!(n, 2);
    assert_eq!(r.copied_out(p, 5), 2);
    assert_eq!(r.stats().spurious_frees, 1);
}

#[test]
fn counts_are_compared() {
    let mut a = Careful::new(cfg(8, 1), KEY, 0, 2);
    let mut b = Careful::new(cfg(8, 1), KEY, 1, 2);
    for _ in 0..3 {
        a.send(0, &[1], data(b"d")).unwrap();
    }
    let out = drain(&mut a);
    feed(&mut b, &out[0].1);
    feed(&mut b, &out[1].1);
    let (ca, cb) = (a.counts(), b.counts());
    assert_eq!(ca[1].data_sent, 3);
    assert_eq!(cb[0].data_received, 2);
    let e = a.check_counts(1, &cb[0]).unwrap_err();
    assert_eq!(
        e,
        CarefulEvent::LinkError {
            from: 0,
            to: 1,
            detail: LinkFault::CountMismatch {
                sent: 3,
                received: 2
            }
        }
    );
    assert!(b.check_counts(0, &ca[1]).is_err());
    feed(&mut b, &out[2].1);
    let (ca, cb) = (a.counts(), b.counts());
    assert!(a.check_counts(1, &cb[0]).is_ok());
    assert!(b.check_counts(0, &ca[1]).is_ok());
}

/// Two ranks send to each other and consume at once. With the rule they always finish;
/// without it both close their windows with data and no update can ever be sent.
fn exchange(ignore_rule: bool, n: u32) -> (u32, u32) {
    let c = CarefulConfig {
        test_ignore_close_rule: ignore_rule,
        ..cfg(3, 1)
    };
    let mut e = [
        Careful::new(c.clone(), KEY, 0, 2),
        Careful::new(c, KEY, 1, 2),
    ];
    let mut sent = [0u32; 2];
    let mut got = [0u32; 2];
    for _ in 0..10 * n {
        for r in 0..2 {
            while sent[r] < n && e[r].send(0, &[1 - r as u32], data(b"d")).is_ok() {
                sent[r] += 1;
            }
        }
        let out: Vec<_> = (0..2).map(|r| drain(&mut e[r])).collect();
        for (r, frames) in out.into_iter().enumerate() {
            for (_, b) in frames {
                if feed(&mut e[1 - r], &b) == Verdict::Deliver {
                    got[1 - r] += 1;
                    e[1 - r].consumed(0, r as u32);
                }
            }
        }
    }
    (got[0], got[1])
}

#[test]
fn close_rule_prevents_deadlock() {
    assert_eq!(exchange(false, 50), (50, 50));
    let (a, b) = exchange(true, 50);
    assert!(a < 50 && b < 50, "mutant did not deadlock: {a} {b}");
}

#[test]
fn send_rejects_bad_input() {
    let mut a = Careful::new(cfg(8, 0), KEY, 1, 3);
    let e = |r: Result<(), Refused>| r.unwrap_err().reason;
    assert_eq!(e(a.send(0, &[], data(b""))), SendError::NoTargets);
    assert_eq!(
        e(a.send(0, &[1], data(b""))),
        SendError::BadTarget { rank: 1 }
    );
    assert_eq!(
        e(a.send(0, &[0, 3], data(b""))),
        SendError::BadTarget { rank: 3 }
    );
    assert!(matches!(
        e(a.send(0, &[0], vec![0; 10])),
        SendError::BadDatagram(_)
    ));
    let mut d = data(b"abc");
    d[6] = 1;
    assert!(matches!(e(a.send(0, &[0], d)), SendError::BadDatagram(_)));
    let mut d = data(b"abc");
    d[4] = 200;
    assert!(matches!(e(a.send(0, &[0], d)), SendError::BadDatagram(_)));
    assert_eq!(a.send_space(&[1]), 0);
    assert_eq!(a.send_space(&[]), 0);
    assert!(drain(&mut a).is_empty());
    // Caller flags outside the protocol's are kept; the protocol's are replaced.
    let mut d = data(b"abc");
    d[5] = flags::ACK_REQUEST | flags::RETRANSMIT | flags::MULTICAST;
    a.send(0, &[2], d).unwrap();
    let out = drain(&mut a);
    let p = Packet::new_checked(&out[0].1).unwrap();
    assert_eq!(
        p.flags(),
        flags::ACK_REQUEST | flags::SEQ_VALID | flags::ACK_VALID
    );
    assert_eq!((p.src(), p.job_key(), p.tag()), (1, KEY, 42));
    // Frees without held frames are harmless.
    a.consumed(0, 0);
    a.consumed(0, 77);
    assert_eq!(a.copied_out(0, 3), 0);
    assert_eq!(a.stats().spurious_frees, 3);
}

#[test]
fn handle_rejects_foreign_and_malformed() {
    let mut a = Careful::new(cfg(8, 0), KEY, 0, 3);
    let mut h = Header::new(Kind::CarefulData, KEY, 1);
    h.flags = flags::SEQ_VALID | flags::ACK_VALID;
    let ok = h.to_datagram(b"x");
    let cases: Vec<Vec<u8>> = vec![
        Header { job_key: 1, ..h }.to_datagram(b"x"),
        Header { src: 0, ..h }.to_datagram(b"x"),
        Header { src: 3, ..h }.to_datagram(b"x"),
        Header { flags: 0, ..h }.to_datagram(b"x"),
        Header {
            flags: flags::ACK_VALID,
            ..h
        }
        .to_datagram(b"x"),
        Header {
            kind: Kind::GbnData,
            ..h
        }
        .to_datagram(b"x"),
        Header {
            kind: Kind::CarefulUpdate,
            ..h
        }
        .to_datagram(b"x"),
        Header {
            flags: flags::MULTICAST | flags::ACK_VALID,
            ..h
        }
        .to_datagram(b"x"),
    ];
    for c in &cases {
        assert!(matches!(feed(&mut a, c), Verdict::Invalid(_)));
    }
    assert_eq!(a.stats().invalid, cases.len() as u64);
    assert_eq!(a.counts()[1], LinkCounts::default());
    assert_eq!(feed(&mut a, &ok), Verdict::Deliver);
}

#[test]
fn stall_env_parsing() {
    assert_eq!(parse_stall("10"), Some(10_000_000_000));
    assert_eq!(parse_stall(" 2.5s "), Some(2_500_000_000));
    assert_eq!(parse_stall("500ms"), Some(500_000_000));
    assert_eq!(parse_stall("-1"), None);
    assert_eq!(parse_stall("abc"), None);
    assert_eq!(parse_stall("inf"), None);
    assert_eq!(STALL_ENV, "PHALANX_CAREFUL_STALL");
}

struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Random and mutated datagrams never panic and never make the engine emit an invalid
/// datagram; every call of the API with arbitrary arguments is safe.
#[test]
fn robustness_random_input() {
    for seed in 1..40u64 {
        let mut rng = XorShift(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let size = 1 + rng.below(20) as u32;
        let local = rng.below(size as u64 + 1) as u32;
        let mut c = Careful::new(
            CarefulConfig {
                stall_ns: 1 + rng.below(1000),
                ..cfg(rng.below(200) as u32, rng.below(5) as u32)
            },
            KEY,
            local,
            size,
        );
        let mut peer = Careful::new(cfg(200, 0), KEY, (local + 1) % size, size);
        let mut now = 0u64;
        for _ in 0..3000 {
            now += rng.below(100);
            // A valid frame from a neighbour, sometimes mutated or truncated.
            let targets: Vec<u32> = (0..1 + rng.below(4))
                .map(|_| rng.below(size as u64 + 1) as u32)
                .collect();
            let _ = peer.send(now, &targets, data(&vec![7; rng.below(40) as usize]));
            let mut frames = drain(&mut peer);
            let mut h = Header::new(
                [Kind::CarefulData, Kind::CarefulUpdate, Kind::GbnData][rng.below(3) as usize],
                KEY,
                rng.below(size as u64 + 2) as u32,
            );
            h.flags = rng.next() as u8;
            h.seq = rng.below(8) as u32;
            h.ack = if rng.below(3) == 0 {
                rng.next() as u32
            } else {
                rng.below(4) as u32
            };
            h.ext_len = rng.below(6) as u16;
            frames.push((vec![], h.to_datagram(&vec![0xff; rng.below(12) as usize])));
            for (_, mut d) in frames {
                for _ in 0..rng.below(4) {
                    let i = rng.below(d.len() as u64) as usize;
                    d[i] = rng.next() as u8;
                }
                if rng.below(6) == 0 {
                    d.truncate(rng.below(d.len() as u64 + 1) as usize);
                }
                if let Ok(p) = Packet::new_checked(&d) {
                    let _ = c.handle_packet(now, &p);
                }
            }
            match rng.below(8) {
                0 => c.consumed(now, rng.below(size as u64 + 2) as u32),
                1 => {
                    let _ = c.copied_out(rng.below(size as u64 + 2) as u32, rng.next() as u32);
                }
                2 => c.waiting_on(now, rng.below(size as u64 + 2) as u32),
                3 => c.stop_waiting(rng.below(size as u64 + 2) as u32),
                4 => {
                    let t = [rng.below(size as u64 + 1) as u32];
                    let _ = c.send_space(&t);
                    let _ = c.send(now, &t, data(b"q"));
                }
                _ => {}
            }
            while let Some((p, n)) = c.copy_out_advice() {
                assert!(c.copied_out(p, n) > 0, "advice without held frames");
            }
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
            drain(&mut c);
            while c.poll_event().is_some() {}
            assert!(c.free_buffers() <= c.config().buffers as u64);
        }
    }
}
