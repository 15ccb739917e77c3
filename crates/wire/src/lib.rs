//! Wire formats of phalanx.
//!
//! Contract: every phalanx datagram starts with a fixed [`HEADER_LEN`]-byte little-endian
//! header, optionally followed by `ext_len` bytes of extensions and then the payload.
//! [`Packet::new_checked`] validates a byte slice once (length, magic, version, kind,
//! extension length); after it succeeds **no accessor panics**, whatever the bytes were.
//! [`Header`] is the plain, validated representation with [`Header::parse`] and
//! [`Header::emit`]. Nothing here allocates or does I/O.
//!
//! Layout (offsets in bytes, all little-endian):
//!
//! | off | size | field | meaning |
//! |----:|-----:|-------|---------|
//! | 0 | 2 | magic | [`MAGIC`] |
//! | 2 | 1 | version | [`VERSION`] |
//! | 3 | 1 | kind | protocol packet kind, [`Kind`] |
//! | 4 | 1 | msg | message-layer kind, [`MsgKind`] (opaque to the reliability protocols) |
//! | 5 | 1 | flags | [`flags`] bits |
//! | 6 | 2 | ext_len | bytes of extension data after the fixed header |
//! | 8 | 8 | job_key | per-job random key; foreign keys are dropped |
//! | 16 | 4 | src | source rank in the job |
//! | 20 | 4 | context | communicator context id |
//! | 24 | 4 | seq | sequence number of this packet (wrapping) |
//! | 28 | 4 | ack | cumulative acknowledgement: last in-order sequence received |
//! | 32 | 4 | tag | MPI tag (i32) |
//! | 36 | 4 | aux32 | message-layer word (e.g. collective sequence number) |
//! | 40 | 8 | msg_len | total message length in bytes (u64) |
//! | 48 | 8 | aux | message-layer word (fragment offset, request ids) |
//!
//! Fixed offsets are part of the contract: kernel (BPF) filters read `job_key` at
//! [`OFF_JOB_KEY`] and `src` at [`OFF_SRC`], and for URTP multicast packets
//! ([`flags::MULTICAST`]) the target bitmap at [`mcast::OFF_TARGETS`].

#![forbid(unsafe_code)]

/// Magic number at offset 0 ("PX" read as little-endian u16).
pub const MAGIC: u16 = u16::from_le_bytes(*b"PX");
/// Current header version.
pub const VERSION: u8 = 1;
/// Length of the fixed header.
pub const HEADER_LEN: usize = 56;

/// Offset of the job key (u64).
pub const OFF_JOB_KEY: usize = 8;
/// Offset of the source rank (u32).
pub const OFF_SRC: usize = 16;
/// Offset of the sequence number (u32).
pub const OFF_SEQ: usize = 24;
/// Offset of the acknowledgement number (u32).
pub const OFF_ACK: usize = 28;
/// Offset of the flags byte.
pub const OFF_FLAGS: usize = 5;

/// Flag bits carried in the header's flags byte.
pub mod flags {
    /// The `seq` field is valid (the packet occupies a sequence number).
    pub const SEQ_VALID: u8 = 1 << 0;
    /// The `ack` field is valid.
    pub const ACK_VALID: u8 = 1 << 1;
    /// The packet is a retransmission (diagnostics only).
    pub const RETRANSMIT: u8 = 1 << 2;
    /// The sender asks for an immediate acknowledgement (e.g. while draining).
    pub const ACK_REQUEST: u8 = 1 << 3;
    /// URTP multicast packet: the extension area starts (at [`crate::mcast::OFF_TARGETS`])
    /// with the target bitmap followed by one counter per target, see [`crate::mcast`].
    pub const MULTICAST: u8 = 1 << 4;
    /// On a go-back-n duplicate ACK: the receiver saw data beyond a gap (a packet out of
    /// order), so something was lost — the sender goes back at once. A duplicate ACK
    /// without it only answers a duplicate packet.
    pub const GAP: u8 = 1 << 5;
    /// On a go-back-n pure ACK: the `seq` field carries the last sequence number its
    /// sender has transmitted to the receiver, so a receiver that has not got it knows
    /// at once that something was lost (and answers with a [`GAP`] duplicate ACK).
    pub const TX_HINT: u8 = 1 << 6;
}

