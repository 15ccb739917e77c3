//! The shared segment: creation, attach/unlink protocol and layout.
//!
//! Contract: after [`ShmSegment::create`] or [`ShmSegment::open`] returns, the mapping is
//! `total_bytes` long, fully backed (`posix_fallocate`), its header has been validated
//! against the caller's view of the job, and every offset handed out by the layout
//! accessors lies inside the mapping with the alignment of the word it names. See the
//! crate docs for the attach protocol.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memmap2::{MmapOptions, MmapRaw};

use crate::CELL;

const MAGIC: u64 = u64::from_le_bytes(*b"phxshm01");
/// Words that different ranks write are kept this far apart (two 64-byte lines: the
/// adjacent-line prefetcher moves lines in 128-byte pairs).
pub(crate) const LINE: usize = 128;
pub(crate) const PAGE: usize = 4096;
/// Ring sizes: powers of two from `MIN_RING` to `MAX_RING` bytes.
pub(crate) const MIN_RING: usize = 1024;
pub(crate) const MAX_RING: usize = 1 << 30;
/// Largest board buffer (a multiple of [`PAGE`]).
pub(crate) const MAX_BOARD: usize = 64 << 20;
/// Upper bound on local ranks (the capability matrix and rank table live in the header).
pub const MAX_LOCAL_RANKS: usize = 1024;

/// Smallest ring size [`ShmConfig::ring_bytes_for`] shrinks to under `rings_budget`.
pub const MIN_AUTO_RING: usize = 16 << 10;

// Global header words (byte offsets).
const H_MAGIC: usize = 0;
const H_VERSION: usize = 8;
const H_NRANKS: usize = 12;
const H_RING_BYTES: usize = 16;
const H_TOTAL: usize = 24;
const H_NONCE: usize = 32;
const H_CREATOR_PID: usize = 40;
const H_BOARD_BYTES: usize = 48;
const H_ATTACHED: usize = LINE;
/// Barrier counters used by the transport's connect phases.
pub(crate) const H_BARRIER: usize = 2 * LINE;
pub(crate) const BARRIERS: usize = 4;
const H_RANKS: usize = 3 * LINE;

// Per-rank block: line 0 = sleeping flag (written by its owner, read by every producer),
// line 1 = identity words written once at connect.
const RANK_BLOCK: usize = 2 * LINE;
pub(crate) const R_SLEEPING: usize = 0;
pub(crate) const R_PID: usize = LINE;
pub(crate) const R_PROBE_ADDR: usize = LINE + 8;
pub(crate) const R_PROBE_VAL: usize = LINE + 16;

// Per-ring control block: head line, tail line, producer-waiting line.
pub(crate) const CTRL_BLOCK: usize = 3 * LINE;
pub(crate) const C_HEAD: usize = 0;
pub(crate) const C_TAIL: usize = LINE;
pub(crate) const C_PWAIT: usize = 2 * LINE;

/// Configuration shared by all local ranks of a job (they must agree; the opener checks).
#[derive(Clone, Debug)]
pub struct ShmConfig {
    /// Bytes per ring (one ring per ordered pair of local ranks): a power of two from
    /// 1 KiB to 1 GiB. Default 256 KiB. The segment holds `n·(n-1)` rings; see `rings_budget`.
    pub ring_bytes: usize,
    /// Most bytes all `n·(n-1)` rings of a segment may take together: while they would
    /// take more, the ring size is halved, down to [`MIN_AUTO_RING`] (so 64 local ranks
    /// map 256 MiB of rings, not 1 GiB). Default 256 MiB; `usize::MAX` (what an explicit
    /// `PHALANX_SHM_RING` sets) keeps `ring_bytes` as given. Every rank computes the same
    /// size from the same `n`.
    pub rings_budget: usize,
    /// Where the user's private directory of segment files is made ([`private_dir`]).
    /// Default `/dev/shm`.
    pub dir: PathBuf,
    /// Bound on every wait during create/open/connect. Default 30 s; from the
    /// environment more than 0 and at most one day.
    pub connect_timeout: Duration,
    /// Probe and use `process_vm_readv`; `false` forces the two-copy fallback. Default true.
    pub single_copy: bool,
    /// Refuse segments larger than this (simulates a small `/dev/shm`; `None` = no limit
    /// beyond the filesystem's own).
    pub size_limit: Option<u64>,
    /// Bytes of each of a rank's two collective board buffers ([`crate::Board`]): a
    /// multiple of 4 KiB, at most 64 MiB; 0 disables the board. Default 256 KiB.
    pub board_bytes: usize,
    /// Set by another thread to end every wait of create/open/connect at once with
    /// [`io::ErrorKind::Interrupted`] (the launcher decided this host does without shared
    /// memory, so waiting for the other local ranks is pointless). Default: none.
    pub cancel: Option<Arc<AtomicBool>>,
}

