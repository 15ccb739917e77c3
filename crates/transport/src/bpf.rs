//! The per-rank classic BPF socket filter (seed 000 §3.2.1: drop unwanted packets in the
//! kernel, before they cost a wake-up and a copy).
//!
//! Contract:
//! * [`program`] builds a `sock_filter` program with the job key and the rank baked in as
//!   constants. On a UDP socket the filter sees the UDP header first, so phalanx payload
//!   offset `X` is packet offset `8 + X`; classic BPF loads are big-endian, so the
//!   little-endian header fields are compared against byte-swapped constants.
//! * It drops (returns 0 for) (a) datagrams shorter than the 56-byte header, with the
//!   wrong magic, or with another job's key (both 32-bit halves of the key are compared);
//!   (b) multicast-flagged datagrams whose `src` is this rank (its own looped-back
//!   multicast); (c) multicast-flagged datagrams whose target bitmap (at payload offset
//!   [`OFF_TARGETS`], bit `r` = byte `OFF_TARGETS + r/8`, mask `1 << (r % 8)`) lacks this
//!   rank, including ones too short to hold that byte. Everything else is accepted whole.
//! * Stateless only. Dropping a REQ for a packet not sent yet (seed 000 §3.2.1, case 3)
//!   needs per-peer state classic BPF has no place for; that check stays in user space.
//!   (An eBPF map could hold it; out of scope.)
//! * The kernel counts rejected datagrams in the socket's drop counter, so they show up in
//!   `SO_RXQ_OVFL` (`TransportStats::kernel_drops`) next to queue overflows.
//! * A filter applies to datagrams that arrive after it is attached; attach it before the
//!   rank publishes its endpoint.

use std::io;
use std::mem;
use std::os::fd::RawFd;

/// Length of the fixed phalanx header (`phalanx_wire::HEADER_LEN`).
pub const HEADER_LEN: u32 = 56;
/// Payload offset of the flags byte (`phalanx_wire::OFF_FLAGS`).
pub const OFF_FLAGS: u32 = 5;
/// Payload offset of the job key, u64 LE (`phalanx_wire::OFF_JOB_KEY`).
pub const OFF_JOB_KEY: u32 = 8;
/// Payload offset of the source rank, u32 LE (`phalanx_wire::OFF_SRC`).
pub const OFF_SRC: u32 = 16;
/// Payload offset of a multicast packet's target bitmap (right after the fixed header).
pub const OFF_TARGETS: u32 = 56;
/// The multicast flag bit (`phalanx_wire::flags::MULTICAST`).
pub const FLAG_MULTICAST: u8 = 1 << 4;
/// The magic bytes at payload offset 0 (`phalanx_wire::MAGIC`, "PX").
pub const MAGIC_BYTES: [u8; 2] = *b"PX";
/// Bytes of UDP header in front of the payload, as a socket filter sees the packet.
const UDP_HDR: u32 = 8;
/// `SO_ATTACH_FILTER` (asm-generic value; not exported by libc for every target).
const SO_ATTACH_FILTER: libc::c_int = 26;

// Classic BPF opcodes (linux/filter.h).
const LD_W_ABS: u16 = 0x20;
const LD_H_ABS: u16 = 0x28;
const LD_B_ABS: u16 = 0x30;
const LD_W_LEN: u16 = 0x80;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;

/// Jump targets of the program (resolved to relative offsets by [`program`]).
#[derive(Clone, Copy)]
enum To {
    Next,
    Accept,
    Drop,
}

/// The filter for `rank` of the job `job_key` (see the module docs).
pub fn program(job_key: u64, rank: u32) -> Vec<libc::sock_filter> {
    let key = job_key.to_le_bytes();
    let key_lo = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
    let key_hi = u32::from_be_bytes([key[4], key[5], key[6], key[7]]);
    let rank_be = u32::from_be_bytes(rank.to_le_bytes());
    let magic = u32::from(u16::from_be_bytes(MAGIC_BYTES));
    let bitmap_byte = UDP_HDR + OFF_TARGETS + rank / 8;
    let mask = 1u32 << (rank % 8);
    // (code, k, jump-if-true, jump-if-false); ACCEPT and DROP are the last two.
    let body: [(u16, u32, To, To); 14] = [
        (LD_W_LEN, 0, To::Next, To::Next),
        (JGE_K, UDP_HDR + HEADER_LEN, To::Next, To::Drop),
        (LD_H_ABS, UDP_HDR, To::Next, To::Next),
        (JEQ_K, magic, To::Next, To::Drop),
        (LD_W_ABS, UDP_HDR + OFF_JOB_KEY, To::Next, To::Next),
        (JEQ_K, key_lo, To::Next, To::Drop),
        (LD_W_ABS, UDP_HDR + OFF_JOB_KEY + 4, To::Next, To::Next),
        (JEQ_K, key_hi, To::Next, To::Drop),
        (LD_B_ABS, UDP_HDR + OFF_FLAGS, To::Next, To::Next),
        (JSET_K, u32::from(FLAG_MULTICAST), To::Next, To::Accept),
        (LD_W_ABS, UDP_HDR + OFF_SRC, To::Next, To::Next),
        (JEQ_K, rank_be, To::Drop, To::Next),
        (LD_B_ABS, bitmap_byte, To::Next, To::Next),
        (JSET_K, mask, To::Accept, To::Drop),
    ];
    let accept = body.len();
    let drop = accept + 1;
    let rel = |pc: usize, to: To| -> u8 {
        let target = match to {
            To::Next => pc + 1,
            To::Accept => accept,
            To::Drop => drop,
        };
        // The program is 16 instructions long: every forward offset fits in a u8.
        (target - pc - 1) as u8
    };
    let mut prog: Vec<libc::sock_filter> = body
        .iter()
        .enumerate()
        .map(|(pc, &(code, k, t, f))| libc::sock_filter {
            code,
            jt: rel(pc, t),
            jf: rel(pc, f),
            k,
        })
        .collect();
    for k in [u32::MAX, 0] {
        prog.push(libc::sock_filter {
            code: RET_K,
            jt: 0,
            jf: 0,
            k,
        });
    }
    prog
}