/// Protocol packet kinds: what the reliability layer sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// go-back-n data packet: carries a sequence number and a message-layer payload.
    GbnData = 1,
    /// go-back-n pure acknowledgement: no payload, no sequence number.
    GbnAck = 2,
    /// URTP data packet (seed 000): unicast (`seq` = the pair's counter) or, with
    /// [`flags::MULTICAST`], multicast (counters in the [`mcast`] extension).
    UrtpData = 3,
    /// URTP pure acknowledgement: `ack` = last counter consumed from the destination.
    UrtpAck = 4,
    /// URTP request: `seq` = the counter requested (implicitly acks everything before it).
    UrtpReq = 5,
    /// Careful-protocol data frame (seed 003): unicast (`seq` = the pair's frame number,
    /// [`flags::SEQ_VALID`]) or, with [`flags::MULTICAST`], one frame to several ranks
    /// (frame numbers in the [`mcast`] extension); `ack` ([`flags::ACK_VALID`]) = window
    /// update: frames of the destination freed since the previous frame on this link
    /// (for several destinations, the minimum over them).
    CarefulData = 6,
    /// Careful-protocol window update without data: `seq` = the pair's frame number,
    /// `ack` = frames of the destination freed since the previous frame on this link.
    CarefulUpdate = 7,
    /// The resume exchange after a halt (job manager, Slurm's gang scheduling): the
    /// sender runs again. With [`flags::ACK_REQUEST`] an announcement that asks for one
    /// back; without, that answer. No payload.
    Resume = 8,
}

impl Kind {
    /// Decodes a kind byte.
    pub fn from_u8(b: u8) -> Option<Kind> {
        match b {
            1 => Some(Kind::GbnData),
            2 => Some(Kind::GbnAck),
            3 => Some(Kind::UrtpData),
            4 => Some(Kind::UrtpAck),
            5 => Some(Kind::UrtpReq),
            6 => Some(Kind::CarefulData),
            7 => Some(Kind::CarefulUpdate),
            8 => Some(Kind::Resume),
            _ => None,
        }
    }
}

/// Message-layer kinds, carried opaquely by the reliability protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MsgKind {
    /// No message-layer content (pure protocol packets).
    None = 0,
    /// Eager message fragment: `tag`, `context`, `msg_len`; `aux` = byte offset.
    Eager = 1,
    /// Rendezvous request-to-send: `tag`, `context`, `msg_len`; `aux` = sender request id.
    Rts = 2,
    /// Rendezvous clear-to-send: `aux` = sender request id, `aux32` = unused,
    /// payload = receiver request id (u64 LE).
    Cts = 3,
    /// Rendezvous data fragment: `aux` = byte offset, `aux32` = unused,
    /// payload prefix of 8 bytes = receiver request id, then data.
    RndvData = 4,
    /// Synchronous-send acknowledgement: `aux` = sender request id.
    SyncAck = 5,
    /// Collective fragment: `context` = communicator context, `aux32` = collective
    /// sequence number, `tag` = schedule step, `msg_len` = total, `aux` = byte offset;
    /// the payload starts with the 8-byte signature of the call (kind, root, op, types).
    Coll = 6,
    /// Finalize on a careful link: `aux` = data frames the sender sent on the link before
    /// this one (the receiver compares it with what arrived).
    LinkCounts = 7,
    /// Cancel a rendezvous send (`MPI_Cancel`): `aux` = sender request id.
    Cancel = 8,
    /// Answer to [`MsgKind::Cancel`]: `aux` = sender request id, `aux32` = 1 when the
    /// receiver took the unmatched request-to-send out of its queue (the send is
    /// cancelled), 0 when it had matched it already (the send goes on).
    CancelAck = 9,
}