impl Default for ShmConfig {
    fn default() -> Self {
        ShmConfig {
            ring_bytes: 256 << 10,
            rings_budget: 256 << 20,
            dir: PathBuf::from("/dev/shm"),
            connect_timeout: Duration::from_secs(30),
            single_copy: true,
            size_limit: None,
            board_bytes: 256 << 10,
            cancel: None,
        }
    }
}

impl ShmConfig {
    /// Whether [`ShmConfig::cancel`] has been set.
    pub fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Acquire))
    }

    /// The error every wait ends with once [`ShmConfig::cancel`] is set.
    pub(crate) fn cancelled_error(&self, me: u32) -> io::Error {
        io::Error::new(
            io::ErrorKind::Interrupted,
            format!(
                "rank {me}: shared-memory connect abandoned (the launcher chose UDP for this host)"
            ),
        )
    }

    /// The ring size a segment of `n` local ranks uses: `ring_bytes`, halved while the
    /// `n·(n-1)` rings exceed `rings_budget`, but never below [`MIN_AUTO_RING`] (nor
    /// raised above `ring_bytes`).
    pub fn ring_bytes_for(&self, n: usize) -> usize {
        let rings = n.saturating_mul(n.saturating_sub(1)).max(1);
        let mut b = self.ring_bytes;
        while b > MIN_AUTO_RING && b.saturating_mul(rings) > self.rings_budget {
            b /= 2;
        }
        b
    }
}

/// Byte layout of a segment, computed identically by every rank from (n, ring_bytes).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    pub n: usize,
    pub ring_bytes: usize,
    pub rank_base: usize,
    pub matrix_base: usize,
    pub ctrl_base: usize,
    pub data_base: usize,
    /// Collective board: per local rank [`BOARD_HDR`] bytes of header lines, then (page
    /// aligned) per local rank two buffers of `board_bytes` data each.
    pub board_hdr_base: usize,
    pub board_data_base: usize,
    pub board_bytes: usize,
    pub total: usize,
}

/// Header lines of one board slot (see [`crate::board`]).
pub(crate) const BOARD_HDR: usize = 6 * LINE;

impl Layout {
    fn new(n: usize, ring_bytes: usize, board_bytes: usize) -> Layout {
        let round = |x: usize, a: usize| x.div_ceil(a) * a;
        let rank_base = round(H_RANKS + 4 * n, LINE);
        let matrix_base = rank_base + n * RANK_BLOCK;
        let ctrl_base = round(matrix_base + n * n, LINE);
        let rings = n * n.saturating_sub(1);
        let data_base = round(ctrl_base + rings * CTRL_BLOCK, PAGE);
        let board_hdr_base = data_base + rings * ring_bytes;
        let board_data_base = round(board_hdr_base + n * BOARD_HDR, PAGE);
        let total = board_data_base + n * 2 * board_bytes;
        Layout {
            n,
            ring_bytes,
            rank_base,
            matrix_base,
            ctrl_base,
            data_base,
            board_hdr_base,
            board_data_base,
            board_bytes,
            total: total.max(PAGE),
        }
    }

