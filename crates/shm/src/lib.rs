//! phalanx shared-memory transport for the ranks of one host.
//!
//! # Layers
//! * [`ShmSegment`] — one file per (job, host) in the user's private directory
//!   `/dev/shm/phalanx-<uid>` ([`private_dir`]: mode 0700, owned by the user, not a
//!   link; refused otherwise), created by the lowest local
//!   rank ([`ShmSegment::create`]) and opened by the others ([`ShmSegment::open`]). It is
//!   sized up front with `posix_fallocate`, so a too-small `/dev/shm` fails *at create* with
//!   an error naming the size and the free space (never a SIGBUS later), and it is unlinked
//!   as soon as every local rank has mapped it (see "Attach protocol" below).
//! * [`ShmTransport`] — built from a segment ([`ShmTransport::new`]): per ordered pair of
//!   local ranks a single-producer/single-consumer ring, an eventfd per rank for sleeping,
//!   and the single-copy capability matrix (`process_vm_readv`).
//! * [`Board`] — the collective board in the same segment ([`ShmTransport::board`]): per
//!   local rank a slot of two buffers written by their owner and read by many (see the
//!   `board` module for its contract); the engine runs blocking collectives on it.
//!
//! # Rings (contract)
//! * One ring per ordered pair (A→B), `ShmConfig::ring_bytes` bytes of 64-byte cells
//!   (power of two). The producer's index (`head`) and the consumer's index (`tail`) are
//!   monotonically increasing cell counts, each alone on its own 128-byte line, published
//!   with release stores and read with acquire loads. Each side caches the other's index
//!   and re-reads it only when its cached copy says "empty" / "full": in steady state a
//!   send touches one shared line per 64 bytes of frame plus the head line, and a receive
//!   the same lines, with **no syscall and no lock**.
//! * A frame starts on a cell boundary with an 8-byte header (length, flags) followed by
//!   its bytes, written **in place** by the producer ([`ShmTransport::reserve`] →
//!   [`ShmTransport::commit`]) and read in place by the consumer ([`ShmTransport::peek`] →
//!   [`ShmTransport::release`]). Frames of at most [`FAST_FRAME`] = 56 bytes occupy one
//!   cell (the "fast slot": one cache line crosses cores). Frames never straddle the end of
//!   the ring: the producer writes a wrap marker and continues at cell 0.
//! * The transport treats frames as opaque bytes (the engine puts phalanx datagrams in
//!   them). Order is FIFO per pair; nothing is ever lost, duplicated or reordered.
//! * **Flow control is the consumer index**: a full ring makes `send` return `Ok(false)`
//!   (the caller retries later; it must keep receiving meanwhile, or two ranks sending to
//!   each other can deadlock). The consumer publishes its index when
//!   [`ShmTransport::recv`] or [`ShmTransport::peek`] finds a ring empty, whenever a
//!   quarter of a ring has been consumed since the last publication, before it sleeps,
//!   and when its caller is about to leave the library with a sixteenth of a ring
//!   consumed or its producer waiting for room ([`ShmTransport::publish_consumed`]) —
//!   not right after each frame, so that the
//!   answer to a frame does not queue behind stores to the cells it came in.
//! * The largest frame is [`ShmTransport::max_frame`] = `ring_bytes - 8`.
//!
//! # Sleeping (contract)
//! Spin-then-sleep is the engine's policy; this crate provides the pieces:
//! * [`ShmTransport::poll_readable`] — pure loads on shared memory, cheap enough to spin on.
//! * [`ShmTransport::prepare_sleep`] — announces "about to sleep" (a flag per rank in the
//!   segment, plus a "waiting for space" flag on each ring whose last send found it full),
//!   then re-checks every ring. It returns `false` if data (or space) arrived meanwhile:
//!   do not sleep. If it returns `true`, sleep in `poll()` on [`ShmTransport::fd`] (the
//!   rank's eventfd), together with any sockets. Any later call to `recv`, `peek`, `send`,
//!   `reserve` or [`ShmTransport::finish_sleep`] ends the sleep state and drains the eventfd.
//! * A producer, after publishing a frame, reads the consumer's flag (no fence: a full
//!   fence there costs a cross-core cache-line transfer on every send, which is most of
//!   the one-way latency); only if it is set does it clear it and write the consumer's
//!   eventfd. The consumer sets its flag, fences, re-checks the rings, and re-checks them
//!   once more after [`SLEEP_RECHECK`] polls (a store waiting in the producer's store buffer
//!   becomes visible long before that). A wake-up could then only be lost if a published
//!   frame stayed invisible through both checks, and the engine bounds every sleep anyway
//!   (a lost wake-up costs at most one bounded sleep, never a hang); a spinning consumer
//!   costs the producer no syscall and no fence.
//! * Eventfds cannot be opened by name in another process. At connect time every rank sends
//!   its eventfd to every peer with `SCM_RIGHTS` over an abstract-namespace Unix datagram
//!   socket (no file, no ptrace permission needed, works as any user; names are private to
//!   the network namespace, which is part of phalanx's host identity). The sockets are
//!   closed once the exchange is done.
//!
//! # Single copy (contract)
//! [`read_remote`] pulls `len` bytes from another process's address space with
//! `process_vm_readv` straight into the destination. At connect, every rank probes every
//! peer (reads a known word at a published address and compares it); the result is a
//! matrix published in the segment, so both sides of a pair agree which path to use:
//! [`ShmTransport::can_read_from`], [`ShmTransport::can_be_read_by`],
//! [`ShmTransport::single_copy`]. When it is not permitted (EPERM under ptrace restrictions,
//! different users, pid namespaces, or `ShmConfig::single_copy = false`), the pipelined
//! two-copy fallback is [`ShmTransport::send_chunked`]: chunks written in place into the
//! ring while the receiver copies earlier chunks out. The rendezvous protocol (descriptor
//! frame with (pid, address, length), completion frame back) belongs to the engine.
//!
//! # Attach protocol (segment lifetime)
//! 1. The creator (lowest local rank) makes the file with `O_CREAT|O_EXCL` (mode 0600),
//!    `posix_fallocate`s it, maps it, writes the header and the attach counter (= 1), and
//!    publishes a magic word last (release).
//! 2. Every other rank waits (bounded by `ShmConfig::connect_timeout`) for the file to
//!    appear with the expected size and the magic, checks that its own view of the job
//!    (ranks, ring size) matches the header, and increments the attach counter.
//! 3. Whoever brings the counter to the number of local ranks unlinks the file: from then
//!    on the segment lives only in the mappings, and the kernel frees it when the last rank
//!    exits, however it exits.
//! 4. If the creator is dropped before every rank attached (a rank never came, or connect
//!    failed), it unlinks the file itself; a late rank then fails its bounded wait with an
//!    error naming the segment.
//! 5. A creator killed before step 3 (SIGKILL, a node gone down) leaves the file behind:
//!    every later `create` sweeps files of the same name prefix whose creator no longer
//!    exists and that are older than a minute ([`sweep_stale`]).
//!
//! # Safety model
//! All ranks of a job trust each other (they are the same program). Shared words are only
//! ever accessed through atomics; frame bytes are accessed through plain slices only in the
//! region the ring protocol gives to one side exclusively (producer: free cells; consumer:
//! published, unreleased cells). A peer that corrupts the segment can make this process
//! see garbage frames or an `InvalidData` error, but frame lengths are validated, so it
//! cannot make it read or write outside the mapping.

mod board;
mod env;
mod ring;
mod segment;
mod sys;
mod transport;

pub use board::{Board, Published};
pub use env::{MAX_TIMEOUT_SECS, MAX_VALUE_LEN};
pub use segment::{private_dir, sweep_stale, ShmConfig, ShmSegment, MIN_AUTO_RING};
pub use sys::read_remote;
pub use transport::{ShmTransport, SingleCopy};

/// Cell size: frames start on cell boundaries, one cell is one cache line.
pub const CELL: usize = 64;
/// Bytes of frame header inside the first cell.
pub const FRAME_HEADER: usize = 8;
/// Ring polls between the two re-checks of [`ShmTransport::prepare_sleep`].
pub const SLEEP_RECHECK: usize = 512;
/// Largest frame that fits in one cell together with its header (the fast slot).
pub const FAST_FRAME: usize = CELL - FRAME_HEADER;
