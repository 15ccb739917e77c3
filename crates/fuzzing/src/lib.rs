//! The bodies of phalanx's fuzz targets, one `pub fn` per target.
//!
//! Contract: every function takes arbitrary bytes (`data: &[u8]`) and
//! * never panics — except through one of its own assertions, and a failed assertion is
//!   a bug found in the code under test;
//! * never grows memory without bound: what it builds is bounded by a constant times the
//!   input length, every loop is bounded (an assertion fails if the code under test does
//!   not make progress), and where the code under test buffers input, the harness checks
//!   the documented bound of that buffer;
//! * asserts the invariants of its target (listed on each function);
//! * is deterministic: no clock, no randomness, so an input replays exactly.
//!
//! The same functions run in two ways: under cargo-fuzz on nightly (`fuzz/`, each target
//! a one-line `fuzz_target!` wrapper) and as a bounded smoke on the stable toolchain
//! (`tests/smoke.rs`: seeded random inputs and mutations of well-formed ones,
//! `cargo nextest run -p phalanx-fuzzing`), so CI runs every target.
//!
//! Targets: [`decode`] (the datagram header), [`gbn_input`] and [`urtp_input`] (the
//! reliability engines), and the decoders of the control channels: [`boot_lines`] (the
//! start-up protocol), [`gang_lines`] (the job manager's protocol), [`pmi_wire`] (the
//! PMI-1/PMI-2 client), [`mac_open`] (datagram authentication) and [`seal_open`] (the
//! sealed launcher ↔ node-agent channel).

mod lines;

use lines::{drive, step};
use phalanx_boot::frame::table_line_limit;
use phalanx_boot::pmi::{Pmi, PmiEnv, MAX_REPLY, MAX_VALUE};
use phalanx_boot::{LauncherMsg, RankMsg, MAX_LINE};
use phalanx_gang::proto::{
    self as gang, AgentEvent, AgentRequest, Challenge, Hello, Reply, Request,
};
use phalanx_proto::gbn::{Gbn, GbnConfig, Verdict};
use phalanx_proto::urtp::{Targets, Urtp, UrtpConfig};
use phalanx_transport::mac::{datagram_key, Seal, TRAILER};
use phalanx_wire::{flags, serial, stamp, Header, Kind, Packet, HEADER_LEN};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;
use std::io::Write;
use std::net::Shutdown;
use std::os::fd::IntoRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// The job key of the [`gbn_input`] and [`urtp_input`] engines.
const KEY: u64 = 7;
/// The job size of [`urtp_input`].
const SIZE: u32 = 5;

/// `Packet::new_checked` plus every accessor and a `Header` round trip never panic.
///
/// Invariants: bytes `Packet::new_checked` refuses, `Header::parse` refuses too; a valid
/// packet's header, extension and payload cover the datagram exactly; emitting the
/// parsed header and re-assembling the datagram reproduces the input; stamping a field
/// in place changes that field only.
pub fn decode(data: &[u8]) {
    let Ok(p) = Packet::new_checked(data) else {
        // Invalid input must also be rejected by Header::parse.
        assert!(Header::parse(data).is_err());
        return;
    };
    let _ = (
        p.kind(),
        p.msg_kind(),
        p.flags(),
        p.job_key(),
        p.src(),
        p.context(),
        p.seq(),
        p.ack(),
        p.tag(),
        p.aux32(),
        p.msg_len(),
        p.aux(),
    );
    let ext = p.extension();
    let payload = p.payload();
    assert_eq!(HEADER_LEN + ext.len() + payload.len(), data.len());
    assert_eq!(p.as_bytes(), data);
    let h = p.header();
    assert_eq!(Header::parse(data), Ok(h));
    // Round trip: emitting the header reproduces the first HEADER_LEN bytes.
    let mut out = [0u8; HEADER_LEN];
    assert!(h.emit(&mut out).is_some());
    assert_eq!(&out[..], &data[..HEADER_LEN]);
    let mut rest = ext.to_vec();
    rest.extend_from_slice(payload);
    let d = h.to_datagram(&rest);
    assert_eq!(d, data);
    // Stamping in place changes only its field.
    let mut m = d.clone();
    let _ = stamp::seq(&mut m, h.seq.wrapping_add(1));
    let _ = stamp::ack(&mut m, h.ack.wrapping_sub(1));
    let _ = stamp::flags(&mut m, !h.flags);
    if let Ok(q) = Packet::new_checked(&m) {
        assert_eq!(q.seq(), h.seq.wrapping_add(1));
        assert_eq!(q.ack(), h.ack.wrapping_sub(1));
        assert_eq!(q.flags(), !h.flags);
        let _ = serial::diff(q.seq(), h.seq);
    }
}

