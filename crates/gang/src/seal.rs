//! The sealed channel between a job's launcher and a node daemon's agent: after the
//! challenge–response, every line either side sends is encrypted and authenticated, so
//! that what travels on it — the ranks' environment with the job's secret, signals, the
//! ranks' output and exits — can be neither read nor altered on the way.
//!
//! Contract:
//! * Keys. The launcher's [`Hello`] carries, besides the proof, a fresh random nonce of
//!   its own ([`client_hello`]); the agent takes the connection only if the proof is
//!   right and that nonce is there ([`accept`]). Both ends then derive the connection's
//!   key: BLAKE3 `derive_key` of the cluster secret with this module's own context (not
//!   the proof's), used as the key of a keyed hash over the agent's challenge and the
//!   launcher's nonce. Fresh randomness from both ends makes every connection's key new,
//!   even against a peer that replays an old challenge or hello.
//! * Cipher. AES-256-GCM (`aes-gcm`). The 12-byte nonce is the direction (1: launcher
//!   to agent, 2: agent to launcher), three zero bytes and the sender's line counter (u64
//!   big-endian), which starts at 0 in each direction and goes up by one per line: no
//!   (key, nonce) pair ever seals two lines.
//! * Framing. A sealed line is a JSON string of lowercase hex — the counter (8 bytes),
//!   the ciphertext, the 16-byte tag — then `\n`; its plaintext is one JSON message of at
//!   most [`MAX_LINE`] bytes (without newline), so a sealed line is at most
//!   [`MAX_SEALED_LINE`] bytes before its newline. [`Sealer::seal_line`] refuses a longer
//!   message (nothing is sent, its counter is not used).
//! * Opening. [`Opener::open`] takes exactly the next counter of the other direction:
//!   a replayed, reordered or dropped line, a line of the other direction or of another
//!   connection, any changed byte, a line too long or not hex is a [`SealError`] naming
//!   the reason (never a panic), and the opener stays closed after one — the caller ends
//!   the connection, naming its peer.

use crate::proto::{challenge, check, proof, Challenge, Hello, MAX_LINE};
use aes_gcm::aead::{Aead, KeyInit};
use aes_gcm::Aes256Gcm;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Bytes a sealed line adds to its plaintext before hex: counter (8) and tag (16).
pub const OVERHEAD: usize = 8 + 16;
/// Longest sealed line, without its newline: quotes and hex of counter, [`MAX_LINE`]
/// bytes of ciphertext and tag.
pub const MAX_SEALED_LINE: usize = 2 + 2 * (OVERHEAD + MAX_LINE);

const KEY_CONTEXT: &str = "phalanx 2026-11 gang agent channel key (AES-256-GCM)";
/// The direction byte of lines the launcher seals.
const LAUNCHER_TO_AGENT: u8 = 1;
/// The direction byte of lines the agent seals.
const AGENT_TO_LAUNCHER: u8 = 2;

/// Which end of the connection this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The job's launcher (the client).
    Launcher,
    /// The node daemon's agent (the server).
    Agent,
}

/// Why a line could not be sealed or opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    /// A message (or sealed line) longer than the channel carries.
    #[error("a line of {len} bytes, more than the {max} a sealed line may hold")]
    TooLong { len: usize, max: usize },
    /// Not a sealed line at all.
    #[error("a malformed sealed line ({0})")]
    Malformed(&'static str),
    /// A line whose counter is not the next one.
    #[error(
        "line {got} arrived where line {expected} was due (replayed, reordered or a line was dropped)"
    )]
    OutOfOrder { expected: u64, got: u64 },
    /// A line whose tag is wrong.
    #[error(
        "line {0} does not authenticate (altered on the way, or sealed for the other direction or another connection)"
    )]
    Forged(u64),
    /// A line that opened but holds no message of the protocol (the peer's bug).
    #[error("line {line} opened but is not a message: {why}")]
    BadMessage { line: u64, why: String },
    /// An earlier line failed: nothing more is taken from this connection.
    #[error("an earlier line failed to open: the channel is closed")]
    Closed,
    /// Every counter value was used (2^64 lines).
    #[error("the channel's line counter is used up")]
    Exhausted,
}

/// The sending half of a connection's channel (module docs).
pub struct Sealer {
    cipher: Aes256Gcm,
    dir: u8,
    next: u64,
}