impl MsgKind {
    /// Decodes a message-kind byte.
    pub fn from_u8(b: u8) -> Option<MsgKind> {
        match b {
            0 => Some(MsgKind::None),
            1 => Some(MsgKind::Eager),
            2 => Some(MsgKind::Rts),
            3 => Some(MsgKind::Cts),
            4 => Some(MsgKind::RndvData),
            5 => Some(MsgKind::SyncAck),
            6 => Some(MsgKind::Coll),
            7 => Some(MsgKind::LinkCounts),
            8 => Some(MsgKind::Cancel),
            9 => Some(MsgKind::CancelAck),
            _ => None,
        }
    }
}

/// Why a byte slice is not a valid phalanx datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// Shorter than the fixed header.
    Truncated,
    /// Wrong magic number: not a phalanx datagram.
    BadMagic,
    /// A header version this build does not speak.
    BadVersion,
    /// Unknown protocol kind.
    BadKind,
    /// Unknown message-layer kind.
    BadMsgKind,
    /// `ext_len` runs past the end of the datagram.
    BadExtension,
}

impl core::fmt::Display for WireError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let s = match self {
            WireError::Truncated => "datagram shorter than the phalanx header",
            WireError::BadMagic => "bad magic (not a phalanx datagram)",
            WireError::BadVersion => "unsupported header version",
            WireError::BadKind => "unknown packet kind",
            WireError::BadMsgKind => "unknown message kind",
            WireError::BadExtension => "extension length past end of datagram",
        };
        f.write_str(s)
    }
}

impl std::error::Error for WireError {}

/// A zero-copy view of a validated datagram.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    buf: &'a [u8],
}

#[inline]
fn rd_u16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
#[inline]
fn rd_u32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
#[inline]
fn rd_u64(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

impl<'a> Packet<'a> {
    /// Validates `buf` as a phalanx datagram. After success no accessor panics.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, WireError> {
        if buf.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if rd_u16(buf, 0) != MAGIC {
            return Err(WireError::BadMagic);
        }
        if buf[2] != VERSION {
            return Err(WireError::BadVersion);
        }
        if Kind::from_u8(buf[3]).is_none() {
            return Err(WireError::BadKind);
        }
        if MsgKind::from_u8(buf[4]).is_none() {
            return Err(WireError::BadMsgKind);
        }
        if HEADER_LEN + rd_u16(buf, 6) as usize > buf.len() {
            return Err(WireError::BadExtension);
        }
        Ok(Packet { buf })
    }

    /// Protocol kind.
    pub fn kind(&self) -> Kind {
        // Validated in new_checked; the fallback is unreachable but never panics.
        Kind::from_u8(self.buf[3]).unwrap_or(Kind::GbnAck)
    }
    /// Message-layer kind.
    pub fn msg_kind(&self) -> MsgKind {
        MsgKind::from_u8(self.buf[4]).unwrap_or(MsgKind::None)
    }
    /// Flag bits.
    pub fn flags(&self) -> u8 {
        self.buf[5]
    }
    /// Per-job key.
    pub fn job_key(&self) -> u64 {
        rd_u64(self.buf, OFF_JOB_KEY)
    }
    /// Source rank.
    pub fn src(&self) -> u32 {
        rd_u32(self.buf, OFF_SRC)
    }
    /// Communicator context.
    pub fn context(&self) -> u32 {
        rd_u32(self.buf, 20)
    }
    /// Sequence number.
    pub fn seq(&self) -> u32 {
        rd_u32(self.buf, OFF_SEQ)
    }
    /// Cumulative acknowledgement.
    pub fn ack(&self) -> u32 {
        rd_u32(self.buf, OFF_ACK)
    }
    /// MPI tag.
    pub fn tag(&self) -> i32 {
        rd_u32(self.buf, 32) as i32
    }
    /// Message-layer 32-bit word.
    pub fn aux32(&self) -> u32 {
        rd_u32(self.buf, 36)
    }
    /// Total message length.
    pub fn msg_len(&self) -> u64 {
        rd_u64(self.buf, 40)
    }
    /// Message-layer 64-bit word.
    pub fn aux(&self) -> u64 {
        rd_u64(self.buf, 48)
    }
    /// Extension bytes.
    pub fn extension(&self) -> &'a [u8] {
        let n = rd_u16(self.buf, 6) as usize;
        &self.buf[HEADER_LEN..HEADER_LEN + n]
    }
    /// Payload after header and extensions.
    pub fn payload(&self) -> &'a [u8] {
        let n = rd_u16(self.buf, 6) as usize;
        &self.buf[HEADER_LEN + n..]
    }
    /// The whole datagram.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.buf
    }
    /// The validated header as a plain struct.
    pub fn header(&self) -> Header {
        Header {
            kind: self.kind(),
            msg: self.msg_kind(),
            flags: self.flags(),
            ext_len: rd_u16(self.buf, 6),
            job_key: self.job_key(),
            src: self.src(),
            context: self.context(),
            seq: self.seq(),
            ack: self.ack(),
            tag: self.tag(),
            aux32: self.aux32(),
            msg_len: self.msg_len(),
            aux: self.aux(),
        }
    }
}

