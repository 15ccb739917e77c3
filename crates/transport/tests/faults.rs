//! FaultConfig parsing and the Faulty wrapper over real UDP on 127.0.0.1.

mod common;

use common::{drain, pair};
use phalanx_transport::{FaultConfig, FaultParseError, Faulty, Transport, UdpTransport};

#[test]
fn parse_good() {
    let c = FaultConfig::parse("loss=0.1,dup=0.02,reorder=0.05,seed=7").unwrap();
    assert_eq!(
        c,
        FaultConfig {
            loss: 0.1,
            dup: 0.02,
            reorder: 0.05,
            delay_us: 0,
            seed: 7
        }
    );
    let c = FaultConfig::parse(" seed = 3 , delay_us=250,loss=0 ").unwrap();
    assert_eq!(
        c,
        FaultConfig {
            loss: 0.0,
            dup: 0.0,
            reorder: 0.0,
            delay_us: 250,
            seed: 3
        }
    );
    assert_eq!(FaultConfig::parse("").unwrap(), FaultConfig::default());
    assert_eq!(FaultConfig::parse("dup=0.5,").unwrap().dup, 0.5);
}

#[test]
fn parse_bad() {
    use FaultParseError::*;
    let e = FaultConfig::parse("loss=0.1,jitter=3").unwrap_err();
    assert_eq!(
        e,
        UnknownKey {
            key: "jitter".into()
        }
    );
    assert!(e.to_string().contains("jitter"));

    let e = FaultConfig::parse("loss=abc").unwrap_err();
    assert!(matches!(&e, BadValue { key, value, .. } if key == "loss" && value == "abc"));
    assert!(e.to_string().contains("loss") && e.to_string().contains("abc"));

    let e = FaultConfig::parse("loss=1").unwrap_err();
    assert!(matches!(&e, RateOutOfRange { key, .. } if key == "loss"));
    assert!(e.to_string().contains("[0, 1)"));
    assert!(FaultConfig::parse("dup=-0.1").is_err());
    assert!(FaultConfig::parse("reorder=NaN").is_err());

    let e = FaultConfig::parse("seed=-1").unwrap_err();
    assert!(matches!(&e, BadValue { key, .. } if key == "seed"));
    let e = FaultConfig::parse("delay_us=1.5").unwrap_err();
    assert!(matches!(&e, BadValue { key, .. } if key == "delay_us"));

    let e = FaultConfig::parse("loss").unwrap_err();
    assert_eq!(
        e,
        NotKeyValue {
            item: "loss".into()
        }
    );
    let e = FaultConfig::parse("seed=1,seed=2").unwrap_err();
    assert_eq!(e, DuplicateKey { key: "seed".into() });
}

/// Sends 400 numbered datagrams from rank 0 to rank 1 through Faulty with
/// `cfg`, services held packets, and returns the numbers received.
fn run(cfg: &FaultConfig) -> (Vec<u32>, phalanx_transport::TransportStats) {
    let (a, mut b) = pair();
    let mut f = Faulty::new(a, cfg.clone(), 0);
    for i in 0..400u32 {
        assert!(f.send_to(1, &i.to_le_bytes()).unwrap());
    }
    // Release anything still held (fake clock: stamp, then jump past it).
    f.service(1).unwrap();
    f.service(u64::MAX / 2).unwrap();
    assert_eq!(f.next_deadline(), None);
    let stats = f.stats();
    let want = stats.sent as usize;
    let (got, _) = drain(&mut b, want);
    assert_eq!(got.len(), want);
    let from = f.inner().local_addr();
    let seq = got
        .iter()
        .map(|(a, d)| {
            assert_eq!(*a, from);
            u32::from_le_bytes(d[..4].try_into().unwrap())
        })
        .collect();
    (seq, stats)
}

#[test]
fn loss_is_seeded_and_replayable() {
    let cfg = FaultConfig::parse("loss=0.5,seed=42").unwrap();
    let (seq1, st1) = run(&cfg);
    assert!(!seq1.is_empty() && seq1.len() < 400, "got {}", seq1.len());
    assert_eq!(st1.faults_dropped as usize + seq1.len(), 400);
    assert_eq!(st1.faults_duplicated + st1.faults_reordered, 0);
    // Same seed, same pattern.
    let (seq2, st2) = run(&cfg);
    assert_eq!(seq1, seq2);
    assert_eq!(st1, st2);
    // Another seed, another pattern.
    let (seq3, _) = run(&FaultConfig {
        seed: 43,
        ..cfg.clone()
    });
    assert_ne!(seq1, seq3);
    // Another rank, another pattern.
    let (a, _b) = pair();
    let mut f = Faulty::new(a, cfg, 1);
    let mut kept = Vec::new();
    for i in 0..400u32 {
        let before = f.stats().faults_dropped;
        f.send_to(1, &i.to_le_bytes()).unwrap();
        if f.stats().faults_dropped == before {
            kept.push(i);
        }
    }
    assert_ne!(kept, seq1);
}

#[test]
fn dup_and_reorder_counters_move() {
    let cfg = FaultConfig::parse("dup=0.1,reorder=0.1,seed=5").unwrap();
    let (seq, st) = run(&cfg);
    assert!(st.faults_duplicated > 0);
    assert!(st.faults_reordered > 0);
    assert_eq!(st.faults_dropped, 0);
    assert_eq!(seq.len() as u64, 400 + st.faults_duplicated);
    // Every datagram arrives at least once, some out of order.
    let mut uniq = seq.clone();
    uniq.sort_unstable();
    uniq.dedup();
    assert_eq!(uniq, (0..400).collect::<Vec<_>>());
    assert!(seq.windows(2).any(|w| w[1] < w[0]));
    // Replays exactly.
    assert_eq!(run(&cfg).0, seq);
}

#[test]
fn delay_holds_until_serviced() {
    let (a, mut b) = pair();
    let mut f = Faulty::new(a, FaultConfig::parse("delay_us=100").unwrap(), 0);
    f.send_to(1, b"late").unwrap();
    assert_eq!(f.stats().sent, 0);
    f.service(1_000).unwrap();
    assert_eq!(f.next_deadline(), Some(1_000 + 100_000));
    f.service(1_000 + 100_000).unwrap();
    assert_eq!(f.stats().sent, 1);
    let (got, _) = drain(&mut b, 1);
    assert_eq!(got[0].1, b"late");
}

#[test]
fn passthrough() {
    let (a, _b) = pair();
    let fd = a.fds();
    let mut f = Faulty::new(a, FaultConfig::default(), 0);
    assert_eq!(f.fds(), fd);
    assert_eq!(f.max_datagram(), 65507);
    let addr = f.inner().local_addr();
    f.inner_mut().set_peers(vec![addr]);
    assert!(f.send_to(0, b"self").unwrap());
    let (got, _) = drain(&mut f, 1);
    assert_eq!(got[0].1, b"self");
    let _: &UdpTransport = f.inner();
}