/// The receiving half of a connection's channel (module docs).
pub struct Opener {
    cipher: Aes256Gcm,
    dir: u8,
    next: u64,
    closed: bool,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sealer(direction {}, line {})", self.dir, self.next)
    }
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Opener(direction {}, line {})", self.dir, self.next)
    }
}

/// The connection key of the cluster `secret`, the agent's `challenge` and the
/// launcher's `client_nonce` (module docs). Each part goes in with its length, so no two
/// pairs of nonces hash alike.
fn channel_key(secret: &str, challenge: &str, client_nonce: &str) -> [u8; 32] {
    let base = blake3::derive_key(KEY_CONTEXT, secret.trim().as_bytes());
    let mut h = blake3::Hasher::new_keyed(&base);
    for part in [challenge, client_nonce] {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    *h.finalize().as_bytes()
}

/// The two halves of one connection's channel, for end `side`.
pub fn channel(secret: &str, challenge: &str, client_nonce: &str, side: Side) -> (Sealer, Opener) {
    let key = channel_key(secret, challenge, client_nonce);
    let (out, inp) = match side {
        Side::Launcher => (LAUNCHER_TO_AGENT, AGENT_TO_LAUNCHER),
        Side::Agent => (AGENT_TO_LAUNCHER, LAUNCHER_TO_AGENT),
    };
    (
        Sealer {
            cipher: Aes256Gcm::new(&key.into()),
            dir: out,
            next: 0,
        },
        Opener {
            cipher: Aes256Gcm::new(&key.into()),
            dir: inp,
            next: 0,
            closed: false,
        },
    )
}

/// The launcher's answer to an agent's challenge: the proof of the cluster `secret`
/// with a fresh nonce of its own, and the launcher's end of the channel.
pub fn client_hello(secret: &str, ch: &Challenge) -> std::io::Result<(Hello, Sealer, Opener)> {
    let own = challenge()?.nonce;
    let mut hello = proof(secret, &ch.nonce);
    let (sealer, opener) = channel(secret, &ch.nonce, &own, Side::Launcher);
    hello.nonce = Some(own);
    Ok((hello, sealer, opener))
}

/// The agent's end of the channel if `hello` proves the cluster `secret` for `ch` and
/// carries the launcher's nonce (32 bytes, hex); else `None`.
pub fn accept(secret: &str, ch: &Challenge, hello: &Hello) -> Option<(Sealer, Opener)> {
    let own = hello.nonce.as_deref()?;
    let fresh = own.len() == 64 && own.bytes().all(|b| b.is_ascii_hexdigit());
    (fresh && check(secret, &ch.nonce, hello)).then(|| channel(secret, &ch.nonce, own, Side::Agent))
}

fn nonce(dir: u8, counter: u64) -> [u8; 12] {
    let mut n = [0u8; 12];
    n[0] = dir;
    n[4..].copy_from_slice(&counter.to_be_bytes());
    n
}

impl Sealer {
    /// `plain` sealed as the next line: its hex (module docs), without quotes.
    pub fn seal(&mut self, plain: &[u8]) -> Result<String, SealError> {
        if plain.len() > MAX_LINE {
            return Err(SealError::TooLong {
                len: plain.len(),
                max: MAX_LINE,
            });
        }
        let counter = self.next;
        self.next = counter.checked_add(1).ok_or(SealError::Exhausted)?;
        let sealed = self
            .cipher
            .encrypt(&nonce(self.dir, counter).into(), plain)
            // Only a message beyond GCM's length limit (64 GiB) fails.
            .map_err(|_| SealError::TooLong {
                len: plain.len(),
                max: MAX_LINE,
            })?;
        Ok(hex::encode([&counter.to_be_bytes()[..], &sealed].concat()))
    }

    /// `plain` sealed: the whole line to write (quotes and newline included).
    pub fn seal_line_bytes(&mut self, plain: &[u8]) -> Result<Vec<u8>, SealError> {
        let hex = self.seal(plain)?;
        let mut line = Vec::with_capacity(hex.len() + 3);
        line.push(b'"');
        line.extend_from_slice(hex.as_bytes());
        line.extend_from_slice(b"\"\n");
        Ok(line)
    }

    /// `msg` as JSON, sealed: the whole line to write (quotes and newline included).
    pub fn seal_line<T: Serialize>(&mut self, msg: &T) -> Result<Vec<u8>, SealError> {
        // Serializing the protocol's plain data types cannot fail (string keys only).
        let plain = serde_json::to_vec(msg).map_err(|e| SealError::BadMessage {
            line: self.next,
            why: e.to_string(),
        })?;
        self.seal_line_bytes(&plain)
    }
}

impl Opener {
    /// The plaintext of `hex`, which must be the next line of the other direction
    /// (module docs).
    pub fn open(&mut self, hex: &str) -> Result<Vec<u8>, SealError> {
        if self.closed {
            return Err(SealError::Closed);
        }
        let r = self.open_next(hex.as_bytes());
        self.closed = r.is_err();
        r
    }

    fn open_next(&mut self, hex: &[u8]) -> Result<Vec<u8>, SealError> {
        let max = MAX_SEALED_LINE - 2;
        if hex.len() > max {
            return Err(SealError::TooLong {
                len: hex.len(),
                max,
            });
        }
        if hex.len() & 1 == 1 || hex.len() < 2 * OVERHEAD {
            return Err(SealError::Malformed(
                "not an even number of hex digits past the minimum",
            ));
        }
        let lower = hex.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let bytes = hex::decode(hex)
            .ok()
            .filter(|_| lower)
            .ok_or(SealError::Malformed("not lowercase hex"))?;
        let (counter, sealed) = bytes.split_at(8);
        let mut c = [0u8; 8];
        c.copy_from_slice(counter);
        let got = u64::from_be_bytes(c);
        if got != self.next {
            return Err(SealError::OutOfOrder {
                expected: self.next,
                got,
            });
        }
        let plain = self
            .cipher
            .decrypt(&nonce(self.dir, got).into(), sealed)
            .map_err(|_| SealError::Forged(got))?;
        self.next = got.checked_add(1).ok_or(SealError::Exhausted)?;
        Ok(plain)
    }

    /// [`open`](Self::open) a whole line as it came off the stream (`"hex"`, with or
    /// without its newline).
    pub fn open_line(&mut self, line: &[u8]) -> Result<Vec<u8>, SealError> {
        if self.closed {
            return Err(SealError::Closed);
        }
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let inner = line.strip_prefix(b"\"").and_then(|l| l.strip_suffix(b"\""));
        match inner {
            Some(hex) => {
                let r = self.open_next(hex);
                self.closed = r.is_err();
                r
            }
            None if line.len() > MAX_SEALED_LINE => {
                self.closed = true;
                Err(SealError::TooLong {
                    len: line.len(),
                    max: MAX_SEALED_LINE,
                })
            }
            None => {
                self.closed = true;
                Err(SealError::Malformed("not a quoted string"))
            }
        }
    }

    /// The next line's message: [`open`](Self::open) and JSON.
    pub fn open_msg<T: DeserializeOwned>(&mut self, hex: &str) -> Result<T, SealError> {
        let plain = self.open(hex)?;
        self.parse(&plain)
    }

    /// [`open_line`](Self::open_line) and JSON.
    pub fn open_line_msg<T: DeserializeOwned>(&mut self, line: &[u8]) -> Result<T, SealError> {
        let plain = self.open_line(line)?;
        self.parse(&plain)
    }

    fn parse<T: DeserializeOwned>(&mut self, plain: &[u8]) -> Result<T, SealError> {
        serde_json::from_slice(plain).map_err(|e| {
            self.closed = true;
            SealError::BadMessage {
                line: self.next - 1,
                why: e.to_string(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{AgentEvent, AgentRequest};

    fn pair() -> ((Sealer, Opener), (Sealer, Opener)) {
        let ch = challenge().unwrap();
        let (hello, ls, lo) = client_hello("cluster", &ch).unwrap();
        let agent = accept("cluster", &ch, &hello).expect("the launcher's hello is taken");
        ((ls, lo), agent)
    }

    fn quoted(hex: &str) -> Vec<u8> {
        format!("\"{hex}\"\n").into_bytes()
    }

    #[test]
    fn lines_round_trip_both_ways_and_hide_their_content() {
        let ((mut ls, mut lo), (mut a_s, mut a_o)) = pair();
        for i in 0..5u32 {
            let req = AgentRequest::Signal { rank: i, sig: 15 };
            let line = ls.seal_line(&req).unwrap();
            assert!(!String::from_utf8_lossy(&line).contains("signal"));
            assert_eq!(a_o.open_line_msg::<AgentRequest>(&line).unwrap(), req);
            let ev = AgentEvent::Output {
                rank: i,
                stderr: false,
                line: "PHALANX_JOB_SECRET=00ff\n".into(),
            };
            let hex = a_s.seal(&serde_json::to_vec(&ev).unwrap()).unwrap();
            assert!(!hex.contains("PHALANX") && !hex.contains("00ff00ff"));
            assert_eq!(lo.open_msg::<AgentEvent>(&hex).unwrap(), ev);
        }
        // The same message seals differently every time.
        assert_ne!(ls.seal(b"x").unwrap()[16..], ls.seal(b"x").unwrap()[16..]);
        // The largest legitimate message fits, within the bound.
        let big = vec![b'a'; MAX_LINE];
        let line = quoted(&a_s.seal(&big).unwrap());
        assert_eq!(line.len(), MAX_SEALED_LINE + 1);
        assert_eq!(lo.open_line(&line).unwrap(), big);
    }

    #[test]
    fn a_changed_byte_anywhere_is_refused() {
        let ((mut ls, _), (_, a_o)) = pair();
        let hex = ls
            .seal(b"{\"type\":\"signal\",\"rank\":0,\"sig\":9}")
            .unwrap();
        let mut a_o = a_o;
        for i in 0..hex.len() {
            let mut bad = hex.clone().into_bytes();
            bad[i] = if bad[i] == b'0' { b'1' } else { b'0' };
            let mut o = Opener {
                cipher: a_o.cipher.clone(),
                dir: a_o.dir,
                next: 0,
                closed: false,
            };
            let e = o.open(std::str::from_utf8(&bad).unwrap()).unwrap_err();
            assert!(
                matches!(e, SealError::Forged(0) | SealError::OutOfOrder { .. }),
                "byte {i}: {e}"
            );
            assert_eq!(
                o.open(&hex),
                Err(SealError::Closed),
                "closed after a failure"
            );
        }
        assert!(a_o.open(&hex).is_ok(), "the untouched line opens");
    }

    #[test]
    fn replayed_reordered_dropped_and_foreign_lines_are_refused() {
        let ((mut ls, mut lo), (mut a_s, a_o)) = pair();
        let fresh = |o: &Opener, next| Opener {
            cipher: o.cipher.clone(),
            dir: o.dir,
            next,
            closed: false,
        };
        let l0 = ls.seal(b"0").unwrap();
        let l1 = ls.seal(b"1").unwrap();
        let l2 = ls.seal(b"2").unwrap();
        let mut o = fresh(&a_o, 0);
        assert_eq!(o.open(&l0).unwrap(), b"0");
        // Replayed.
        let e = o.open(&l0).unwrap_err();
        assert_eq!(
            e,
            SealError::OutOfOrder {
                expected: 1,
                got: 0
            }
        );
        assert!(e.to_string().contains("replayed"), "{e}");
        // Reordered, or one dropped.
        let mut o = fresh(&a_o, 1);
        assert_eq!(
            o.open(&l2),
            Err(SealError::OutOfOrder {
                expected: 1,
                got: 2
            })
        );
        let mut o = fresh(&a_o, 1);
        assert_eq!(o.open(&l1).unwrap(), b"1");
        // A counter rewritten to the expected one still does not open.
        let mut o = fresh(&a_o, 2);
        let forged = format!("{:016x}{}", 2, &l1[16..]);
        assert_eq!(o.open(&forged), Err(SealError::Forged(2)));
        // The other direction's line 0 (same key, same counter).
        let back = a_s.seal(b"0").unwrap();
        assert_eq!(fresh(&a_o, 0).open(&back), Err(SealError::Forged(0)));
        // Reflected back at its sender.
        assert_eq!(lo.open(&l0), Err(SealError::Forged(0)));
        // Another connection (another challenge, or another launcher nonce), another
        // secret.
        let ((_, mut other_lo), (_, mut other_ao)) = pair();
        assert_eq!(other_ao.open(&l0), Err(SealError::Forged(0)));
        assert_eq!(other_lo.open(&back), Err(SealError::Forged(0)));
        let (_, mut o) = channel("cluster", "c", "n1", Side::Agent);
        let (mut s, _) = channel("cluster", "c", "n2", Side::Launcher);
        assert_eq!(o.open(&s.seal(b"x").unwrap()), Err(SealError::Forged(0)));
        let (mut s, _) = channel("other", "c", "n1", Side::Launcher);
        let (_, mut o) = channel("cluster", "c", "n1", Side::Agent);
        assert_eq!(o.open(&s.seal(b"x").unwrap()), Err(SealError::Forged(0)));
        // Length-prefixed parts: moving a digit between the nonces changes the key.
        let (mut s, _) = channel("cluster", "ab", "c", Side::Launcher);
        let (_, mut o) = channel("cluster", "a", "bc", Side::Agent);
        assert_eq!(o.open(&s.seal(b"x").unwrap()), Err(SealError::Forged(0)));
    }

    #[test]
    fn malformed_and_oversized_lines_are_errors() {
        let ((mut ls, _), (_, a_o)) = pair();
        let fresh = || Opener {
            cipher: a_o.cipher.clone(),
            dir: a_o.dir,
            next: 0,
            closed: false,
        };
        let good = ls.seal(b"hello").unwrap();
        let too_long = "0".repeat(MAX_SEALED_LINE - 1);
        let e = fresh().open(&too_long).unwrap_err();
        assert!(matches!(e, SealError::TooLong { .. }), "{e}");
        let e = fresh().open_line(&quoted(&too_long)).unwrap_err();
        assert!(matches!(e, SealError::TooLong { .. }), "{e}");
        let e = fresh().open_line(&[b'x'; MAX_SEALED_LINE + 1]).unwrap_err();
        assert!(matches!(e, SealError::TooLong { .. }), "{e}");
        let mut upper = good.clone().into_bytes();
        upper.iter_mut().for_each(u8::make_ascii_uppercase);
        for bad in [
            "",
            "00",
            &good[..good.len() - 1],
            &good[..2 * OVERHEAD - 2],
            &format!("{good}zz"),
            &format!("{}g", &good[..good.len() - 1]),
            std::str::from_utf8(&upper).unwrap(),
            "{\"type\":\"signal\",\"rank\":0,\"sig\":9}",
            "é",
        ] {
            assert!(fresh().open(bad).is_err(), "{bad:?}");
        }
        for bad in [
            &b""[..],
            b"\n",
            b"\"",
            b"\"\"\n",
            good.as_bytes(),
            &quoted(&good)[1..],
            b"{\"type\":\"signal\",\"rank\":0,\"sig\":9}\n",
            b"\xff\xfe\n",
        ] {
            assert!(fresh().open_line(bad).is_err(), "{bad:?}");
        }
        assert_eq!(fresh().open_line(&quoted(&good)).unwrap(), b"hello");
        // A line that opens but is no message of the protocol.
        let mut o = fresh();
        let e = o.open_msg::<AgentRequest>(&good).unwrap_err();
        assert!(matches!(e, SealError::BadMessage { line: 0, .. }), "{e}");
        assert_eq!(o.open(&good), Err(SealError::Closed));
        // A message the channel cannot carry is refused before its counter is used.
        let mut s = ls;
        let e = s.seal(&vec![b'a'; MAX_LINE + 1]).unwrap_err();
        assert_eq!(
            e,
            SealError::TooLong {
                len: MAX_LINE + 1,
                max: MAX_LINE
            }
        );
        assert_eq!(&s.seal(b"x").unwrap()[..16], "0000000000000001");
        // Counters end before they could wrap around.
        s.next = u64::MAX;
        assert_eq!(s.seal(b"x"), Err(SealError::Exhausted));
        s.next = u64::MAX - 1;
        assert!(s.seal(b"x").is_ok());
        assert_eq!(s.seal(b"x"), Err(SealError::Exhausted));
    }

    #[test]
    fn only_a_proved_hello_with_a_fresh_nonce_opens_a_channel() {
        let ch = challenge().unwrap();
        let (hello, _, _) = client_hello("cluster", &ch).unwrap();
        assert!(accept("cluster", &ch, &hello).is_some());
        assert!(accept("other", &ch, &hello).is_none(), "another secret");
        assert!(
            accept("cluster", &challenge().unwrap(), &hello).is_none(),
            "another challenge"
        );
        let mut bare = hello.clone();
        bare.nonce = None;
        assert!(
            check("cluster", &ch.nonce, &bare),
            "the proof alone is right"
        );
        assert!(accept("cluster", &ch, &bare).is_none(), "no launcher nonce");
        for bad in ["", "00", &"g".repeat(64), &"0".repeat(63)] {
            let mut h = hello.clone();
            h.nonce = Some(bad.into());
            assert!(accept("cluster", &ch, &h).is_none(), "{bad:?}");
        }
        let (again, _, _) = client_hello("cluster", &ch).unwrap();
        assert_ne!(again.nonce, hello.nonce, "a fresh launcher nonce each time");
        assert!(!serde_json::to_string(&hello).unwrap().contains("cluster"));
    }
}