    /// Index of the ring carrying frames from local rank `from` to local rank `to`.
    pub fn ring_index(&self, from: usize, to: usize) -> usize {
        debug_assert!(from != to && from < self.n && to < self.n);
        from * (self.n - 1) + if to < from { to } else { to - 1 }
    }
    pub fn rank_block(&self, local: usize) -> usize {
        self.rank_base + local * RANK_BLOCK
    }
    /// Byte that is 1 when `reader` can `process_vm_readv` from `owner`.
    pub fn matrix(&self, reader: usize, owner: usize) -> usize {
        self.matrix_base + reader * self.n + owner
    }
    pub fn ctrl(&self, ring: usize) -> usize {
        self.ctrl_base + ring * CTRL_BLOCK
    }
    pub fn data(&self, ring: usize) -> usize {
        self.data_base + ring * self.ring_bytes
    }
    #[cfg(test)]
    pub fn board_hdr(&self, local: usize) -> usize {
        self.board_hdr_base + local * BOARD_HDR
    }
    #[cfg(test)]
    pub fn board_data(&self, local: usize) -> usize {
        self.board_data_base + local * 2 * self.board_bytes
    }
}

/// A mapped segment (see the crate docs for the attach protocol).
pub struct ShmSegment {
    map: std::sync::Arc<MmapRaw>,
    path: PathBuf,
    layout: Layout,
    ranks: Vec<u32>,
    me: usize,
    creator: bool,
    cfg: ShmConfig,
    _file: File,
}

// SAFETY: the mapping is plain shared memory; every shared word is accessed through
// atomics, and `ShmSegment` hands out no references tied to a thread.
unsafe impl Send for ShmSegment {}

fn check_args(
    name: &str,
    ranks: &[u32],
    me: u32,
    cfg: &ShmConfig,
) -> io::Result<(Vec<u32>, usize)> {
    let bad = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
    if name.is_empty() || name.contains('/') || name.len() > 200 {
        return Err(bad(format!(
            "shm segment name {name:?}: must be 1..=200 bytes without '/'"
        )));
    }
    if !cfg.ring_bytes.is_power_of_two() || cfg.ring_bytes < MIN_RING || cfg.ring_bytes > MAX_RING {
        return Err(bad(format!(
            "shm ring size {} bytes: must be a power of two between 1 KiB and 1 GiB",
            cfg.ring_bytes
        )));
    }
    if !cfg.board_bytes.is_multiple_of(PAGE) || cfg.board_bytes > MAX_BOARD {
        return Err(bad(format!(
            "shm board size {} bytes: must be a multiple of 4 KiB, at most 64 MiB",
            cfg.board_bytes
        )));
    }
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != ranks.len() || sorted.is_empty() || sorted.len() > MAX_LOCAL_RANKS {
        return Err(bad(format!(
            "shm local ranks {ranks:?}: must be 1..={MAX_LOCAL_RANKS} distinct ranks"
        )));
    }
    let Ok(idx) = sorted.binary_search(&me) else {
        return Err(bad(format!(
            "rank {me} is not among the local ranks {ranks:?}"
        )));
    };
    Ok((sorted, idx))
}

fn free_bytes(dir: &Path) -> Option<u64> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: statvfs writes only into the zeroed struct we pass; `c` is NUL-terminated.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut st) != 0 {
            return None;
        }
        Some(st.f_bavail as u64 * st.f_frsize as u64)
    }
}

fn too_small(path: &Path, total: usize, dir: &Path, why: &str) -> io::Error {
    let free = match free_bytes(dir) {
        Some(f) => format!("{} MiB free", f >> 20),
        None => "free space unknown".into(),
    };
    io::Error::new(
        io::ErrorKind::StorageFull,
        format!(
            "cannot size shared-memory segment {} to {} bytes ({} MiB): {why}; {} has {free}. \
             Enlarge it (e.g. `mount -o remount,size=… {}`, `docker run --shm-size=…`) or \
             lower PHALANX_SHM_RING",
            path.display(),
            total,
            total >> 20,
            dir.display(),
            dir.display()
        ),
    )
}

fn nonce() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let x = t ^ (u64::from(std::process::id()) << 32) ^ 0x9e37_79b9_7f4a_7c15;
    // splitmix64 finaliser
    let x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (x ^ (x >> 31)) | 1
}

