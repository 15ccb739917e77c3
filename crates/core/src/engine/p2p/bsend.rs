//! Buffered mode (`MPI_Bsend`, `MPI_Ibsend`, `MPI_Buffer_attach`/`detach`) for the Rust
//! API.
//!
//! Contract: a buffered send copies the message and starts a standard send of the copy,
//! so it is complete when it returns. The copy lives on the engine's heap, not in the
//! attached buffer, but the attached buffer's capacity is accounted as MPI defines it:
//! each buffered message in flight takes its packed size plus [`BSEND_OVERHEAD`] bytes
//! until its send completes, and a message that does not fit in what is left — or a
//! buffered send with no buffer attached — is an [`Error::BufferFull`] (`MPI_ERR_BUFFER`)
//! instead of a silent success. Detaching waits until every buffered message in flight
//! has been sent (as `MPI_Buffer_detach` does).

use super::super::requests::{RawStatus, ReqId, SendBuf};
use super::super::{Engine, Waiting};
use crate::error::{Error, Result};

/// Bytes of bookkeeping each buffered message takes in the attached buffer
/// (`MPI_BSEND_OVERHEAD`).
pub const BSEND_OVERHEAD: usize = 512;

/// The attached capacity and the buffered messages in flight.
#[derive(Default)]
pub(in crate::engine) struct Bsend {
    /// Bytes attached (`None`: no buffer).
    cap: Option<usize>,
    /// Sends in flight and the bytes each holds.
    pending: Vec<(ReqId, usize)>,
}

impl Engine {
    /// Forgets the buffered sends that completed; returns the bytes still held.
    fn bsend_reap(&mut self) -> usize {
        let mut pending = std::mem::take(&mut self.p2p.bsend.pending);
        pending.retain(|&(id, _)| {
            if self.reqs.is_done(id) {
                // Nobody else asks for a buffered send's result: it was a copy.
                let _ = self.reqs.take_done(id);
                false
            } else {
                true
            }
        });
        let used = pending.iter().map(|p| p.1).sum();
        self.p2p.bsend.pending = pending;
        used
    }

    /// Attaches `size` bytes for buffered sends; an error while one is attached.
    pub fn bsend_attach(&mut self, size: usize) -> Result<()> {
        if self.p2p.bsend.cap.is_some() {
            return Err(Error::BufferFull(
                "a buffer is already attached (detach it first)".into(),
            ));
        }
        self.p2p.bsend.cap = Some(size);
        Ok(())
    }

    /// Whether every buffered message in flight has been sent (a detach waits for
    /// nothing then), and what a wait for them waits for.
    pub(crate) fn bsend_drained(&self) -> (bool, Waiting) {
        let pending = &self.p2p.bsend.pending;
        let waiting = pending
            .first()
            .map_or(Waiting::Nothing, |p| self.p2p.describe(&self.reqs, p.0));
        (pending.iter().all(|p| self.reqs.is_done(p.0)), waiting)
    }

    /// Waits until every buffered message in flight is sent, then detaches the buffer;
    /// returns its size (0 when none was attached).
    pub fn bsend_detach(&mut self) -> Result<usize> {
        let ids: Vec<ReqId> = self.p2p.bsend.pending.iter().map(|p| p.0).collect();
        if let Some(&first) = ids.first() {
            let waiting = self.p2p.describe(&self.reqs, first);
            self.wait_until(waiting, |e| ids.iter().all(|&id| e.reqs.is_done(id)))?;
        }
        self.bsend_reap();
        Ok(self.p2p.bsend.cap.take().unwrap_or(0))
    }

    /// The attached capacity (0: none).
    pub fn bsend_capacity(&self) -> usize {
        self.p2p.bsend.cap.unwrap_or(0)
    }

    /// A buffered send of `buf` to world rank `dest`: copied, accounted against the
    /// attached buffer (module docs), started; complete on return.
    pub fn bsend(&mut self, buf: SendBuf, dest: u32, tag: i32, ctx: u32) -> Result<RawStatus> {
        let len = buf.len();
        let need = len.saturating_add(BSEND_OVERHEAD);
        let Some(cap) = self.p2p.bsend.cap else {
            return Err(Error::BufferFull(format!(
                "no buffer attached for a buffered send of {len} bytes"
            )));
        };
        let used = self.bsend_reap();
        if cap.saturating_sub(used) < need {
            return Err(Error::BufferFull(format!(
                "{len} bytes (+{BSEND_OVERHEAD} overhead) do not fit: {used} of the {cap} \
                 attached bytes are in use"
            )));
        }
        let copy = match buf {
            SendBuf::Raw(..) => SendBuf::Owned(buf.slice(0, len).to_vec()),
            owned => owned,
        };
        if let Some(id) = self.start_send(copy, dest, tag, ctx, false)? {
            self.p2p.bsend.pending.push((id, need));
        }
        Ok(RawStatus {
            source: self.rank,
            tag,
            bytes: len as u64,
            cancelled: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffered_sends_honour_the_attached_capacity() {
        let mut e = Engine::init().unwrap();
        let msg = |n: usize| SendBuf::Owned(vec![7u8; n]);
        // No buffer: an error, not a silent success.
        assert!(matches!(
            e.bsend(msg(8), 0, 1, 0),
            Err(Error::BufferFull(_))
        ));
        // Room for one large message (a rendezvous: in flight until it is received).
        const BIG: usize = 1 << 20;
        e.bsend_attach(BIG + BSEND_OVERHEAD + 100).unwrap();
        assert!(e.bsend_attach(10).is_err());
        assert!(matches!(
            e.bsend(msg(BIG + 101), 0, 1, 0),
            Err(Error::BufferFull(_))
        ));
        e.bsend(msg(BIG), 0, 1, 0).unwrap();
        // The first one still holds its room: the second does not fit.
        assert!(matches!(
            e.bsend(msg(BIG), 0, 2, 0),
            Err(Error::BufferFull(_))
        ));
        let recv = |e: &mut Engine, tag: i32| {
            let mut v = vec![0u8; BIG];
            let st = e
                .recv(
                    super::super::super::requests::RecvBuf::Raw(v.as_mut_ptr(), BIG),
                    Some(0),
                    Some(tag),
                    0,
                )
                .unwrap();
            assert_eq!(st.bytes, BIG as u64);
            assert!(v.iter().all(|&b| b == 7));
        };
        recv(&mut e, 1);
        // Received (so sent): the room is free again.
        e.bsend(msg(BIG), 0, 2, 0).unwrap();
        recv(&mut e, 2);
        assert_eq!(e.bsend_detach().unwrap(), BIG + BSEND_OVERHEAD + 100);
        assert_eq!(e.bsend_capacity(), 0);
    }
}