/// Arbitrary bytes drive a `Gbn`: the input is split into commands (receive a datagram,
/// accept, send, advance time, flush) — nothing may panic and every emitted datagram
/// must decode.
///
/// Layout: byte 0 configures the engine (window, retransmission burst, eager ACKs, a
/// sequence start near the wrap); then commands, `op % 6`: 0–1 a datagram (length byte,
/// then that many bytes), 2 accept, 3 send, 4 advance time and time out, 5 flush ACKs.
pub fn gbn_input(data: &[u8]) {
    let Some((&cfg_byte, mut rest)) = data.split_first() else {
        return;
    };
    let cfg = GbnConfig {
        window: 1 + (cfg_byte & 7) as u32,
        retx_burst: ((cfg_byte >> 3) & 3) as u32,
        eager_ack: cfg_byte & 0x20 != 0,
        initial_seq: if cfg_byte & 0x40 != 0 {
            u32::MAX - 3
        } else {
            0
        },
        ack_threshold: 2,
        max_backoffs: 3,
        ..GbnConfig::default()
    };
    let peers = 3;
    let mut g = Gbn::new(cfg, KEY, 0, peers);
    let mut now = 0u64;
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        match op % 6 {
            0 | 1 => {
                // A datagram: length byte, then that many bytes.
                let Some(bytes) = length_prefixed(&mut rest) else {
                    break;
                };
                if let Ok(p) = Packet::new_checked(bytes) {
                    let v = g.handle_packet(now, &p);
                    if v == Verdict::Deliver && op & 0x80 == 0 {
                        g.accept(now, p.src());
                    }
                }
            }
            2 => g.accept(now, (op >> 4) as u32 % (peers + 1)),
            3 => {
                let peer = (op >> 4) as u32 % (peers + 1);
                let mut h = Header::new(Kind::GbnData, KEY, 0);
                h.flags = op;
                let _ = g.send(now, peer, h.to_datagram(&[op]));
            }
            4 => {
                now = now.saturating_add((op as u64) << 18);
                g.handle_timeout(now);
            }
            _ => g.flush_acks(now),
        }
        let mut n = 0u32;
        while let Some((_, d)) = g.poll_transmit(now) {
            assert!(Packet::new_checked(&d).is_ok());
            n += 1;
            assert!(n < 100_000);
        }
        while g.poll_event().is_some() {}
        let _ = (
            g.poll_timeout(),
            g.all_acked(),
            g.owes_acks(),
            g.unacked_peers(),
        );
    }
}

