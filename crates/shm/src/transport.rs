//! [`ShmTransport`]: the engine-facing API over a [`ShmSegment`] (contract: crate docs).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::time::Instant;

use crate::ring::{Peek, RingRef, RxRing, TxRing};
use crate::segment::{
    ShmSegment, C_HEAD, C_PWAIT, C_TAIL, R_PID, R_PROBE_ADDR, R_PROBE_VAL, R_SLEEPING,
};
use crate::sys::{self, FdSocket, FD_MSG};

/// Frames drained from one peer per [`ShmTransport::recv`] call, at most.
const RECV_BATCH: usize = 64;

/// Which large-transfer path the pairs of this rank can use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SingleCopy {
    /// Every peer can `process_vm_readv` from this rank and this rank from every peer.
    All,
    /// Some pairs can, some cannot: ask [`ShmTransport::can_read_from`] per pair.
    Partial,
    /// No pair can (or it was disabled): use the two-copy path through the ring.
    None,
}

/// The shared-memory transport of one rank. Single owner (`&mut self`), nonblocking.
pub struct ShmTransport {
    tx: Vec<TxRing>,
    rx: Vec<RxRing>,
    /// World ranks of the peers, ascending; index = slot.
    peers: Vec<u32>,
    /// Slot of each world rank up to the largest peer (`u32::MAX`: not a peer).
    slot_of: Vec<u32>,
    /// Sleeping flag of each peer (slot order) and our own.
    peer_sleeping: Vec<*const AtomicU32>,
    my_sleeping: *const AtomicU32,
    peer_fds: Vec<OwnedFd>,
    peer_pids: Vec<i32>,
    can_read: Vec<bool>,
    can_be_read: Vec<bool>,
    efd: OwnedFd,
    /// Slot with a send that found its ring full, and the length it wanted.
    blocked: Vec<Option<usize>>,
    /// `prepare_sleep` returned true and nothing has ended the sleep yet.
    armed: bool,
    reserved: Option<(usize, usize)>,
    max_frame: usize,
    rr: usize,
    rank: u32,
    seg: ShmSegment,
}

// SAFETY: the raw pointers point into `seg`'s mapping, owned by the struct and moved with
// it; nothing is tied to the creating thread.
unsafe impl Send for ShmTransport {}