impl ShmSegment {
    /// Create the segment `cfg.dir/name` as the lowest of `ranks` (world numbering).
    ///
    /// Fails with [`io::ErrorKind::StorageFull`] and a message naming the size and the free
    /// space when the filesystem (or `cfg.size_limit`) cannot hold it, and with
    /// `AlreadyExists` if a segment of that name exists (names must be unique per job).
    pub fn create(name: &str, ranks: &[u32], cfg: ShmConfig) -> io::Result<ShmSegment> {
        let me = ranks.iter().copied().min().unwrap_or(0);
        let (ranks, idx) = check_args(name, ranks, me, &cfg)?;
        let layout = Layout::new(
            ranks.len(),
            cfg.ring_bytes_for(ranks.len()),
            cfg.board_bytes,
        );
        let dir = private_dir(&cfg.dir)?;
        let path = dir.join(name);
        sweep_stale(&dir, name);
        if let Some(limit) = cfg.size_limit {
            if layout.total as u64 > limit {
                return Err(too_small(
                    &path,
                    layout.total,
                    &cfg.dir,
                    &format!("exceeds the size limit of {limit} bytes"),
                ));
            }
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("create {}: {e}", path.display())))?;
        // From here on, failures must remove the file.
        let fail = |e: io::Error| {
            let _ = std::fs::remove_file(&path);
            e
        };
        // SAFETY: plain syscall on a valid fd we own.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, layout.total as libc::off_t) };
        if rc != 0 {
            let e = io::Error::from_raw_os_error(rc);
            return Err(fail(too_small(
                &path,
                layout.total,
                &cfg.dir,
                &format!("posix_fallocate: {e}"),
            )));
        }
        let map = MmapOptions::new()
            .len(layout.total)
            .map_raw(&file)
            .map_err(|e| {
                fail(io::Error::new(
                    e.kind(),
                    format!("mmap {}: {e}", path.display()),
                ))
            })?;
        let seg = ShmSegment {
            map: std::sync::Arc::new(map),
            path,
            layout,
            ranks,
            me: idx,
            creator: true,
            cfg,
            _file: file,
        };
        // The file is fresh (zero-filled): only non-zero words need writing.
        seg.u32_at(H_VERSION).store(1, Ordering::Relaxed);
        seg.u32_at(H_NRANKS)
            .store(layout.n as u32, Ordering::Relaxed);
        seg.u64_at(H_RING_BYTES)
            .store(layout.ring_bytes as u64, Ordering::Relaxed);
        seg.u64_at(H_TOTAL)
            .store(layout.total as u64, Ordering::Relaxed);
        seg.u64_at(H_BOARD_BYTES)
            .store(layout.board_bytes as u64, Ordering::Relaxed);
        seg.u64_at(H_NONCE).store(nonce(), Ordering::Relaxed);
        seg.u32_at(H_CREATOR_PID)
            .store(std::process::id(), Ordering::Relaxed);
        for (i, r) in seg.ranks.iter().enumerate() {
            seg.u32_at(H_RANKS + 4 * i).store(*r, Ordering::Relaxed);
        }
        seg.u32_at(H_ATTACHED).store(1, Ordering::Relaxed);
        seg.u64_at(H_MAGIC).store(MAGIC, Ordering::Release);
        if layout.n == 1 {
            seg.unlink();
        }
        Ok(seg)
    }

    /// Open the segment created by the lowest local rank, as rank `me`, waiting for it
    /// (bounded by `cfg.connect_timeout`). The last rank to attach unlinks the file.
    pub fn open(name: &str, ranks: &[u32], me: u32, cfg: ShmConfig) -> io::Result<ShmSegment> {
        let (ranks, idx) = check_args(name, ranks, me, &cfg)?;
        let layout = Layout::new(
            ranks.len(),
            cfg.ring_bytes_for(ranks.len()),
            cfg.board_bytes,
        );
        let path = private_dir(&cfg.dir)?.join(name);
        let deadline = Instant::now() + cfg.connect_timeout;
        let (waited, shown, lowest) = (cfg.connect_timeout, path.display().to_string(), ranks[0]);
        let timeout = |what: &str| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "rank {me}: timed out after {waited:?} waiting for shared-memory segment \
                     {shown} {what} (is the lowest local rank {lowest} alive?)"
                ),
            )
        };
        let file = loop {
            match OpenOptions::new().read(true).write(true).open(&path) {
                Ok(f) => {
                    let len = f.metadata()?.len();
                    if len == layout.total as u64 {
                        break f;
                    }
                    if len != 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!(
                                "shared-memory segment {} is {len} bytes, rank {me} expects {} \
                                 (ranks or PHALANX_SHM_RING differ between ranks?)",
                                path.display(),
                                layout.total
                            ),
                        ));
                    }
                }
                // The directory itself missing: the creator cannot have made it either.
                Err(e) if e.kind() == io::ErrorKind::NotFound && !cfg.dir.is_dir() => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!(
                            "open {}: the directory {} does not exist",
                            path.display(),
                            cfg.dir.display()
                        ),
                    ))
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("open {}: {e}", path.display()),
                    ))
                }
            }
            if cfg.cancelled() {
                return Err(cfg.cancelled_error(me));
            }
            if Instant::now() > deadline {
                return Err(timeout("to appear"));
            }
            std::thread::sleep(Duration::from_micros(500));
        };
        let map = MmapOptions::new().len(layout.total).map_raw(&file)?;
        let seg = ShmSegment {
            map: std::sync::Arc::new(map),
            path,
            layout,
            ranks,
            me: idx,
            creator: false,
            cfg,
            _file: file,
        };
        while seg.u64_at(H_MAGIC).load(Ordering::Acquire) != MAGIC {
            if seg.cfg.cancelled() {
                return Err(seg.cfg.cancelled_error(me));
            }
            if Instant::now() > deadline {
                return Err(timeout("to be initialised"));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let n_ok = seg.u32_at(H_NRANKS).load(Ordering::Relaxed) as usize == layout.n;
        let ring_ok = seg.u64_at(H_RING_BYTES).load(Ordering::Relaxed) == layout.ring_bytes as u64
            && seg.u64_at(H_BOARD_BYTES).load(Ordering::Relaxed) == layout.board_bytes as u64;
        let ranks_ok = seg
            .ranks
            .iter()
            .enumerate()
            .all(|(i, r)| seg.u32_at(H_RANKS + 4 * i).load(Ordering::Relaxed) == *r);
        if !(n_ok && ring_ok && ranks_ok) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "shared-memory segment {}: header disagrees with rank {me}'s view \
                     (ranks {:?}, ring {} bytes, board {} bytes)",
                    seg.path.display(),
                    seg.ranks,
                    layout.ring_bytes,
                    layout.board_bytes
                ),
            ));
        }
        let before = seg.u32_at(H_ATTACHED).fetch_add(1, Ordering::AcqRel);
        if before as usize + 1 == layout.n {
            seg.unlink();
        }
        Ok(seg)
    }

    /// Create (if `me` is the lowest of `ranks`) or open the segment.
    pub fn attach(name: &str, ranks: &[u32], me: u32, cfg: ShmConfig) -> io::Result<ShmSegment> {
        if ranks.iter().all(|r| *r >= me) {
            ShmSegment::create(name, ranks, cfg)
        } else {
            ShmSegment::open(name, ranks, me, cfg)
        }
    }

    /// Locks this rank's mapping of the segment in memory (`mlock`), or unlocks it:
    /// the running job's communication buffers stay resident, a switched-out job's may
    /// be paged (the job manager's buffer switch). Fails where locking is not permitted
    /// (`RLIMIT_MEMLOCK`).
    pub fn lock(&self, on: bool) -> io::Result<()> {
        if on {
            self.map.lock()
        } else {
            self.map.unlock()
        }
    }

    fn unlink(&self) {
        // ENOENT is fine: someone (the creator's drop) already did.
        let _ = std::fs::remove_file(&self.path);
    }

    /// Path of the segment file (gone once every rank attached).
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Local ranks in world numbering, ascending.
    pub fn ranks(&self) -> &[u32] {
        &self.ranks
    }
    /// This rank (world numbering).
    pub fn rank(&self) -> u32 {
        self.ranks[self.me]
    }
    /// Number of local ranks that have mapped the segment so far.
    pub fn attached(&self) -> usize {
        self.u32_at(H_ATTACHED).load(Ordering::Acquire) as usize
    }
    /// Size of the mapping in bytes.
    pub fn len(&self) -> usize {
        self.layout.total
    }
    /// Never true (a segment has at least its header); for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        false
    }

    pub(crate) fn local_index(&self) -> usize {
        self.me
    }
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }
    pub(crate) fn config(&self) -> &ShmConfig {
        &self.cfg
    }
    pub(crate) fn nonce(&self) -> u64 {
        self.u64_at(H_NONCE).load(Ordering::Relaxed)
    }
    pub(crate) fn barrier_word(&self, i: usize) -> &AtomicU32 {
        assert!(i < BARRIERS);
        self.u32_at(H_BARRIER + 4 * i)
    }

    /// Base pointer of the mapping.
    /// The collective board of this segment, if it has one.
    pub(crate) fn board(&self) -> Option<crate::Board> {
        let l = &self.layout;
        (l.board_bytes > 0).then(|| {
            crate::Board::new(
                self.map.clone(),
                self.ranks.clone().into(),
                l.board_hdr_base,
                l.board_data_base,
                BOARD_HDR,
                l.board_bytes,
                self.me,
            )
        })
    }

    pub(crate) fn base(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    /// The 4-byte word at `off`.
    pub(crate) fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(off & 3 == 0 && off + 4 <= self.layout.total);
        // SAFETY: in bounds and aligned (asserted; the mapping is page aligned); the
        // mapping lives as long as `self`; shared words are only accessed atomically.
        unsafe { &*(self.base().add(off) as *const AtomicU32) }
    }

    /// The 8-byte word at `off`.
    pub(crate) fn u64_at(&self, off: usize) -> &AtomicU64 {
        assert!(off & 7 == 0 && off + 8 <= self.layout.total);
        // SAFETY: as for `u32_at`.
        unsafe { &*(self.base().add(off) as *const AtomicU64) }
    }

    /// The byte at `off` (capability matrix).
    pub(crate) fn u8_at(&self, off: usize) -> &std::sync::atomic::AtomicU8 {
        assert!(off < self.layout.total);
        // SAFETY: as for `u32_at` (no alignment needed).
        unsafe { &*(self.base().add(off) as *const std::sync::atomic::AtomicU8) }
    }

    /// Bytes per cell sanity: the data area of every ring is page aligned, hence cell aligned.
    pub(crate) fn ring_cells(&self) -> u64 {
        (self.layout.ring_bytes / CELL) as u64
    }
}