/// Arbitrary bytes drive a `Urtp` of rank 0 in a job of 5: the input is split into
/// commands (receive a datagram — raw, or a valid URTP packet with fuzzed fields and a
/// fuzzed multicast extension —, send, pop, want, advance time, flush); nothing may
/// panic, every emitted datagram must decode and the bounds must hold.
///
/// Layout: byte 0 configures the engine; then commands, `op % 8`: 0 a raw datagram
/// (length byte, then bytes), 1 a well-formed header from 12 bytes plus up to 15
/// extension bytes, 2 send to the ranks of `op >> 3`, 3 pop, 4 want, 5 advance time,
/// 6 flush ACKs, 7 run the next timeout.
pub fn urtp_input(data: &[u8]) {
    let Some((&cfg_byte, mut rest)) = data.split_first() else {
        return;
    };
    let cfg = UrtpConfig {
        window: 1 + (cfg_byte & 7) as u32,
        block_ack_threshold: 1 + ((cfg_byte >> 3) & 3) as u32,
        initial_seq: if cfg_byte & 0x40 != 0 {
            u32::MAX - 3
        } else {
            0
        },
        max_backoffs: 3,
        rx_extra: (cfg_byte >> 7) as u32,
        ..UrtpConfig::default()
    };
    let pool = (SIZE as usize - 1) * cfg.window as usize + cfg.rx_extra as usize;
    let mut u = Urtp::new(cfg, KEY, 0, SIZE);
    if cfg_byte & 0x20 != 0 {
        u.set_max_datagram(200);
    }
    let mut now = 0u64;
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        let arg = (op >> 3) as u32;
        match op % 8 {
            0 => {
                // A raw datagram: length byte, then that many bytes.
                let Some(bytes) = length_prefixed(&mut rest) else {
                    break;
                };
                if let Ok(p) = Packet::new_checked(bytes) {
                    let _ = u.handle_packet(now, &p);
                }
            }
            1 => {
                // A well-formed header with fuzzed fields: kind, flags, src, seq, ack,
                // then an extension of up to 15 fuzzed bytes (a multicast bitmap and
                // counters when MULTICAST is set).
                if rest.len() < 12 {
                    break;
                }
                let (f, tail) = rest.split_at(12);
                rest = tail;
                let kind = [Kind::UrtpData, Kind::UrtpAck, Kind::UrtpReq][f[0] as usize % 3];
                let mut h = Header::new(kind, KEY, f[1] as u32 % (SIZE + 1));
                h.flags = f[2];
                h.seq = u32::from_le_bytes([f[3], f[4], f[5], f[6]])
                    .wrapping_add(if f[0] & 0x80 != 0 { u32::MAX - 3 } else { 0 });
                h.ack = u32::from_le_bytes([f[7], f[8], f[9], f[10]]);
                let ext_n = (f[11] & 15) as usize;
                let m = ext_n.min(rest.len());
                let (ext, tail) = rest.split_at(m);
                rest = tail;
                h.ext_len = m as u16;
                let mut body = ext.to_vec();
                body.extend_from_slice(&[f[11]; 3]);
                let d = h.to_datagram(&body);
                if let Ok(p) = Packet::new_checked(&d) {
                    let _ = u.handle_packet(now, &p);
                }
            }
            2 => {
                let mut t = Targets::new();
                for r in 0..SIZE + 1 {
                    if arg & (1 << r) != 0 {
                        t.insert(r);
                    }
                }
                let h = Header::new(Kind::UrtpData, 0, 0);
                let _ = u.send(now, &t, &h, &[op; 150][..(op as usize) % 150]);
                let _ = u.send_space(&t);
            }
            3 => u.pop(now, arg % (SIZE + 1)),
            4 => u.want(now, arg % (SIZE + 1)),
            5 => {
                now = now.saturating_add((op as u64) << 17);
                u.handle_timeout(now);
            }
            6 => u.flush_acks(now),
            _ => {
                if let Some(t) = u.poll_timeout() {
                    now = now.max(t);
                    u.handle_timeout(now);
                }
            }
        }
        let mut n = 0u32;
        while let Some(tx) = u.poll_transmit(now) {
            let p = Packet::new_checked(tx.bytes).expect("emitted datagrams decode");
            assert_eq!(p.src(), 0);
            assert!(p.flags() & flags::MULTICAST == 0 || tx.targets.len() > 1);
            assert!(tx.bytes.len() >= HEADER_LEN);
            n += 1;
            assert!(n < 100_000);
        }
        while u.poll_event().is_some() {}
        for r in 0..SIZE {
            if let Some(p) = u.peek(r) {
                assert_eq!(p.src(), r);
            }
        }
        assert!(u.buffered() <= pool);
        let _ = (
            u.all_acked(),
            u.owes_acks(),
            u.unacked_peers(),
            u.last_sent_to(arg),
            u.stats(),
        );
    }
}