/// The plain representation of a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Protocol kind.
    pub kind: Kind,
    /// Message-layer kind.
    pub msg: MsgKind,
    /// Flag bits.
    pub flags: u8,
    /// Extension length.
    pub ext_len: u16,
    /// Per-job key.
    pub job_key: u64,
    /// Source rank.
    pub src: u32,
    /// Communicator context.
    pub context: u32,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgement number.
    pub ack: u32,
    /// MPI tag.
    pub tag: i32,
    /// Message-layer word.
    pub aux32: u32,
    /// Total message length.
    pub msg_len: u64,
    /// Message-layer word.
    pub aux: u64,
}

impl Header {
    /// A header of `kind` from `src` in job `job_key`, all other fields zero.
    pub fn new(kind: Kind, job_key: u64, src: u32) -> Header {
        Header {
            kind,
            msg: MsgKind::None,
            flags: 0,
            ext_len: 0,
            job_key,
            src,
            context: 0,
            seq: 0,
            ack: 0,
            tag: 0,
            aux32: 0,
            msg_len: 0,
            aux: 0,
        }
    }

    /// Parses and validates the header of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Header, WireError> {
        Packet::new_checked(buf).map(|p| p.header())
    }

    /// Writes the header into the first [`HEADER_LEN`] bytes of `out`.
    ///
    /// Returns `None` (writing nothing) if `out` is shorter than the header.
    pub fn emit(&self, out: &mut [u8]) -> Option<()> {
        let out = out.get_mut(..HEADER_LEN)?;
        out[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        out[2] = VERSION;
        out[3] = self.kind as u8;
        out[4] = self.msg as u8;
        out[5] = self.flags;
        out[6..8].copy_from_slice(&self.ext_len.to_le_bytes());
        out[8..16].copy_from_slice(&self.job_key.to_le_bytes());
        out[16..20].copy_from_slice(&self.src.to_le_bytes());
        out[20..24].copy_from_slice(&self.context.to_le_bytes());
        out[24..28].copy_from_slice(&self.seq.to_le_bytes());
        out[28..32].copy_from_slice(&self.ack.to_le_bytes());
        out[32..36].copy_from_slice(&self.tag.to_le_bytes());
        out[36..40].copy_from_slice(&self.aux32.to_le_bytes());
        out[40..48].copy_from_slice(&self.msg_len.to_le_bytes());
        out[48..56].copy_from_slice(&self.aux.to_le_bytes());
        Some(())
    }

    /// Emits the header followed by `payload` into a new vector.
    pub fn to_datagram(&self, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; HEADER_LEN + payload.len()];
        // The vector is at least HEADER_LEN long, so emit cannot fail.
        let _ = self.emit(&mut v);
        v[HEADER_LEN..].copy_from_slice(payload);
        v
    }
}

/// In-place field updates on an emitted datagram, used by the reliability protocols to
/// stamp sequence and acknowledgement numbers at transmit time. Each returns `None` if
/// the buffer is too short and leaves it unchanged.
pub mod stamp {
    use super::*;

    /// Sets the sequence number.
    pub fn seq(buf: &mut [u8], seq: u32) -> Option<()> {
        buf.get_mut(OFF_SEQ..OFF_SEQ + 4)?
            .copy_from_slice(&seq.to_le_bytes());
        Some(())
    }
    /// Sets the acknowledgement number.
    pub fn ack(buf: &mut [u8], ack: u32) -> Option<()> {
        buf.get_mut(OFF_ACK..OFF_ACK + 4)?
            .copy_from_slice(&ack.to_le_bytes());
        Some(())
    }
    /// Replaces the flags byte.
    pub fn flags(buf: &mut [u8], flags: u8) -> Option<()> {
        *buf.get_mut(OFF_FLAGS)? = flags;
        Some(())
    }
}