/// Attaches `prog` to the socket `fd` (`SO_ATTACH_FILTER`), replacing any earlier filter.
pub(crate) fn attach(fd: RawFd, prog: &[libc::sock_filter]) -> io::Result<()> {
    let fprog = libc::sock_fprog {
        len: prog.len() as libc::c_ushort,
        // The kernel copies the program and never writes through this pointer.
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points at `prog.len()` valid sock_filter entries that outlive the
    // call; the kernel copies them and does not keep the pointer.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_ATTACH_FILTER,
            (&fprog as *const libc::sock_fprog).cast(),
            mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A user-space interpreter for the subset of classic BPF [`program`] emits: what the
/// kernel would return for `packet` (UDP header included). Out-of-range loads end the
/// program with 0, like the kernel does. For tests and diagnostics.
pub fn run(prog: &[libc::sock_filter], packet: &[u8]) -> u32 {
    let load = |off: u32, n: usize| -> Option<u32> {
        let off = off as usize;
        let b = packet.get(off..off.checked_add(n)?)?;
        Some(b.iter().fold(0u32, |a, &x| (a << 8) | u32::from(x)))
    };
    let mut acc: u32 = 0;
    let mut pc = 0usize;
    while let Some(ins) = prog.get(pc) {
        pc += 1;
        let jump = |cond: bool| usize::from(if cond { ins.jt } else { ins.jf });
        match ins.code {
            LD_W_LEN => acc = packet.len() as u32,
            LD_W_ABS | LD_H_ABS | LD_B_ABS => {
                let n = match ins.code {
                    LD_W_ABS => 4,
                    LD_H_ABS => 2,
                    _ => 1,
                };
                match load(ins.k, n) {
                    Some(v) => acc = v,
                    None => return 0,
                }
            }
            JEQ_K => pc += jump(acc == ins.k),
            JGE_K => pc += jump(acc >= ins.k),
            JSET_K => pc += jump(acc & ins.k != 0),
            RET_K => return ins.k,
            _ => return 0,
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: u64 = 0x1122_3344_5566_7788;

    /// A phalanx-looking UDP packet (8 zero bytes of UDP header, then the payload).
    fn packet(key: u64, src: u32, mcast: Option<&[u32]>, size: u32) -> Vec<u8> {
        let mut p = vec![0u8; 8 + HEADER_LEN as usize];
        p[8..10].copy_from_slice(&MAGIC_BYTES);
        p[8 + 8..8 + 16].copy_from_slice(&key.to_le_bytes());
        p[8 + 16..8 + 20].copy_from_slice(&src.to_le_bytes());
        if let Some(targets) = mcast {
            p[8 + 5] |= FLAG_MULTICAST;
            let mut bitmap = vec![0u8; size.div_ceil(8) as usize];
            for &t in targets {
                bitmap[(t / 8) as usize] |= 1 << (t % 8);
            }
            p.extend_from_slice(&bitmap);
            p.extend_from_slice(&[0xee; 16]); // per-target counters etc.
        }
        p
    }

    #[test]
    fn accepts_and_drops() {
        for rank in [0u32, 1, 7, 8, 13, 300] {
            let prog = program(KEY, rank);
            let other = if rank == 0 { 1 } else { 0 };
            let ok = |p: &[u8]| run(&prog, p) != 0;
            // Unicast of this job: accepted whatever the src.
            assert!(ok(&packet(KEY, other, None, 0)));
            assert!(ok(&packet(KEY, rank, None, 0)));
            // (a) short, bad magic, other key (either half).
            let good = packet(KEY, other, None, 0);
            assert!(!ok(&good[..good.len() - 1]));
            let mut bad = good.clone();
            bad[8] = b'Q';
            assert!(!ok(&bad));
            assert!(!ok(&packet(KEY ^ 1, other, None, 0)));
            assert!(!ok(&packet(KEY ^ (1 << 40), other, None, 0)));
            // (b) own multicast.
            assert!(!ok(&packet(KEY, rank, Some(&[rank, other]), 400)));
            // (c) bitmap with / without this rank.
            assert!(ok(&packet(KEY, other, Some(&[rank]), 400)));
            let mut all_but: Vec<u32> = (0..400).filter(|&r| r != rank).collect();
            assert!(!ok(&packet(KEY, other, Some(&all_but), 400)));
            all_but.push(rank);
            assert!(ok(&packet(KEY, other, Some(&all_but), 400)));
            // A bitmap too short to hold this rank's byte.
            let tiny = packet(KEY, other, Some(&[0]), 1);
            let short = &tiny[..8 + HEADER_LEN as usize + 1];
            assert_eq!(ok(short), rank == 0 && other != 0);
        }
    }

    #[test]
    fn jumps_stay_inside() {
        let prog = program(KEY, 5);
        assert_eq!(prog.len(), 16);
        for (pc, ins) in prog.iter().enumerate() {
            assert!(pc + 1 + usize::from(ins.jt.max(ins.jf)) < prog.len() || ins.code == RET_K);
        }
    }
}