/// Bytes fed in chunks of sizes taken from the input into the start-up protocol's
/// [`LineReader`](phalanx_boot::frame::LineReader), decoding [`RankMsg`]s and [`LauncherMsg`]s in turn.
///
/// Layout: the configuration byte, then chunks (see the `lines` module: a chunk byte
/// `b` is `b` bytes of stream, `0xff` a read that would block, `0xfe` an interrupted
/// read, 0 the peer closing). Line limits: 24, 256, 4096 bytes or [`MAX_LINE`].
///
/// Invariants: nothing panics; every result of the reader agrees with a model of it —
/// a message is exactly what its line decodes to (and survives an encode/decode round
/// trip), whitespace-only lines are skipped, `Pending`/`Eof` only without a complete
/// line, an error only for a line that does not decode, a line longer than the limit or
/// a partial line beyond it (never memory growth); the reader never holds more than its
/// limit plus one read; every call makes progress.
pub fn boot_lines(data: &[u8]) {
    // The table's line bound grows with the job size and saturates.
    let size = data
        .get(..4)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let t = table_line_limit(size);
    assert!(t >= MAX_LINE && t >= table_line_limit(size / 2));
    drive(data, [24, 256, 4096, MAX_LINE], 2, |kind, r, src, m| {
        if kind == 0 {
            step::<RankMsg>(r, src, m)
        } else {
            step::<LauncherMsg>(r, src, m)
        }
    });
}

/// The same as [`boot_lines`] for the job manager's protocol (`phalanx_gang::proto`):
/// its daemons read [`Challenge`], [`Hello`], [`Request`], [`Reply`], [`AgentRequest`]
/// and [`AgentEvent`] lines with the same `LineReader` (limits 24, 256, 1024 — a node's
/// limit before the hello — and [`gang::MAX_LINE`]); its commands read one line and
/// decode it with `serde_json`, so every line of the stream is also decoded directly as
/// each of the six types; and a client reads the server's first line with
/// [`gang::read_challenge`], which gets the same script.
///
/// Invariants: those of [`boot_lines`]; every line that decodes survives an
/// encode/decode round trip; `read_challenge` consumes nothing after the first newline
/// and at most 1 KiB before it, and returns exactly what that line decodes to; a proof
/// made for a challenge's nonce passes [`gang::check`] for that secret and nonce only, and
/// a decoded [`Hello`] passes only if it is that proof.
pub fn gang_lines(data: &[u8]) {
    let Some(src) = drive(
        data,
        [24, 256, 1024, gang::MAX_LINE],
        6,
        |kind, r, src, m| match kind {
            0 => step::<Challenge>(r, src, m),
            1 => step::<Hello>(r, src, m),
            2 => step::<Request>(r, src, m),
            3 => step::<Reply>(r, src, m),
            4 => step::<AgentRequest>(r, src, m),
            _ => step::<AgentEvent>(r, src, m),
        },
    ) else {
        return;
    };
    for line in src.all_data().split(|&b| b == b'\n') {
        if let Some(c) = round_trip::<Challenge>(line) {
            let p = gang::proof("secret", &c.nonce);
            assert!(gang::check("secret", &c.nonce, &p));
            assert!(!gang::check("secret2", &c.nonce, &p));
            assert!(!gang::check("secret", &format!("{}0", c.nonce), &p));
        }
        if let Some(h) = round_trip::<Hello>(line) {
            let want = gang::proof("secret", "nonce");
            assert_eq!(
                gang::check("secret", "nonce", &h),
                h.proof.trim().eq_ignore_ascii_case(&want.proof),
                "a proof that is not the proof passes"
            );
        }
        round_trip::<Request>(line);
        round_trip::<Reply>(line);
        round_trip::<AgentRequest>(line);
        round_trip::<AgentEvent>(line);
    }

    // The client's read of the challenge line, byte by byte.
    let mut src = lines::Source::new(&data[1..], data[0] & 4 != 0);
    let r = gang::read_challenge(&mut src);
    let got = src.delivered();
    let nl = got.iter().position(|&b| b == b'\n');
    if let Some(i) = nl {
        assert_eq!(
            i,
            got.len() - 1,
            "read_challenge consumed bytes after the line"
        );
    }
    assert!(got.len() <= 1025, "read_challenge read {} bytes", got.len());
    match (r, nl) {
        (Ok(c), Some(i)) => {
            let want: Challenge =
                serde_json::from_slice(&got[..i]).expect("a challenge from a line that decodes");
            assert_eq!(want, c);
        }
        (Ok(c), None) => panic!("read_challenge returned {c:?} without a line"),
        (Err(_), Some(i)) => assert!(serde_json::from_slice::<Challenge>(&got[..i]).is_err()),
        // The source ended, would block, was interrupted, or the line is too long.
        (Err(_), None) => {}
    }
}