impl Drop for ShmSegment {
    fn drop(&mut self) {
        if self.creator && self.attached() < self.layout.n {
            self.unlink();
        }
    }
}

/// How old a segment file without a live creator must be before [`sweep_stale`] takes it.
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// The user's private directory for segment files under `base`: `base/phalanx-<uid>`,
/// made with mode 0700 if missing. Refused (`PermissionDenied`) unless it is a
/// directory — not a link — owned by this user, with no access for anyone else: another
/// user can neither read a segment, nor squat on its name, nor plant a link. `base`
/// itself missing is `NotFound`, naming it.
pub fn private_dir(base: &Path) -> io::Result<PathBuf> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let dir = base.join(format!("phalanx-{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(io::Error::new(
                e.kind(),
                format!("the directory {} does not exist", base.display()),
            ))
        }
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("create {}: {e}", dir.display()),
            ))
        }
    }
    let m = std::fs::symlink_metadata(&dir)?;
    if !m.file_type().is_dir() || m.uid() != uid || m.mode() & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a private directory of user {uid} (a directory it owns, mode \
                 0700): no shared memory there",
                dir.display()
            ),
        ));
    }
    Ok(dir)
}

/// Removes the segment files in `dir` whose creator is dead: a job killed (by SIGKILL, a
/// node that went down) before every rank attached leaves its file behind, and nobody
/// else would remove it. A file is taken only when it has this crate's name prefix (the
/// part of `name` up to its first `-`, plus `-`), a complete header (magic), a creator
/// pid that no longer exists, and is older than [`STALE_AFTER`]; at most 1024 entries
/// are looked at per call. Returns how many files were removed.
pub fn sweep_stale(dir: &Path, name: &str) -> usize {
    let prefix = match name.split_once('-') {
        Some((p, _)) if !p.is_empty() => format!("{p}-"),
        _ => return 0,
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten().take(1024) {
        let file_name = entry.file_name();
        if !file_name.to_string_lossy().starts_with(&prefix) {
            continue;
        }
        // Regular files only (a FIFO would block the open), not followed through links.
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > STALE_AFTER);
        if old && creator_dead(&path) && std::fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Whether `path` is a complete segment whose creator process no longer exists.
fn creator_dead(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; H_CREATOR_PID + 4];
    let read = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)
        .and_then(|mut f| {
            // Only this user's segments: another user's file is none of our business.
            // SAFETY: geteuid has no preconditions.
            if f.metadata()?.uid() != unsafe { libc::geteuid() } {
                return Err(io::Error::other("not ours"));
            }
            f.read_exact(&mut head)
        });
    if read.is_err() {
        return false;
    }
    let word = |at: usize, n: usize| {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&head[at..at + n]);
        u64::from_le_bytes(b)
    };
    if word(H_MAGIC, 8) != MAGIC {
        return false;
    }
    let pid = word(H_CREATOR_PID, 4);
    pid != 0 && !Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_live_only_in_a_private_directory() {
        let base = std::env::temp_dir().join(format!("phx-private-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        assert_eq!(
            private_dir(&base).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        std::fs::create_dir_all(&base).unwrap();
        let dir = private_dir(&base).unwrap();
        let m = std::fs::symlink_metadata(&dir).unwrap();
        assert_eq!(m.mode() & 0o777, 0o700);
        assert_eq!(private_dir(&base).unwrap(), dir, "made once, then used");
        // Opened up to others: refused.
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        assert_eq!(
            private_dir(&base).unwrap_err().kind(),
            io::ErrorKind::PermissionDenied
        );
        // A link planted in its place: refused, not followed.
        std::fs::remove_dir(&dir).unwrap();
        std::os::unix::fs::symlink(&base, &dir).unwrap();
        assert_eq!(
            private_dir(&base).unwrap_err().kind(),
            io::ErrorKind::PermissionDenied
        );
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn stale_segments_of_dead_creators_are_swept() {
        let dir = std::env::temp_dir().join(format!("phx-sweep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let old = std::time::SystemTime::now() - 2 * STALE_AFTER;
        let make = |name: &str, pid: u32, magic: bool, when| {
            let mut head = vec![0u8; 4096];
            if magic {
                head[..8].copy_from_slice(&MAGIC.to_le_bytes());
            }
            head[H_CREATOR_PID..H_CREATOR_PID + 4].copy_from_slice(&pid.to_le_bytes());
            let p = dir.join(name);
            std::fs::write(&p, &head).unwrap();
            File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(when)
                .unwrap();
        };
        let dead = u32::MAX - 1; // above any pid_max
        make("phalanx-dead", dead, true, old);
        make("phalanx-alive", std::process::id(), true, old);
        make("phalanx-young", dead, true, std::time::SystemTime::now());
        make("phalanx-half", dead, false, old);
        make("other-dead", dead, true, old);
        // A FIFO of the same prefix must not block the sweep.
        let fifo = std::ffi::CString::new(dir.join("phalanx-fifo").as_os_str().as_encoded_bytes())
            .unwrap();
        // SAFETY: mkfifo on a NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert_eq!(sweep_stale(&dir, "phalanx-0123-4"), 1);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "other-dead",
                "phalanx-alive",
                "phalanx-fifo",
                "phalanx-half",
                "phalanx-young"
            ]
        );
        assert_eq!(sweep_stale(&dir, "noprefix"), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn layout_is_disjoint_and_aligned() {
        for n in [1, 2, 3, 4, 17] {
            let l = Layout::new(n, 4096, 8192);
            assert!(l.rank_base >= H_RANKS + 4 * n);
            assert!(l.ctrl_base >= l.matrix_base + n * n);
            assert_eq!(l.data_base % PAGE, 0);
            let mut seen = std::collections::HashSet::new();
            for a in 0..n {
                for b in 0..n {
                    if a != b {
                        assert!(seen.insert(l.ring_index(a, b)));
                    }
                }
            }
            assert_eq!(seen.len(), n * (n - 1));
            assert!(seen
                .iter()
                .all(|r| l.data(*r) + l.ring_bytes <= l.board_hdr_base));
            assert!(l.board_hdr(n - 1) + BOARD_HDR <= l.board_data_base);
            assert_eq!(l.board_data_base % PAGE, 0);
            assert!(l.board_data(n - 1) + 2 * l.board_bytes <= l.total);
        }
    }
}