pub mod mcast;
pub mod shown;

/// Serial-number arithmetic on wrapping u32 sequence numbers (RFC 1982 style).
pub mod serial {
    /// `a` precedes `b` (within half the number space).
    #[inline]
    pub fn lt(a: u32, b: u32) -> bool {
        (a.wrapping_sub(b) as i32) < 0
    }
    /// `a` precedes or equals `b`.
    #[inline]
    pub fn le(a: u32, b: u32) -> bool {
        a == b || lt(a, b)
    }
    /// Signed distance `b - a`.
    #[inline]
    pub fn diff(a: u32, b: u32) -> i32 {
        b.wrapping_sub(a) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            kind: Kind::GbnData,
            msg: MsgKind::Eager,
            flags: flags::SEQ_VALID | flags::ACK_VALID,
            ext_len: 0,
            job_key: 0x0123_4567_89ab_cdef,
            src: 7,
            context: 3,
            seq: u32::MAX,
            ack: 5,
            tag: -2,
            aux32: 9,
            msg_len: 1 << 40,
            aux: 77,
        }
    }

    #[test]
    fn round_trip() {
        let h = sample();
        let d = h.to_datagram(b"hello");
        let p = Packet::new_checked(&d).unwrap();
        assert_eq!(p.header(), h);
        assert_eq!(p.payload(), b"hello");
        assert_eq!(Header::parse(&d).unwrap(), h);
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(Packet::new_checked(&[]).unwrap_err(), WireError::Truncated);
        let mut d = sample().to_datagram(&[]);
        d[0] = 0;
        assert_eq!(Packet::new_checked(&d).unwrap_err(), WireError::BadMagic);
        let mut d = sample().to_datagram(&[]);
        d[2] = 99;
        assert_eq!(Packet::new_checked(&d).unwrap_err(), WireError::BadVersion);
        let mut d = sample().to_datagram(&[]);
        d[3] = 200;
        assert_eq!(Packet::new_checked(&d).unwrap_err(), WireError::BadKind);
        let mut d = sample().to_datagram(&[]);
        d[4] = 200;
        assert_eq!(Packet::new_checked(&d).unwrap_err(), WireError::BadMsgKind);
        let mut d = sample().to_datagram(&[1, 2]);
        d[6] = 3;
        assert_eq!(
            Packet::new_checked(&d).unwrap_err(),
            WireError::BadExtension
        );
    }

    #[test]
    fn extension_and_stamp() {
        let mut h = sample();
        h.ext_len = 2;
        let mut d = h.to_datagram(&[1, 2, 3]);
        stamp::seq(&mut d, 42).unwrap();
        stamp::ack(&mut d, 43).unwrap();
        let p = Packet::new_checked(&d).unwrap();
        assert_eq!(p.extension(), &[1, 2]);
        assert_eq!(p.payload(), &[3]);
        assert_eq!((p.seq(), p.ack()), (42, 43));
        assert!(stamp::seq(&mut [0u8; 3], 1).is_none());
    }

    #[test]
    fn serial_wraps() {
        assert!(serial::lt(u32::MAX, 0));
        assert!(serial::lt(5, 6));
        assert!(!serial::lt(6, 5));
        assert_eq!(serial::diff(u32::MAX, 1), 2);
    }

    #[test]
    fn every_prefix_and_byte_is_safe() {
        // Exhaustive single-byte mutation of a valid datagram never panics.
        let d = sample().to_datagram(b"payload");
        for i in 0..d.len() {
            for b in [0u8, 1, 2, 0x7f, 0xff] {
                let mut m = d.clone();
                m[i] = b;
                if let Ok(p) = Packet::new_checked(&m) {
                    let _ = (p.header(), p.payload(), p.extension());
                }
            }
            let _ = Packet::new_checked(&d[..i]);
        }
    }
}