/// `line` decoded as a `T`, checked to survive an encode/decode round trip.
fn round_trip<T: DeserializeOwned + Serialize + PartialEq + Debug>(line: &[u8]) -> Option<T> {
    let m: T = serde_json::from_slice(line).ok()?;
    let again: T = serde_json::from_slice(&phalanx_boot::frame::encode(&m))
        .expect("an encoded message decodes again");
    assert_eq!(again, m, "encode/decode round trip");
    Some(m)
}

/// Inputs above this size are written by a thread (a socket buffer may not hold them).
const PMI_INLINE: usize = 32 << 10;

/// The PMI client ([`phalanx_boot::pmi`]) against a PMI server whose whole side of the
/// conversation is the input: the reply parsers of both protocol versions — PMI-1
/// `cmd=… key=value` lines and PMI-2's 6-byte length-prefixed `cmd=…;key=value;`
/// messages, fields, return codes, hex values — through the public API, on a socket pair.
///
/// Layout: byte 0 chooses the client: bit 0 asks for PMI-1, bit 1 sets a job id, bits
/// 2–3 the value put (2 bytes, [`MAX_VALUE`] bytes, one byte too many, empty), bit 4 a
/// blocking fence (else a split one); the rest is what the server sends, after which it
/// shuts its side down (so every read ends, at the latest, at end-of-stream).
///
/// Invariants: nothing panics or hangs; after a successful init, `put`, the fence, `get`
/// and `finalize` each return; an over-long value is refused; a value read back is at
/// most half a reply (hex encoded).
pub fn pmi_wire(data: &[u8]) {
    let Some((&cfg, script)) = data.split_first() else {
        return;
    };
    let (client, mut server) = UnixStream::pair().expect("a socket pair");
    let writer = if script.len() <= PMI_INLINE {
        server
            .write_all(script)
            .expect("the script fits the socket");
        server.shutdown(Shutdown::Write).expect("shutdown");
        None
    } else {
        let script = script.to_vec();
        Some(std::thread::spawn(move || {
            // The client may give up before reading everything: ignore write errors.
            let _ = server.write_all(&script);
            let _ = server.shutdown(Shutdown::Write);
            server
        }))
    };
    let env = PmiEnv {
        fd: client.into_raw_fd(),
        rank: 1,
        size: 4,
        jobid: (cfg & 2 != 0).then(|| "12.0".to_string()),
        v1: cfg & 1 != 0,
    };
    // On failure the client's stream (and the descriptor) is dropped.
    if let Ok(mut p) = Pmi::init(&env, Duration::from_secs(10)) {
        let value = match (cfg >> 2) & 3 {
            0 => b"hi".to_vec(),
            1 => vec![0xa5; MAX_VALUE],
            2 => vec![0x5a; MAX_VALUE + 1],
            _ => Vec::new(),
        };
        let put = p.put("k", &value);
        assert!(value.len() <= MAX_VALUE || put.is_err());
        if cfg & 0x10 != 0 {
            let _ = p.fence();
        } else if p.fence_start().is_ok() {
            // The server's side is closed: the socket is readable, the fence ends.
            for _ in 0..4 {
                if !matches!(p.fence_done(), Ok(false)) {
                    break;
                }
            }
        }
        if let Ok(v) = p.get("k") {
            assert!(v.len() <= MAX_REPLY / 2);
        }
        assert!(p.fd() >= 0);
        // Also forgets the descriptor the exit handler would use.
        let _ = p.finalize();
    }
    if let Some(w) = writer {
        drop(w.join().expect("the writer thread"));
    }
}