fn fnv(s: &[u8]) -> u64 {
    s.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

impl ShmTransport {
    /// Attach-or-create the segment and connect: shorthand for
    /// [`ShmSegment::attach`] + [`ShmTransport::new`].
    pub fn connect(
        name: &str,
        ranks: &[u32],
        me: u32,
        cfg: crate::ShmConfig,
    ) -> io::Result<ShmTransport> {
        ShmTransport::new(ShmSegment::attach(name, ranks, me, cfg)?)
    }

    /// Connect to every other local rank through `seg`: exchange eventfds, probe
    /// `process_vm_readv`. Collective over the local ranks (every one must call it);
    /// bounded by `ShmConfig::connect_timeout`.
    pub fn new(seg: ShmSegment) -> io::Result<ShmTransport> {
        let layout = *seg.layout();
        let (n, me) = (layout.n, seg.local_index());
        let rank = seg.rank();
        let deadline = Instant::now() + seg.config().connect_timeout;
        let nonce = seg.nonce();
        let job = fnv(seg.path().as_os_str().as_encoded_bytes()) ^ nonce;
        let tag = |i: usize| format!("phalanx-shm-{job:016x}-{i}");
        let barrier = |i: usize, what: &str| -> io::Result<()> {
            let w = seg.barrier_word(i);
            w.fetch_add(1, Ordering::AcqRel);
            let cfg = seg.config();
            if sys::wait_until(deadline, || {
                cfg.cancelled() || w.load(Ordering::Acquire) as usize >= n
            }) {
                if cfg.cancelled() {
                    return Err(cfg.cancelled_error(rank));
                }
                return Ok(());
            }
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "rank {rank}: timed out after {:?} in shared-memory connect ({what}): {} of {n} \
                     local ranks {:?} arrived",
                    seg.config().connect_timeout,
                    w.load(Ordering::Acquire),
                    seg.ranks()
                ),
            ))
        };

        let efd = sys::eventfd()?;
        let sock = FdSocket::bind(&tag(me))?;
        let probe = Box::new(nonce.rotate_left(me as u32 % 64) ^ 0x5a5a_a5a5_0f0f_f0f0);
        let blk = layout.rank_block(me);
        seg.u32_at(blk + R_PID)
            .store(std::process::id(), Ordering::Relaxed);
        seg.u64_at(blk + R_PROBE_ADDR)
            .store(&*probe as *const u64 as u64, Ordering::Relaxed);
        seg.u64_at(blk + R_PROBE_VAL)
            .store(*probe, Ordering::Relaxed);
        barrier(0, "binding eventfd sockets")?;

        // Eventfd exchange: everyone's socket is bound now. Sends never block (a peer's
        // queue holds only `net.unix.max_dgram_qlen` messages): what does not fit is
        // retried while this rank drains its own queue, so every rank count works.
        let mut msg = [0u8; FD_MSG];
        msg[..8].copy_from_slice(&nonce.to_le_bytes());
        msg[8..12].copy_from_slice(&(me as u32).to_le_bytes());
        let mut unsent: Vec<usize> = (0..n).filter(|p| *p != me).collect();
        let mut got: Vec<Option<OwnedFd>> = (0..n).map(|_| None).collect();
        let mut left = n - 1;
        while left > 0 || !unsent.is_empty() {
            let mut still = Vec::with_capacity(unsent.len());
            for peer in unsent {
                if !sock.try_send_fd(&tag(peer), &msg, efd.as_raw_fd())? {
                    still.push(peer);
                }
            }
            unsent = still;
            if seg.config().cancelled() {
                return Err(seg.config().cancelled_error(rank));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "rank {rank}: shared-memory connect: timed out after {:?} exchanging \
                         eventfds ({left} not received, {} not delivered)",
                        seg.config().connect_timeout,
                        unsent.len()
                    ),
                ));
            }
            // Wait briefly (the cancel flag is re-checked every 10 ms, and sends pending
            // on a full queue are retried every millisecond).
            let slice = if unsent.is_empty() { 10 } else { 1 };
            let until = (now + std::time::Duration::from_millis(slice)).min(deadline);
            if left == 0 {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            while left > 0 {
                let Some((m, fd)) = sock.recv_fd(until)? else {
                    break;
                };
                let from = u32::from_le_bytes([m[8], m[9], m[10], m[11]]) as usize;
                if m[..8] != nonce.to_le_bytes() || from >= n || from == me || got[from].is_some() {
                    continue; // stale or foreign message: drop it (fd closes)
                }
                got[from] = Some(fd);
                left -= 1;
                if !unsent.is_empty() {
                    break; // room may have opened at the peers: retry the sends
                }
            }
        }
        drop(sock);

        // Single-copy probe: read the peer's probe word at its published address.
        for peer in (0..n).filter(|p| *p != me) {
            let pb = layout.rank_block(peer);
            let ok = seg.config().single_copy && {
                let pid = seg.u32_at(pb + R_PID).load(Ordering::Relaxed) as i32;
                let addr = seg.u64_at(pb + R_PROBE_ADDR).load(Ordering::Relaxed) as usize;
                let want = seg.u64_at(pb + R_PROBE_VAL).load(Ordering::Relaxed);
                let mut buf = [0u8; 8];
                read_probe(pid, addr, &mut buf) && u64::from_ne_bytes(buf) == want
            };
            seg.u8_at(layout.matrix(me, peer))
                .store(ok as u8, Ordering::Relaxed);
        }
        barrier(1, "probing process_vm_readv")?;
        drop(probe); // every peer finished probing (barrier above)

        let base = seg.base();
        let ring_ref = |idx: usize| {
            let c = layout.ctrl(idx);
            // SAFETY: layout offsets are inside the mapping (Layout::new sizes it).
            unsafe {
                RingRef {
                    head: base.add(c + C_HEAD).cast(),
                    tail: base.add(c + C_TAIL).cast(),
                    pwait: base.add(c + C_PWAIT).cast(),
                    data: base.add(layout.data(idx)),
                    cap: seg.ring_cells(),
                }
            }
        };
        let others: Vec<usize> = (0..n).filter(|p| *p != me).collect();
        let tx: Vec<TxRing> = others
            .iter()
            .map(|p| TxRing::new(ring_ref(layout.ring_index(me, *p))))
            .collect();
        let rx = others
            .iter()
            .map(|p| RxRing::new(ring_ref(layout.ring_index(*p, me))))
            .collect();
        let sleeping = |p: usize| seg.u32_at(layout.rank_block(p) + R_SLEEPING) as *const AtomicU32;
        let max_frame = (layout.ring_bytes - crate::FRAME_HEADER).min(crate::ring::MAX_LEN);
        let mut peer_fds = Vec::with_capacity(n - 1);
        for p in &others {
            peer_fds.push(
                got[*p]
                    .take()
                    .expect("every peer's eventfd was received above"),
            );
        }
        let peers: Vec<u32> = others.iter().map(|p| seg.ranks()[*p]).collect();
        let mut slot_of = vec![u32::MAX; peers.last().map_or(0, |&w| w as usize + 1)];
        for (s, &w) in peers.iter().enumerate() {
            slot_of[w as usize] = s as u32;
        }
        Ok(ShmTransport {
            tx,
            rx,
            peers,
            slot_of,
            peer_sleeping: others.iter().map(|p| sleeping(*p)).collect(),
            my_sleeping: sleeping(me),
            peer_fds,
            peer_pids: others
                .iter()
                .map(|p| {
                    seg.u32_at(layout.rank_block(*p) + R_PID)
                        .load(Ordering::Relaxed) as i32
                })
                .collect(),
            can_read: others
                .iter()
                .map(|p| seg.u8_at(layout.matrix(me, *p)).load(Ordering::Relaxed) != 0)
                .collect(),
            can_be_read: others
                .iter()
                .map(|p| seg.u8_at(layout.matrix(*p, me)).load(Ordering::Relaxed) != 0)
                .collect(),
            efd,
            blocked: vec![None; n - 1],
            armed: false,
            reserved: None,
            max_frame,
            rr: 0,
            rank,
            seg,
        })
    }

    /// This rank (world numbering).
    pub fn rank(&self) -> u32 {
        self.rank
    }
    /// The other local ranks (world numbering, ascending).
    pub fn peers(&self) -> &[u32] {
        &self.peers
    }
    /// The segment (path, attach count).
    pub fn segment(&self) -> &ShmSegment {
        &self.seg
    }
    /// Largest frame [`send`](Self::send) accepts (`ring_bytes - 8`).
    pub fn max_frame(&self) -> usize {
        self.max_frame
    }
    /// This rank's eventfd: poll it for `POLLIN` after [`prepare_sleep`](Self::prepare_sleep)
    /// returned true.
    pub fn fd(&self) -> RawFd {
        self.efd.as_raw_fd()
    }

    #[inline]
    fn slot(&self, peer: u32) -> io::Result<usize> {
        match self.slot_of.get(peer as usize) {
            Some(&s) if s != u32::MAX => Ok(s as usize),
            _ => Err(self.not_a_peer(peer)),
        }
    }

    #[cold]
    fn not_a_peer(&self, peer: u32) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "rank {}: {peer} is not a shared-memory peer (peers {:?})",
                self.rank, self.peers
            ),
        )
    }

    #[cold]
    fn too_long(&self, len: usize) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "frame of {len} bytes exceeds the shared-memory maximum {}",
                self.max_frame
            ),
        )
    }

    #[inline]
    fn wake_consumer(&self, s: usize) {
        // No fence here (see the crate docs on sleeping): the consumer re-checks twice.
        // SAFETY: points into the mapping owned by `self.seg`.
        let f = unsafe { &*self.peer_sleeping[s] };
        if f.load(Ordering::Relaxed) != 0 && f.swap(0, Ordering::AcqRel) != 0 {
            sys::eventfd_signal(self.peer_fds[s].as_raw_fd());
        }
    }

    /// Can every one of `ranks` (world ranks on this segment) `process_vm_readv` from every
    /// other one? Read from the matrix in the segment, so every rank gets the same answer.
    pub fn single_copy_among(&self, ranks: &[u32]) -> bool {
        let layout = *self.seg.layout();
        let locals: Option<Vec<usize>> = ranks
            .iter()
            .map(|r| self.seg.ranks().binary_search(r).ok())
            .collect();
        let Some(locals) = locals else {
            return false;
        };
        locals.iter().all(|&a| {
            locals.iter().all(|&b| {
                a == b || self.seg.u8_at(layout.matrix(a, b)).load(Ordering::Relaxed) != 0
            })
        })
    }

    /// The segment's collective board ([`crate::Board`]), if configured. Publish through
    /// one view per rank (and its clones): a view remembers which of the rank's buffers
    /// the readers released, and a second view would not see the first one's publications.
    pub fn board(&self) -> Option<crate::Board> {
        self.seg.board()
    }

    /// Wakes those of `peers` (world ranks) that announced they are about to sleep: call
    /// after publishing something they may wait for outside the rings (the board).
    /// Unknown ranks are ignored. No fence, as for ring frames (see the crate docs on
    /// sleeping): a sleeper checks its condition again after `prepare_sleep`'s second
    /// look at the rings, and its sleep is bounded.
    pub fn wake(&self, peers: impl IntoIterator<Item = u32>) {
        for p in peers {
            let Ok(s) = self.peers.binary_search(&p) else {
                continue;
            };
            // SAFETY: points into the mapping owned by `self.seg`.
            let f = unsafe { &*self.peer_sleeping[s] };
            if f.load(Ordering::Relaxed) != 0 && f.swap(0, Ordering::AcqRel) != 0 {
                sys::eventfd_signal(self.peer_fds[s].as_raw_fd());
            }
        }
    }

    /// Copy `frame` into the ring to `peer`. `Ok(false)`: the ring is full, retry later
    /// (and keep receiving). Errors: unknown peer, frame longer than [`max_frame`](Self::max_frame).
    #[inline]
    pub fn send(&mut self, peer: u32, frame: &[u8]) -> io::Result<bool> {
        match self.reserve(peer, frame.len())? {
            None => Ok(false),
            Some(buf) => {
                buf.copy_from_slice(frame);
                self.commit(peer, frame.len())?;
                Ok(true)
            }
        }
    }

    /// Reserve `len` bytes for a frame to `peer`, to be written in place and published with
    /// [`commit`](Self::commit). `Ok(None)`: ring full. A second `reserve` without `commit`
    /// abandons the first (nothing was published).
    #[inline]
    pub fn reserve(&mut self, peer: u32, len: usize) -> io::Result<Option<&mut [u8]>> {
        let Some((s, p)) = self.begin_frame(peer, len)? else {
            self.reserved = None;
            return Ok(None);
        };
        self.reserved = Some((s, len));
        // SAFETY: `len` bytes at `p` are free cells of the ring, ours until commit; the
        // borrow of `self` keeps the mapping alive and the ring unmoved.
        Ok(Some(unsafe { std::slice::from_raw_parts_mut(p, len) }))
    }

    /// Room for a frame of `len` bytes to `peer`: its slot and where the frame goes, or
    /// `None` if the ring is full (remembered for sleeping).
    #[inline]
    fn begin_frame(&mut self, peer: u32, len: usize) -> io::Result<Option<(usize, *mut u8)>> {
        let s = self.slot(peer)?;
        if len > self.max_frame {
            return Err(self.too_long(len));
        }
        if self.armed {
            self.finish_sleep();
        }
        match self.tx[s].reserve(len) {
            None => {
                self.blocked[s] = Some(len);
                Ok(None)
            }
            Some(p) => {
                self.blocked[s] = None;
                Ok(Some((s, p)))
            }
        }
    }

    /// Whether a frame of `len` bytes for `peer` fits its ring now; when it does not, the
    /// ring is remembered as blocked (a sleep then asks the consumer for a wake-up), as
    /// after a failed send. False also for a rank that is not a peer here.
    pub fn has_room(&mut self, peer: u32, len: usize) -> bool {
        let Ok(s) = self.slot(peer) else {
            return false;
        };
        let room = self.tx[s].room_for(len.min(self.max_frame));
        self.blocked[s] = (!room).then_some(len);
        room
    }

    /// Cells of the ring to `peer` written and not yet handed back by `peer` (0: every
    /// frame sent to it was consumed and its index published). Errors: unknown peer.
    pub fn unconsumed_to(&mut self, peer: u32) -> io::Result<u64> {
        let s = self.slot(peer)?;
        Ok(self.tx[s].unconsumed())
    }

    /// Cells of the ring from `peer` that it published and this rank has not consumed
    /// yet (frames waiting for this rank). Errors: unknown peer.
    pub fn waiting_from(&self, peer: u32) -> io::Result<u64> {
        Ok(self.rx[self.slot(peer)?].waiting())
    }

    /// Writes one frame of `len` bytes for `peer`, filled by `fill`, and publishes it (and
    /// wakes `peer` if it is about to sleep): [`reserve`](Self::reserve) and
    /// [`commit`](Self::commit) in one call, for the small-message path. False if the
    /// ring is full (the send is to be retried; the ring remembers it for sleeping).
    #[inline]
    pub fn write_frame(
        &mut self,
        peer: u32,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> io::Result<bool> {
        let Some((s, p)) = self.begin_frame(peer, len)? else {
            return Ok(false);
        };
        // SAFETY: `len` bytes at `p` are free cells of the ring, ours until the commit
        // below; nothing else refers to them meanwhile.
        fill(unsafe { std::slice::from_raw_parts_mut(p, len) });
        self.tx[s].commit(len);
        self.wake_consumer(s);
        Ok(true)
    }

    /// Publish the frame reserved last for `peer`, `len` bytes long (≤ the reserved length),
    /// and wake `peer` if it announced it is about to sleep.
    #[inline]
    pub fn commit(&mut self, peer: u32, len: usize) -> io::Result<()> {
        let s = self.slot(peer)?;
        match self.reserved.take() {
            Some((rs, rlen)) if rs == s && len <= rlen => {
                self.tx[s].commit(len);
                self.wake_consumer(s);
                Ok(())
            }
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("commit of {len} bytes to rank {peer} without a matching reserve"),
            )),
        }
    }

    /// Pipelined two-copy path for a large buffer (when single copy is not available): from
    /// `data[off..]`, write as many frames as fit now, each `hdr_len` header bytes filled by
    /// `header(offset, n, hdr)` followed by `data[offset..offset + n]`, `n ≤ chunk`. Returns
    /// the new offset (`data.len()` when done); call again when it stopped short. The
    /// consumer copies chunks out while later ones are written.
    pub fn send_chunked(
        &mut self,
        peer: u32,
        data: &[u8],
        mut off: usize,
        chunk: usize,
        hdr_len: usize,
        header: &mut dyn FnMut(usize, usize, &mut [u8]),
    ) -> io::Result<usize> {
        let chunk = chunk.min(self.max_frame.saturating_sub(hdr_len));
        if chunk == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "send_chunked: no room for data",
            ));
        }
        while off < data.len() {
            let n = chunk.min(data.len() - off);
            let Some(buf) = self.reserve(peer, hdr_len + n)? else {
                break;
            };
            let (h, body) = buf.split_at_mut(hdr_len);
            header(off, n, h);
            body.copy_from_slice(&data[off..off + n]);
            self.commit(peer, hdr_len + n)?;
            off += n;
        }
        Ok(off)
    }

    fn corrupt(&self, s: usize, h: u64) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "shared-memory ring {}→{} corrupt: frame header {h:#018x} (max frame {})",
                self.peers[s], self.rank, self.max_frame
            ),
        )
    }

    /// Deliver waiting frames: for each peer in rotating order, up to 64 frames, calling
    /// `f(from, frame)`; if `f` returns false the frame stays (it is offered again next
    /// time) and that peer is skipped for this call. Returns the number of frames consumed.
    /// Per peer, frames arrive in the order sent. Publishes the consumer index (flow
    /// control) of every ring it found empty or has consumed a quarter of since the last
    /// publication, waking a producer that sleeps on a full ring.
    pub fn recv(&mut self, f: &mut dyn FnMut(u32, &[u8]) -> bool) -> io::Result<usize> {
        if self.armed {
            self.finish_sleep();
        }
        let np = self.peers.len();
        let mut total = 0;
        // Round robin over the rings, starting at `rr` (no division: it costs more than
        // a whole empty poll).
        let mut s = self.rr;
        for _ in 0..np {
            if s >= np {
                s = 0;
            }
            let mut wake = false;
            let mut got = 0;
            for _ in 0..RECV_BATCH {
                match self.rx[s].peek(self.max_frame) {
                    Peek::Empty => break,
                    Peek::Corrupt(h) => return Err(self.corrupt(s, h)),
                    Peek::Frame(p, len) => {
                        // SAFETY: published, unreleased cells of the ring: the producer does
                        // not touch them until we release; the slice does not outlive `f`.
                        let frame = unsafe { std::slice::from_raw_parts(p, len) };
                        if !f(self.peers[s], frame) {
                            break;
                        }
                        wake |= self.rx[s].release();
                        got += 1;
                    }
                }
            }
            total += got;
            // Consumed cells go back to the producer when the ring is idle (see
            // `RxRing::publish`), once a quarter of it waits (`release`), and when the
            // caller leaves the library (`publish_consumed`).
            if got == 0 {
                wake |= self.rx[s].publish();
            }
            if wake {
                sys::eventfd_signal(self.peer_fds[s].as_raw_fd());
            }
            s += 1;
        }
        self.rr += 1;
        if self.rr >= np {
            self.rr = 0;
        }
        Ok(total)
    }

    /// Hands consumed cells back to their producers now (flow control), waking a
    /// producer that sleeps on a full ring: for a consumer about to leave the library,
    /// so that a producer is not held back by cells consumed before the consumer went
    /// away to compute. Rings with fewer than a sixteenth consumed, whose producer does
    /// not wait, are left to the next poll (the store would only delay this rank's next
    /// send, which is most often the answer the producer waits for).
    pub fn publish_consumed(&mut self) {
        for s in 0..self.rx.len() {
            if self.rx[s].worth_publishing() && self.rx[s].publish() {
                sys::eventfd_signal(self.peer_fds[s].as_raw_fd());
            }
        }
    }

    /// The next frame from `peer` without consuming it (the same frame until
    /// [`release`](Self::release)).
    pub fn peek(&mut self, peer: u32) -> io::Result<Option<&[u8]>> {
        let s = self.slot(peer)?;
        if self.armed {
            self.finish_sleep();
        }
        match self.rx[s].peek(self.max_frame) {
            Peek::Empty => {
                if self.rx[s].publish() {
                    sys::eventfd_signal(self.peer_fds[s].as_raw_fd());
                }
                Ok(None)
            }
            Peek::Corrupt(h) => Err(self.corrupt(s, h)),
            // SAFETY: as in `recv`; the borrow of `self` ends before `release`.
            Peek::Frame(p, len) => Ok(Some(unsafe { std::slice::from_raw_parts(p, len) })),
        }
    }

    /// Consume the frame last returned by [`peek`](Self::peek) for `peer`.
    pub fn release(&mut self, peer: u32) -> io::Result<()> {
        let s = self.slot(peer)?;
        if self.rx[s].release() {
            sys::eventfd_signal(self.peer_fds[s].as_raw_fd());
        }
        Ok(())
    }

    /// Is any frame waiting? Loads only (no syscall, no store): cheap enough to spin on.
    /// (Measured on the 2-vCPU development VM: an x86 `pause` in the spin loop costs more
    /// than the cache-line transfer itself — 1-byte one-way latency 0.19 µs without it,
    /// 0.7 µs with `std::hint::spin_loop()` after every check.)
    #[inline]
    pub fn poll_readable(&self) -> bool {
        self.rx.iter().any(|r| r.readable())
    }

    /// Is a frame from `peer` waiting?
    pub fn readable(&self, peer: u32) -> io::Result<bool> {
        Ok(self.rx[self.slot(peer)?].readable())
    }

    /// Announce that this rank is about to sleep in `poll()` on [`fd`](Self::fd). Returns
    /// false if a frame arrived (or a full ring we sent to got room) meanwhile: then do not
    /// sleep. After true, any producer that publishes a frame to us (or a consumer that frees
    /// room in a ring whose last send failed) writes our eventfd.
    pub fn prepare_sleep(&mut self) -> bool {
        if self.armed {
            return true;
        }
        // Frames we consumed but did not publish could be what a sleeping producer waits for.
        for s in 0..self.rx.len() {
            if self.rx[s].publish() {
                sys::eventfd_signal(self.peer_fds[s].as_raw_fd());
            }
        }
        // SAFETY: points into the mapping owned by `self.seg`.
        let me = unsafe { &*self.my_sleeping };
        me.store(1, Ordering::Relaxed);
        for (s, b) in self.blocked.iter().enumerate() {
            if b.is_some() {
                self.tx[s].ring().pwait().store(1, Ordering::Relaxed);
            }
        }
        self.armed = true;
        // Dekker with producers' head store + fence + flag load (and consumers' tail store).
        fence(Ordering::SeqCst);
        let mut room = Vec::new();
        for s in 0..self.tx.len() {
            if let Some(len) = self.blocked[s] {
                if self.tx[s].room_for(len) {
                    room.push(s);
                }
            }
        }
        // The second check: a frame published just before our flag became visible to its
        // producer is visible by now.
        let mut seen = self.poll_readable();
        for _ in 0..crate::SLEEP_RECHECK {
            if seen {
                break;
            }
            seen = self.poll_readable();
        }
        if !seen && room.is_empty() {
            for s in 0..self.tx.len() {
                if let Some(len) = self.blocked[s] {
                    if self.tx[s].room_for(len) {
                        room.push(s);
                    }
                }
            }
        }
        if !room.is_empty() || seen {
            self.finish_sleep();
            // Reported once: a caller that does not retry is no longer blocked there.
            for s in room {
                self.blocked[s] = None;
            }
            return false;
        }
        true
    }

    /// End the sleep state (clear the flags, drain the eventfd). Called implicitly by
    /// `recv`, `peek`, `send` and `reserve`; harmless when not sleeping.
    pub fn finish_sleep(&mut self) {
        if !self.armed {
            return;
        }
        self.armed = false;
        // SAFETY: points into the mapping owned by `self.seg`.
        unsafe { &*self.my_sleeping }.store(0, Ordering::Relaxed);
        for (s, b) in self.blocked.iter().enumerate() {
            if b.is_some() {
                self.tx[s].ring().pwait().store(0, Ordering::Relaxed);
            }
        }
        sys::eventfd_drain(self.efd.as_raw_fd());
    }

    /// Has `peer` announced it is about to sleep? (Diagnostics and tests.)
    pub fn peer_sleeping(&self, peer: u32) -> io::Result<bool> {
        // SAFETY: points into the mapping owned by `self.seg`.
        Ok(unsafe { &*self.peer_sleeping[self.slot(peer)?] }.load(Ordering::Acquire) != 0)
    }

    /// Single-copy availability over all pairs of this rank.
    pub fn single_copy(&self) -> SingleCopy {
        let all = self.can_read.iter().chain(&self.can_be_read);
        if all.clone().all(|b| *b) {
            SingleCopy::All
        } else if all.clone().any(|b| *b) {
            SingleCopy::Partial
        } else {
            SingleCopy::None
        }
    }
    /// Can this rank [`read_remote`](crate::read_remote) from `peer`'s memory?
    pub fn can_read_from(&self, peer: u32) -> io::Result<bool> {
        Ok(self.can_read[self.slot(peer)?])
    }
    /// Can `peer` read this rank's memory (so a rendezvous sender may publish a descriptor)?
    pub fn can_be_read_by(&self, peer: u32) -> io::Result<bool> {
        Ok(self.can_be_read[self.slot(peer)?])
    }
    /// Process id of `peer` (for [`read_remote`](crate::read_remote)).
    pub fn peer_pid(&self, peer: u32) -> io::Result<i32> {
        Ok(self.peer_pids[self.slot(peer)?])
    }
}

fn read_probe(pid: i32, addr: usize, buf: &mut [u8; 8]) -> bool {
    sys::read_remote(pid, addr, buf).is_ok()
}