/// The secret of [`mac_open`]'s job.
pub const MAC_SECRET: [u8; 32] = [0x5e; 32];
/// [`mac_open`] recomputes a trailer to check that an opened datagram was really sealed
/// when its counter is below this (well-formed inputs come from fresh seals).
pub const MAC_MAX_COUNTER: u64 = 64;

/// [`Seal::open`] under the key of [`MAC_SECRET`] on arbitrary bytes, and sealing the
/// input.
///
/// Invariants: `open` never panics and returns `None` unless the bytes are a datagram
/// sealed under that key — what it returns is the input without its trailer, and
/// recomputing the trailer (rank and counter taken from it) gives the same bytes; a
/// different key opens nothing. The input sealed by one rank (a counter advanced by
/// `data[0] & 3` first) carries that rank and counter, and opens, under another
/// `Seal` of the same key, to the same bytes; sealing again gives another tag; flipping
/// any one byte of the sealed datagram (every byte of one up to 64 bytes; of a longer
/// one 16 spread over the datagram and every other byte of the trailer), dropping its
/// first or last byte makes it fail.
pub fn mac_open(data: &[u8]) {
    let key = datagram_key(&MAC_SECRET);
    let opener = Seal::new(&key, 1);
    if let Some(d) = opener.open(data) {
        assert_eq!(d.len() + TRAILER, data.len());
        assert_eq!(d, &data[..d.len()]);
        let t = &data[d.len()..];
        let rank = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
        let mut c = [0u8; 8];
        c.copy_from_slice(&t[4..12]);
        let counter = u64::from_le_bytes(c);
        assert!(
            counter < MAC_MAX_COUNTER,
            "a datagram with counter {counter} opened: forged, or sealed out of band"
        );
        let mut s = Seal::new(&key, rank);
        let mut want = [0u8; TRAILER];
        for _ in 0..=counter {
            want = s.trailer(d);
        }
        assert_eq!(&want[..], t, "a datagram opened that was not sealed");
    }
    let other = Seal::new(&datagram_key(&[0xa1; 32]), 1);
    assert!(other.open(data).is_none(), "opened under another key");

    let rank = data.len() as u32 ^ 0x0bad_5eed;
    let mut sealer = Seal::new(&key, rank);
    let skip = data.first().map_or(0, |b| b & 3) as u64;
    for _ in 0..skip {
        sealer.trailer(b"");
    }
    let t = sealer.trailer(data);
    assert_eq!(t[..4], rank.to_le_bytes());
    assert_eq!(t[4..12], skip.to_le_bytes());
    let sealed = [data, &t[..]].concat();
    assert_eq!(opener.open(&sealed), Some(data));
    let t2 = sealer.trailer(data);
    assert_ne!(t[12..], t2[12..], "sealing twice gives the same tag");
    let n = sealed.len();
    let flip = |i: usize| {
        let mut x = sealed.clone();
        x[i] ^= 1 << (i % 8);
        assert!(
            opener.open(&x).is_none(),
            "opened with byte {i} of {n} flipped"
        );
    };
    if n <= 64 {
        (0..n).for_each(flip);
    } else {
        // Bounded work per input: 16 bytes spread over the datagram, every other byte
        // of the trailer (rank, counter, tag).
        let body = n - TRAILER;
        (0..16).map(|k| k * body / 16).for_each(flip);
        (body..n).step_by(2).for_each(flip);
    }
    assert!(
        opener.open(&sealed[1..]).is_none(),
        "opened without its first byte"
    );
    assert!(
        opener.open(&sealed[..n - 1]).is_none(),
        "opened without its last byte"
    );
}

/// Takes a length byte and up to that many bytes off the front of `rest`; `None` when
/// `rest` is empty.
fn length_prefixed<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let (&len, tail) = rest.split_first()?;
    let (bytes, tail) = tail.split_at((len as usize).min(tail.len()));
    *rest = tail;
    Some(bytes)
}

/// The cluster secret and nonces of [`seal_open`]'s connection.
pub const SEAL_KEYS: (&str, &str, &str) = ("cluster", "challenge", "launcher nonce");

/// The agent's [`phalanx_gang::seal::Opener`] of one connection on arbitrary lines (the
/// input split at `\n`), then the launcher's sealing of the input.
///
/// Invariants: opening never panics; a line opens only if it is the very line the
/// launcher's sealer makes for that plaintext as the next counter (re-sealing it gives
/// the same bytes — AES-GCM is deterministic for a key and nonce); after the first line
/// that fails, every line fails ([`SealError::Closed`](phalanx_gang::seal::SealError)).
/// The input itself (up to [`gang::MAX_LINE`] bytes) sealed by the launcher opens to the
/// same bytes; the same line again, or with one byte changed (16 positions spread over
/// it), the agent's own line, or it under another connection's key, does not.
pub fn seal_open(data: &[u8]) {
    use phalanx_gang::seal::{channel, SealError, Side};
    let (secret, challenge, nonce) = SEAL_KEYS;
    let (_, mut opener) = channel(secret, challenge, nonce, Side::Agent);
    let (mut sealer, _) = channel(secret, challenge, nonce, Side::Launcher);
    let mut failed = false;
    for line in data.split(|&b| b == b'\n') {
        match opener.open_line(line) {
            Ok(plain) => {
                assert!(!failed, "a line opened after one failed");
                let again = sealer.seal_line_bytes(&plain).expect("what opened seals");
                assert_eq!(
                    &again[..again.len() - 1],
                    line,
                    "a line opened that the launcher did not seal"
                );
            }
            Err(e) => {
                if failed {
                    assert_eq!(e, SealError::Closed);
                }
                failed = true;
            }
        }
    }

    let plain = &data[..data.len().min(gang::MAX_LINE)];
    let (mut s, mut o) = (
        channel(secret, challenge, nonce, Side::Launcher).0,
        channel(secret, challenge, nonce, Side::Agent).1,
    );
    let line = s
        .seal_line_bytes(plain)
        .expect("a message within MAX_LINE seals");
    let fresh = || channel(secret, challenge, nonce, Side::Agent).1;
    let n = line.len() - 1; // without the newline
    for k in 0..16 {
        let i = k * n / 16;
        let mut x = line.clone();
        x[i] = if x[i] == b'0' { b'1' } else { b'0' };
        assert!(
            fresh().open_line(&x).is_err(),
            "opened with byte {i} of {n} changed"
        );
    }
    assert_eq!(o.open_line(&line).as_deref(), Ok(plain));
    assert!(o.open_line(&line).is_err(), "a replayed line opened");
    let (mut agent, _) = channel(secret, challenge, nonce, Side::Agent);
    let back = agent.seal_line_bytes(plain).expect("sealed");
    assert!(
        fresh().open_line(&back).is_err(),
        "the agent's own line opened"
    );
    let (_, mut other) = channel(secret, "another challenge", nonce, Side::Agent);
    assert!(other.open_line(&line).is_err(), "opened under another key");
}
