//! The progress engine: one per rank, owned by the thread that initialized phalanx.
//!
//! Contract: all communication progresses inside library calls ([`Engine::progress`]):
//! receive a batch of datagrams (and, while a protocol timer is due, up to
//! `DRAIN_BEFORE_TIMERS` more: silence is judged after what arrived is read), run
//! protocol timers, move queued fragments into the
//! go-back-n windows, put datagrams on the wire. Blocking waits spin for a bounded time
//! and then sleep in `poll()` on the transport's sockets and the launcher connection, so
//! more ranks than cores still progress. Every wait ends: by completion, by a protocol
//! error naming the peer, or by the launcher (timeout/abort). Finalize drains every send
//! window, reports `drained` to the launcher and keeps answering until released.

mod careful_net;
mod coll_net;
mod collectives;
mod gang;
mod p2p;
pub(crate) mod rma;
mod shm;
mod spawn;
pub(crate) mod stats;
mod wait;

/// The request table (kept at `engine::requests` for its users).
pub use crate::requests;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::link::{CarefulLink, GbnLink, HostMedium, Link, Links, Net, ShmLink, UrtpLink};
use phalanx_boot::pmi::PmiEnv;
use phalanx_boot::{BootClient, BootEnv, Control, Endpoint, HostInfo};
use phalanx_proto::gbn::{Gbn, GbnConfig, Verdict};
use phalanx_proto::urtp::{Urtp, UrtpConfig};
use phalanx_transport::{wait_readable, Faulty, Transport, UdpTransport};
use phalanx_wire::{Kind, Packet, HEADER_LEN};
use requests::{ReqId, Requests};
use std::collections::VecDeque;
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

pub use crate::link::{LinkReport, Medium};
pub use gang::SavedLinks;
pub use requests::{RawStatus, RecvBuf, SendBuf};
pub use stats::Stats;
pub(crate) use wait::{Round, Sleep};

/// What a blocking call is waiting for, reported to the launcher on `--timeout`.
#[derive(Debug, Clone, Default)]
pub(crate) enum Waiting {
    #[default]
    Nothing,
    Recv {
        src: Option<u32>,
        tag: Option<i32>,
        ctx: u32,
    },
    Send {
        peer: u32,
        tag: i32,
    },
    Finalize,
    /// Halted links draining what is in flight (job manager).
    Halt,
    /// Continued after a halt, waiting to hear these peers run again (the resume
    /// exchange) before the links take new data.
    Resume(Vec<u32>),
    Coll(ReqId),
    /// A spawn request, waiting for the launcher's answer.
    Spawn,
    /// A one-sided synchronization on window context `ctx`, waiting for `peer`.
    Rma {
        ctx: u32,
        peer: u32,
        what: &'static str,
    },
    /// A collective on the shared-memory board, waiting for `peer` (world rank).
    Board {
        ctx: u32,
        seq: u32,
        kind: &'static str,
        peer: u32,
    },
}

/// The per-rank engine.
pub struct Engine {
    pub(crate) rank: u32,
    pub(crate) size: u32,
    pub(crate) job_key: u64,
    cfg: Config,
    epoch: Instant,
    peer_addrs: Vec<SocketAddrV4>,
    /// UDP datagrams carry the job's MAC (`PHALANX_MAC`).
    sealed: bool,
    /// Every medium's link, and the medium of each peer (decided at start-up).
    pub(crate) links: Links,
    /// The segment's collective board (blocking collectives among ranks of this host).
    pub(crate) board: Option<std::rc::Rc<phalanx_shm::Board>>,
    /// Per world rank: index of its host (boot id + network namespace), numbered in
    /// order of first appearance in the rank table (the same on every rank).
    pub(crate) host_of: Vec<u32>,
    /// The configuration asks for shared memory between ranks of one host (the same on
    /// every rank of a job: `PHALANX_TRANSPORT` and `PHALANX_FAULTS`).
    pub(crate) shm_wanted: bool,
    /// Per world rank: its pid when this rank may `process_vm_readv` from it, else 0.
    pub(crate) single_copy_pids: Vec<i32>,
    /// Careful peers whose final counts arrived (Finalize), and how many are expected.
    careful_counts_seen: usize,
    careful_counts_expected: usize,
    /// A broken careful link, reported by the next wait.
    link_error: Option<Error>,
    /// Every other rank is reached over shared memory.
    all_peers_shm: bool,
    pub(crate) coll_out: VecDeque<coll_net::Pending>,
    pub(crate) want_scratch: Vec<u32>,
    boot: Option<BootClient>,
    /// Payload bytes per datagram after the header, to every destination.
    pub(crate) max_payload: usize,
    /// Per world rank: payload bytes per go-back-n datagram to it alone (more than
    /// `max_payload` to a rank of this host over UDP: the host's loopback carries it,
    /// whatever the MTU of the interface holding the address).
    peer_payload: Vec<usize>,
    eager_limit: usize,
    /// Eager limit towards shared-memory peers that can pull our buffers with one copy.
    pub(crate) shm_eager_limit: usize,
    /// Per world rank: it may `process_vm_readv` from this process.
    pub(crate) readable_by: Vec<bool>,
    spin: Duration,
    pub(crate) reqs: Requests,
    p2p: p2p::P2p,
    /// One-sided windows of this rank (their target side runs in `progress`).
    pub(crate) rma: rma::Rma,
    pub(crate) stats: Stats,
    /// Message numbers per peer while the timeline records ([`crate::trace`]).
    pub(crate) trace_numbers: crate::trace::Numbers,
    pub(crate) coll: crate::coll::CollState,
    waiting: Waiting,
    iterations: u64,
    /// When the launcher connection is next read by a busy rank (ns, engine clock).
    next_boot_poll: u64,
    /// Started by a PMI server: Slurm's SIGTSTP/SIGCONT halt and resume the links.
    slurm_suspend: bool,
    /// `PHALANX_COMM_LOCK` was refused once: not tried again.
    comm_lock_failed: bool,
    /// The clock as last read by `progress`.
    last_now: u64,
    /// Drain every socket in the next progress round (after a sleep).
    drain_all_next: bool,
    /// The links are halted ([`Engine::halt_links`]).
    halted: bool,
    /// The launcher asked for a halt (with this bound on the drain), not yet done.
    halt_asked: Option<Duration>,
    /// The launcher continued the job after a halt.
    continued: bool,
    /// The peers heard running again since this rank's last halt began (the resume
    /// exchange, see `gang`).
    resumed: Vec<bool>,
    /// Peers whose resume announcement is to be answered (sent once the socket is back
    /// from the receive round that read them; at most one entry per peer).
    resume_answers: Vec<u32>,
    /// In the resume exchange (continued, links still halted).
    resuming: bool,
    finalized: bool,
    /// Job ranks `era.0..era.0 + era.1` started together with this process (see
    /// `spawn`): its world.
    era: (u32, u32),
    /// What `PHALANX_SPAWNED` said, for a process a spawn started.
    spawned: Option<phalanx_boot::SpawnedEnv>,
    /// The launcher's answer to this rank's spawn request.
    spawn_answer: Option<std::result::Result<(u32, Vec<Endpoint>), String>>,
    /// Every other rank of the world was on shared memory at start-up (what collectives
    /// decide on: the same on every rank of a world, unlike `all_peers_shm`, which a
    /// spawn clears on the spawning ranks only).
    pub(crate) era_all_shm: bool,
    /// The last step of the next collective started, and those of running ones (by
    /// request; at most one per immediate collective in flight).
    next_finisher: Option<Box<dyn FnOnce()>>,
    finishers: Vec<(ReqId, Box<dyn FnOnce()>)>,
    /// Per job rank: it knows this rank (the same era, parents and children of a spawn);
    /// the others of a grown job never write to it (see `spawn`).
    pub(crate) acquainted: Vec<bool>,
}

/// Default eager limit towards shared-memory peers that pull larger messages with one
/// copy (`process_vm_readv`). Copying through the ring measured faster at every size up
/// to 4 MiB on a 2-core machine (p = 2: 1 MiB ping-pong 35 µs against 73 pulled, 34 GB/s
/// against 15 in a window): the pull only bounds what an unexpected message makes its
/// receiver hold. At most a 64th of `PHALANX_UNEXPECTED_LIMIT` (256 MiB: 4 MiB).
const SHM_EAGER_LIMIT: usize = 4 << 20;
/// Worst-case JSON bytes of one part of a rank's timeline (see `send_trace`): half the
/// boot protocol's line limit.
const TRACE_PART_BYTES: usize = phalanx_boot::MAX_LINE / 2;

/// Default eager limit over the network (issue 15 item 1): below it a message leaves at
/// once, above it a rendezvous costs a round trip before the data. p = 2 ping-pong,
/// 32 KiB against 256 KiB (`bench/thresholds.py latency 2 16384:1048576
/// PHALANX_EAGER_LIMIT …`): across test hosts 64 KiB 42.6 → 30.8 µs, 128 KiB 66.3 →
/// 54.4, 256 KiB 107.7 → 95.0; over loopback (limit 64 KiB before) 128 KiB 36.5 → 26.6,
/// 256 KiB 58.5 → 50.1. Beyond it the round trip is a few per cent of the transfer, and
/// the rendezvous lands the data in the posted buffer instead of holding it unexpected.
/// At least one datagram's payload, at most a 64th of `PHALANX_UNEXPECTED_LIMIT`.
const NET_EAGER_LIMIT: usize = 256 << 10;

/// How often a busy rank reads its launcher connection.
const BOOT_POLL_NS: u64 = 1_000_000;
/// URTP's send window per peer in bytes: 64 datagrams of 64 KiB over loopback, up to 1024
/// of an MTU-sized datagram on a network (the window is counted in datagrams, clamped
/// to 64..=1024; the receive pool follows it). To a rank of the same host over a network
/// interface unicast packets are larger ([`URTP_UNICAST_MAX`]), so up to 16 MiB.
const URTP_WINDOW_BYTES: usize = 4 << 20;

/// Message-layer payload bytes of a datagram of `dgram` bytes (its header and room for
/// the fragment prefix off).
fn payload_of(dgram: usize) -> usize {
    dgram.saturating_sub(HEADER_LEN + 16).max(256)
}

/// Payload bytes per go-back-n datagram to `peer` alone over `transport`: what its path
/// takes ([`Transport::max_datagram_to`]), never less than `max_payload`.
pub(crate) fn peer_payload_of(
    transport: Option<&dyn Transport>,
    peer: u32,
    max_payload: usize,
) -> usize {
    transport.map_or(max_payload, |t| {
        payload_of(t.max_datagram_to(peer)).max(max_payload)
    })
}

/// Largest unicast URTP packet to a rank of this host reached over a network interface
/// (whose whole datagrams the host's loopback carries): a full window (up to 1024
/// packets) of these is 16 MiB in flight to it, within the 32 MiB socket buffer — 64 KiB
/// ones would be 64 MiB. Multicast packets keep the interface's size.
const URTP_UNICAST_MAX: usize = 16 << 10;

/// Receive batches read at most, beyond a round's first, before a due protocol timer
/// fires (each up to `RECV_BATCH` datagrams per socket).
const DRAIN_BEFORE_TIMERS: usize = 64;

/// Longest sleep of a rank with shared-memory peers.
const SHM_SLEEP_MAX_NS: u64 = 10_000_000;

/// Keeps freed memory in the process (issue 15 item 1). Large messages allocate and free
/// up to a message's size per transfer (go-back-n's send window, staging copies); glibc's
/// defaults give such memory back to the kernel at each free (heap trim past 128 KiB free,
/// `mmap` for blocks past 128 KiB) and fault it in again at the next message: a sweep of
/// UDP ping-pongs up to 1 MiB took 780 µs at 1 MiB where the same size alone took 295
/// (with the limits below: 290). Like Open MPI, phalanx raises the limits, bounded: trim
/// past 256 MiB free, `mmap` past 32 MiB (glibc's largest threshold).
fn keep_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt changes allocator parameters only.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
    }
}

/// This rank's place in the job, however it was started.
struct RankSize {
    rank: u32,
    size: u32,
}

/// Un-acked bytes a go-back-n send window holds per peer, whatever its packet count
/// (`GbnConfig::window_bytes`; one datagram may cross it): 128 of loopback's 64 KiB
/// datagrams, what the default window holds there. A larger `PHALANX_WINDOW` counts
/// across a 1500-byte MTU and not beyond this on loopback. A pure ACK goes after half
/// of it or half the packets.
const GBN_WINDOW_BYTES: usize = 8 << 20;

fn gbn_config(cfg: &Config) -> GbnConfig {
    GbnConfig {
        window: cfg.window,
        window_bytes: GBN_WINDOW_BYTES,
        ack_bytes: GBN_WINDOW_BYTES / 2,
        eager_ack: cfg.eager_ack,
        rto_max_ns: cfg.rto_max.as_nanos() as u64,
        rto_initial_ns: cfg.rto_min.as_nanos() as u64,
        // Retransmission continues at the clamp; after `peer_timeout` without any
        // acknowledgement progress the peer is declared unresponsive.
        // Clamped, not cast: a cast kept the low 32 bits only (a peer timeout of 2^32
        // clamps, 17179869.184 s at the default 4 ms, gave 0, i.e. a single timeout).
        // (The clamp go-back-n uses is at least the floor.)
        max_backoffs: (cfg.peer_timeout.as_nanos() / cfg.rto_max.max(cfg.rto_min).as_nanos().max(1))
            .clamp(1, u32::MAX as u128) as u32,
        // A delayed ACK carries the transmit hint that tells the peer of a lost packet
        // (issue 13 item 4): 200 µs, below the 300 µs RTO floor.
        ack_delay_ns: 200_000,
        // A pure ACK after half a window (issue 15 item 1): the sender never stalls, and
        // a message of a few dozen datagrams is answered by its reply, which carries the
        // ACK, not by a pure ACK sent first. Across test hosts (1500-byte MTU, window
        // 128), p = 2 ping-pong of 32 KiB: 24.0 µs with 16, 18.8 with 64; 128 (the
        // whole window) stalls the stream (1 MiB 379 → 464 µs). `bench/thresholds.py`.
        ack_threshold: (cfg.window / 2).max(1),
        ..GbnConfig::default()
    }
}

impl Engine {
    /// Starts this rank: reads the environment, binds the transport, runs the start-up
    /// rendezvous with the launcher (or becomes a singleton without one).
    pub fn init() -> Result<Engine> {
        let cfg = Config::from_env()?;
        if cfg.trace {
            crate::trace::start(cfg.trace_events);
        }
        crate::log::install_default(cfg.log, cfg.trace);
        crate::coll::algorithm::install(cfg.coll.clone());
        crate::coll::cost::install(cfg.cost, cfg.ranks_per_cpu);
        let boot_env = BootEnv::from_env().map_err(|e| Error::Init(e.to_string()))?;
        let kind = cfg.transport;
        let faults = cfg.faults.clone();
        // Without a launcher, a PMI server (`srun --mpi=pmi2`) may have started us.
        let pmi_env = match &boot_env {
            Some(_) => None,
            None => PmiEnv::from_lookup(|k| std::env::var(k).ok())
                .map_err(|e| Error::Init(e.to_string()))?,
        };
        let env = match (&boot_env, &pmi_env) {
            (Some(e), _) => RankSize {
                rank: e.rank,
                size: e.size,
            },
            (None, Some(p)) => RankSize {
                rank: p.rank,
                size: p.size,
            },
            (None, None) => RankSize { rank: 0, size: 0 },
        };
        if env.size == 0 {
            // A process started without the launcher: a job of one.
            let mut engine = Self::build(cfg, 0, 1, 0, None, Vec::new(), None, (1, 1));
            engine.all_peers_shm = true;
            engine.era_all_shm = true;
            engine.links.decide(0, 1);
            return Ok(engine);
        }
        // Started by a spawn: its own world among the job's ranks, UDP only (see `spawn`).
        let spawned = match (&boot_env, std::env::var(phalanx_boot::ENV_SPAWNED)) {
            (Some(_), Ok(v)) => {
                Some(phalanx_boot::SpawnedEnv::parse(&v).map_err(|e| Error::Init(e.to_string()))?)
            }
            _ => None,
        };
        if let Some(s) = &spawned {
            let in_world = env.rank.wrapping_sub(s.first) < s.count;
            if !in_world || s.first.saturating_add(s.count) != env.size {
                return Err(Error::Init(format!(
                    "{}: rank {} of {} is not in the spawned world",
                    phalanx_boot::ENV_SPAWNED,
                    env.rank,
                    env.size
                )));
            }
        }
        let udp = UdpTransport::bind(cfg.ip)
            .map_err(|e| Error::Init(format!("cannot bind UDP on {}: {e}", cfg.ip)))?;
        let me = Endpoint {
            addr: udp.local_addr(),
            host: HostInfo::current(),
            recv_frames: udp.recv_frames(),
        };
        let boot = match (&boot_env, &pmi_env) {
            (Some(e), _) => BootClient::connect(e, me.clone(), Duration::from_secs(120)),
            (None, Some(p)) => {
                gang::install_slurm_suspend();
                BootClient::connect_pmi(p, me.clone(), Duration::from_secs(120))
            }
            (None, None) => unreachable!("a job of one returned above"),
        };
        let (mut boot, table) =
            boot.map_err(|e| Error::Init(format!("start-up rendezvous failed: {e}")))?;
        if table.endpoints.len() != env.size as usize {
            return Err(Error::Init("endpoint table has the wrong size".into()));
        }
        let addrs: Vec<SocketAddrV4> = table.endpoints.iter().map(|e| e.addr).collect();
        let local_ranks = table
            .endpoints
            .iter()
            .filter(|e| e.host.boot_id == me.host.boot_id && e.host.netns_ino == me.host.netns_ino)
            .count();
        // Ranks on this machine's CPUs: the launcher counts those of its test hosts
        // (network namespaces) too, which compete for the same cores.
        let cpu_sharers = local_ranks.max(cfg.machine_ranks.unwrap_or(0));
        let mut udp = udp;
        // Sealed from the first datagram on: nothing has been read from the socket yet,
        // and what peers sent meanwhile is opened when it is read. (Loopback too: another
        // user of the host can put a rank's source address and port on a datagram, by
        // binding the port on another loopback address and sending with IP_PKTINFO.)
        let sealed = cfg.mac;
        if sealed {
            let key = phalanx_transport::mac::datagram_key(&boot.secret().0);
            udp.authenticate(&key, env.rank);
        }
        udp.set_peers(addrs.clone());
        // PHALANX_GSO=0: datagram by datagram, both ways.
        udp.set_segmentation(cfg.gso);
        // The kernel filter first (so the group socket gets it too), then the group.
        // PHALANX_BPF=0: no kernel filter.
        let filtered = if cfg.bpf {
            udp.install_filter(table.job_key, env.rank)
        } else {
            Ok(())
        };
        if let Err(e) = filtered {
            tracing::warn!(
                "phalanx: rank {}: kernel packet filter not installed: {e}",
                env.rank
            );
        }
        let mcast = if spawned.is_some() {
            phalanx_transport::McastSetting::Disabled
        } else {
            cfg.mcast
        };
        if let Err(e) = udp.join_multicast(table.job_key, mcast) {
            tracing::warn!(
                "phalanx: rank {}: multicast unavailable ({e}); collectives fan out",
                env.rank
            );
        }
        let no_faults = faults.is_none();
        let shm = match spawned {
            // Spawned ranks report no shared-memory outcome (the launcher expects none).
            Some(_) => None,
            None => shm::setup(&cfg, &table, &me, env.rank, &mut boot)?,
        };
        let (reliable_net, careful_stall) = (cfg.reliable_net, cfg.careful_stall_ns);
        let board_bytes = cfg.shm.board_bytes;
        // Faults on shared memory (`PHALANX_TRANSPORT=shm` with `PHALANX_FAULTS`): the
        // rings join UDP as one medium under the protocols and the fault injector.
        let (transport, shm): (Box<dyn Transport>, _) = match (faults, shm) {
            (Some(f), Some(rings)) => {
                let host = HostMedium::new(Box::new(udp), rings, addrs.clone());
                (Box::new(Faulty::new(host, f, env.rank)), None)
            }
            (Some(f), None) => (Box::new(Faulty::new(udp, f, env.rank)), None),
            (None, shm) => (Box::new(udp), shm),
        };
        let mut engine = Self::build(
            cfg,
            env.rank,
            env.size,
            table.job_key,
            Some(transport),
            addrs,
            Some(boot),
            (local_ranks, cpu_sharers),
        );
        engine.slurm_suspend = pmi_env.is_some();
        engine.sealed = sealed;
        engine.links.careful =
            careful_net::setup(reliable_net, careful_stall, &table, env.rank, env.size)
                .filter(|_| spawned.is_none())
                .map(|c| CarefulLink::new(c, env.size));
        if let Some(s) = &spawned {
            engine.era = (s.first, s.count);
            for (r, a) in engine.acquainted.iter_mut().enumerate() {
                *a = engine.era.0 <= r as u32 || s.parents.contains(&(r as u32));
            }
        }
        let spawned_rank = spawned.is_some();
        engine.spawned = spawned;
        let mut hosts: Vec<(&str, u64)> = Vec::new();
        for (r, e) in table.endpoints.iter().enumerate() {
            let h = (e.host.boot_id.as_str(), e.host.netns_ino);
            let i = hosts.iter().position(|x| *x == h).unwrap_or_else(|| {
                hosts.push(h);
                hosts.len() - 1
            });
            engine.host_of[r] = i as u32;
        }
        // Hierarchical collectives need every multi-rank host's board: the same answer
        // on every rank (configuration only).
        engine.shm_wanted = match kind {
            phalanx_transport::TransportKind::Udp => false,
            phalanx_transport::TransportKind::Shm => true,
            phalanx_transport::TransportKind::Auto => true,
        } && no_faults
            && board_bytes > 0
            && !spawned_rank;
        if let Some(t) = shm {
            engine.board = t.board().map(std::rc::Rc::new);
            for &p in t.peers() {
                engine.readable_by[p as usize] = t.can_be_read_by(p).unwrap_or(false);
                if t.can_read_from(p).unwrap_or(false) {
                    engine.single_copy_pids[p as usize] = t.peer_pid(p).unwrap_or(0);
                }
            }
            engine.links.shm = Some(Box::new(ShmLink::new(t)));
            engine.lock_comm(true);
        }
        engine.links.decide(engine.rank, engine.size);
        // Every peer on shared memory, or alone in the job (nothing arrives from a
        // network): progress takes the fast path (sockets and timers every few rounds).
        engine.all_peers_shm = engine.size == 1
            || (engine.links.shm.is_some()
                && engine
                    .links
                    .media()
                    .iter()
                    .all(|l| matches!(l, Medium::Local | Medium::Shm)));
        engine.era_all_shm = engine.all_peers_shm;
        Ok(engine)
    }

    /// The medium of point-to-point traffic to `peer` (go-back-n for a rank out of
    /// range: the caller checked it).
    #[inline]
    pub(crate) fn link(&self, peer: u32) -> Medium {
        self.links.medium(peer)
    }

    #[allow(clippy::too_many_arguments)]
    fn build(
        cfg: Config,
        rank: u32,
        size: u32,
        job_key: u64,
        transport: Option<Box<dyn Transport>>,
        peer_addrs: Vec<SocketAddrV4>,
        boot: Option<BootClient>,
        (local_ranks, cpu_sharers): (usize, usize),
    ) -> Engine {
        keep_heap();
        let max_dgram = transport.as_ref().map_or(65507, |t| t.max_datagram());
        let max_payload = payload_of(max_dgram);
        let peer_payload = (0..size)
            .map(|p| peer_payload_of(transport.as_deref(), p, max_payload))
            .collect();
        let eager_limit = cfg.eager_limit.unwrap_or(
            max_payload
                .max(NET_EAGER_LIMIT)
                .min(cfg.unexpected_limit / 64),
        );
        // The CPUs the job's ranks share on this host: a launcher that binds each rank to
        // one CPU says how many it spreads them over (PHALANX_CPUS); otherwise what this
        // process may use.
        let cores = cfg
            .cpus
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let spin = cfg.spin.unwrap_or(if cpu_sharers > cores {
            Duration::ZERO
        } else {
            Duration::from_micros(50)
        });
        // Loss recovery's clock (issue 13 item 4): a REQ 100 µs into a wait, backing off
        // to at most 500 µs; a delayed ACK after 200 µs, below the sender's safety net
        // at 500 µs. (The protocol's defaults, 1 ms / 100 ms / 2 ms / 20 ms, with
        // go-back-n's former 4 ms floor and 100 ms clamp, made an 8-rank Jacobi
        // iteration at 30 % loss 250 times slower than without loss; 300 µs / 2 ms /
        // 500 µs / 2 ms with 2 ms and 4 ms, about 40 times; these, with go-back-n's
        // probes, 300 µs and 1 ms, about 17 times.)
        let mut ucfg = UrtpConfig {
            req_gap_ns: 100_000,
            req_backoff_max_ns: 500_000,
            ack_delay_ns: 200_000,
            sender_rto_ns: 500_000,
            window: (URTP_WINDOW_BYTES / max_dgram.max(1)).clamp(64, 1024) as u32,
            ..UrtpConfig::default()
        };
        // The same bound on silence as for go-back-n: PHALANX_PEER_TIMEOUT.
        ucfg.max_backoffs = (cfg.peer_timeout.as_nanos() / ucfg.req_backoff_max_ns.max(1) as u128)
            .clamp(1, u32::MAX as u128) as u32;
        let mut urtp = Urtp::new(ucfg, job_key, rank, size);
        urtp.set_max_datagram(max_dgram);
        if let Some(t) = transport.as_ref() {
            for p in (0..size).filter(|&p| p != rank) {
                urtp.set_unicast_max_datagram(p, t.max_datagram_to(p).min(URTP_UNICAST_MAX));
            }
        }
        let mut gcfg = gbn_config(&cfg);
        if let Some(budget) = cfg.comm_budget {
            // Seed 001's credit: the job's memory on this node shared by its local
            // ranks, each rank's share divided among every rank that may send to it —
            // counted in the largest datagrams this rank sends (to a rank of this host,
            // a whole UDP datagram).
            let c0 = budget / (local_ranks.max(1) * size.max(1) as usize);
            let largest = transport.as_ref().map_or(max_dgram, |t| {
                (0..size)
                    .map(|p| t.max_datagram_to(p))
                    .fold(max_dgram, usize::max)
            });
            gcfg.window = ((c0 / largest.max(1)) as u32).clamp(1, gcfg.window);
            gcfg.window_bytes = gcfg.window_bytes.min(c0.max(1));
            // A receiver must not wait for more packets than the sender may have out.
            gcfg.ack_threshold = gcfg.ack_threshold.min((gcfg.window / 2).max(1));
            gcfg.ack_bytes = gcfg.ack_bytes.min((gcfg.window_bytes / 2).max(1));
        }
        let links = Links::new(
            Net::new(transport, rank),
            GbnLink::new(Gbn::new(gcfg, job_key, rank, size)),
            UrtpLink::new(urtp),
        );
        Engine {
            rank,
            size,
            job_key,
            links,
            board: None,
            single_copy_pids: vec![0; size as usize],
            host_of: vec![0; size as usize],
            shm_wanted: false,
            // An unexpected eager message must fit what a receiver may hold (a larger one
            // would be refused as corrupt), and that budget holds at least 64 of them.
            shm_eager_limit: cfg
                .eager_limit
                .unwrap_or(SHM_EAGER_LIMIT.min(cfg.unexpected_limit / 64))
                .min(cfg.unexpected_limit),
            readable_by: vec![false; size as usize],
            careful_counts_seen: 0,
            careful_counts_expected: 0,
            link_error: None,
            all_peers_shm: false,
            coll_out: VecDeque::new(),
            want_scratch: Vec::new(),
            cfg,
            epoch: Instant::now(),
            peer_addrs,
            sealed: false,
            boot,
            max_payload,
            peer_payload,
            eager_limit,
            spin,
            reqs: Requests::default(),
            p2p: p2p::P2p::new(size),
            rma: rma::Rma::default(),
            stats: Stats::default(),
            trace_numbers: Default::default(),
            coll: Default::default(),
            waiting: Waiting::Nothing,
            iterations: 0,
            next_boot_poll: 0,
            slurm_suspend: false,
            comm_lock_failed: false,
            last_now: 0,
            drain_all_next: false,
            halted: false,
            halt_asked: None,
            continued: false,
            resumed: Vec::new(),
            resume_answers: Vec::new(),
            resuming: false,
            finalized: false,
            era: (0, size),
            spawned: None,
            spawn_answer: None,
            acquainted: vec![true; size as usize],
            era_all_shm: false,
            next_finisher: None,
            finishers: Vec::new(),
        }
    }

    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// The job key (tests play an eavesdropper that read it off the wire).
    pub fn job_key(&self) -> u64 {
        self.job_key
    }

    /// Whether this job's UDP datagrams carry its MAC.
    pub fn sealed(&self) -> bool {
        self.sealed
    }

    /// The UDP address of `rank` (tests use it to aim foreign traffic at a rank).
    pub fn peer_addr(&self, rank: u32) -> Option<SocketAddrV4> {
        self.peer_addrs.get(rank as usize).copied()
    }

    /// One round of progress. Returns whether anything happened. After an error no send
    /// shares its buffer with the windows any more (`p2p/zero_copy.rs`: the caller may
    /// give up its buffers once it sees the error).
    pub fn progress(&mut self) -> Result<bool> {
        let r = self.progress_round();
        if r.is_err() {
            self.unshare_all();
        }
        r
    }

    /// [`progress`](Self::progress)'s round.
    #[inline(always)]
    fn progress_round(&mut self) -> Result<bool> {
        // Fast path when every peer is on shared memory and no network protocol has
        // anything in flight: the rings and the local queue only. Every 256th round (and
        // after a sleep) is a full round, so sockets and timers are never starved.
        if self.all_peers_shm
            && !self.drain_all_next
            && !self.iterations.is_multiple_of(256)
            && self.links.local.is_empty()
            && self.coll.idle()
            && self.coll_out.is_empty()
            && self.links.gbn.proto.poll_timeout().is_none()
            && self.links.urtp.proto.poll_timeout().is_none()
        {
            self.iterations = self.iterations.wrapping_add(1);
            if self.iterations.is_multiple_of(8192) {
                // Launcher queries and aborts reach a rank that never sleeps, too.
                self.service_boot()?;
            }
            let mut did = self.shm_recv()? > 0;
            did |= self.pump_all(self.last_now);
            if self.rma.active() {
                did |= self.rma_poll()?;
            }
            return Ok(did);
        }
        // The clock is a measurable share of a round on the shared-memory fast path:
        // protocol timers only need it every few rounds.
        let now = if self.all_peers_shm && !self.iterations.is_multiple_of(16) {
            self.last_now
        } else {
            let n = self.now();
            self.last_now = n;
            n
        };
        let mut did = false;
        let coll_busy =
            !self.coll.idle() || !self.coll_out.is_empty() || !self.links.urtp.proto.all_acked();
        // When every peer is on shared memory nothing of this job comes over the sockets
        // (collectives take the rings and the board too): they are drained after a sleep
        // (a datagram may have woken it) and now and then, to drop foreign datagrams —
        // not every few rounds, where the system call costs a small message a few percent.
        let sockets_due = !self.all_peers_shm
            || self.drain_all_next
            || self.links.gbn.proto.poll_timeout().is_some()
            || self.iterations.is_multiple_of(1 << 16);
        let taken = if sockets_due {
            self.links.net.transport.take()
        } else {
            None
        };
        if let Some(mut t) = taken {
            // The multicast socket only carries collective traffic: drain it while a
            // collective is in flight or owed acknowledgements, and now and then anyway.
            t.set_poll_multicast(
                coll_busy || self.drain_all_next || self.iterations.is_multiple_of(64),
            );
            self.drain_all_next = false;
            let mut r = t.recv_batch(&mut |from, bytes| {
                self.handle_datagram(now, from, bytes);
            });
            // A protocol timer due now acts on silence (a REQ for a packet not seen, a
            // re-send of one not acknowledged) that may only be datagrams still queued
            // here (this rank was off the CPU, or computing): read them first, up to a
            // bound, so that lateness is not taken for loss.
            if matches!(r, Ok(n) if n > 0) {
                for _ in 0..DRAIN_BEFORE_TIMERS {
                    // What was read may have settled it (an ACK, the awaited packet).
                    if !self.protocol_timer_due(now) {
                        break;
                    }
                    match t.recv_batch(&mut |from, bytes| {
                        self.handle_datagram(now, from, bytes);
                    }) {
                        Ok(0) => break,
                        Ok(n) => r = r.map(|m| m + n),
                        Err(e) => {
                            r = Err(e);
                            break;
                        }
                    }
                }
            }
            if let Some(d) = t.next_deadline() {
                if d <= now {
                    let _ = t.service(now);
                }
            }
            self.links.net.transport = Some(t);
            did |= r? > 0;
            if !self.resume_answers.is_empty() {
                self.send_resume_answers();
            }
        }
        if self.links.shm.is_some() {
            did |= self.shm_recv()? > 0;
        }
        while let Some(d) = self.links.local.pop() {
            did = true;
            if let Ok(pkt) = Packet::new_checked(&d) {
                self.on_message(&pkt, true);
            }
        }
        if !self.coll.idle()
            || !self.coll_out.is_empty()
            || self.links.urtp.proto.poll_timeout().is_some()
        {
            did |= self.urtp_progress(now)?;
        } else {
            // Acknowledgements and REQ answers may be owed even with no collective.
            did |= self.urtp_flush(now);
        }
        did |= self.progress_collectives();
        if self.rma.active() {
            // Messages of one-sided operations were matched above: apply and answer
            // them (their answers leave with the pump below).
            did |= self.rma_poll()?;
        }
        did |= self.pump_all(now);
        if self.links.careful.is_some() {
            did |= self.careful_progress(now)?;
        }
        // Go-back-n: due timers, an unresponsive peer, what is owed on the wire.
        let l = &mut self.links;
        did |= l.gbn.poll(&mut l.net, now)?;
        self.iterations = self.iterations.wrapping_add(1);
        // A rank that never sleeps still hears the launcher (a halt, a query, an abort)
        // within a millisecond: one non-blocking read per millisecond.
        if now >= self.next_boot_poll {
            self.next_boot_poll = now.saturating_add(BOOT_POLL_NS);
            self.service_boot()?;
        }
        Ok(did)
    }

    /// Whether a go-back-n or URTP timer (a re-send, a REQ, a probe, a delayed ACK) is
    /// due at `now`.
    fn protocol_timer_due(&self, now: u64) -> bool {
        let due = |d: Option<u64>| d.is_some_and(|d| d <= now);
        due(self.links.urtp.proto.poll_timeout()) || due(self.links.gbn.proto.poll_timeout())
    }

    fn handle_datagram(&mut self, now: u64, from: SocketAddrV4, bytes: &[u8]) {
        self.stats.datagrams_received += 1;
        let Ok(pkt) = Packet::new_checked(bytes) else {
            self.stats.drop_malformed += 1;
            tracing::debug!(rank = self.rank, %from, reason = "malformed", "dropped a datagram");
            return;
        };
        // Multicasts leave from the sender's unicast socket too: one exact check.
        let known = self.peer_addrs.get(pkt.src() as usize) == Some(&from);
        if pkt.job_key() != self.job_key || !known {
            self.stats.drop_foreign += 1;
            tracing::debug!(rank = self.rank, %from, reason = "foreign", "dropped a datagram");
            return;
        }
        match pkt.kind() {
            Kind::UrtpData | Kind::UrtpAck | Kind::UrtpReq => {
                self.urtp_input(now, &pkt);
                return;
            }
            Kind::GbnData | Kind::GbnAck => {}
            Kind::CarefulData | Kind::CarefulUpdate => {
                self.careful_input(now, &pkt);
                return;
            }
            Kind::Resume => {
                self.on_resume(&pkt);
                return;
            }
        }
        match self.links.gbn.input(now, &pkt) {
            Verdict::Deliver => {
                if self.on_message(&pkt, false) {
                    self.links.gbn.accept(now, pkt.src());
                } else {
                    self.stats.drop_no_buffer += 1;
                }
            }
            Verdict::AckOnly => {}
            Verdict::Duplicate => {
                self.stats.drop_duplicate += 1;
                tracing::debug!(
                    rank = self.rank,
                    peer = pkt.src(),
                    reason = "duplicate",
                    "dropped a datagram"
                );
            }
            Verdict::OutOfOrder => {
                self.stats.drop_out_of_window += 1;
                tracing::debug!(
                    rank = self.rank,
                    peer = pkt.src(),
                    reason = "out of window",
                    "dropped a datagram"
                );
            }
            Verdict::Invalid(why) => {
                self.stats.drop_invalid += 1;
                tracing::debug!(
                    rank = self.rank,
                    peer = pkt.src(),
                    reason = "invalid",
                    ?why,
                    "dropped a datagram"
                );
            }
        }
    }

    /// Puts every datagram go-back-n owes on the wire.
    fn flush(&mut self, now: u64) -> bool {
        let l = &mut self.links;
        l.gbn.flush(&mut l.net, now)
    }

    fn service_boot(&mut self) -> Result<()> {
        if self.slurm_suspend {
            self.slurm_signals();
        }
        loop {
            let Some(boot) = self.boot.as_mut() else {
                return Ok(());
            };
            match boot.poll() {
                Ok(None) => return Ok(()),
                Ok(Some(Control::Query)) => {
                    let text = self.describe_wait();
                    let waits = self.collective_waits_for();
                    if let Some(b) = self.boot.as_mut() {
                        let _ = b.reply_status_waiting(&text, waits);
                    }
                }
                Ok(Some(Control::Release)) => {
                    self.finalized = true;
                    return Ok(());
                }
                Ok(Some(Control::Abort(reason))) => {
                    return Err(Error::Launcher(format!("job aborted: {reason}")))
                }
                Ok(Some(Control::Shm(_))) => {
                    return Err(Error::Launcher(
                        "protocol error: a second shared-memory decision".into(),
                    ))
                }
                // Halted at the next safe point of a wait (`gang::job_halt`).
                Ok(Some(Control::Halt(limit))) => self.halt_asked = Some(limit),
                Ok(Some(Control::Continue)) => self.continued = true,
                Ok(Some(Control::Spawned(a))) => self.spawn_answered(a),
                Err(e) => return Err(Error::Launcher(e.to_string())),
            }
        }
    }

    /// Bytes that unexpected messages may hold.
    /// While the links are halted every valid datagram is taken (see [`gang`]).
    pub(crate) fn unexpected_limit(&self) -> usize {
        // Not during the resume exchange: peers already running send new data then.
        if self.halted && !self.resuming {
            usize::MAX
        } else {
            self.cfg.unexpected_limit
        }
    }

    /// The per-rank counters, merged from every layer.
    pub fn stats(&self) -> Stats {
        let mut s = self.stats.clone();
        (s.coll_calls, s.coll_bytes) = stats::collective_totals();
        s.datagrams_sent += self.links.net.sent;
        s.send_errors += self.links.net.errors;
        if let Some(l) = self.links.shm.as_ref() {
            s.shm_sent = l.sent;
            s.send_errors += l.errors;
        }
        let g = self.links.gbn.proto.stats();
        s.retransmits = g.retransmits;
        s.pure_acks = g.pure_acks_sent;
        s.dup_acks = g.dup_acks_sent;
        s.timeouts = g.timeouts;
        s.fast_retransmits = g.fast_retransmits;
        s.spurious_timeouts = g.spurious_timeouts;
        s.probes = g.probes;
        s.window = u64::from(self.links.gbn.proto.config().window);
        if let Some(c) = self.links.careful.as_ref() {
            s.careful_multi = c.proto.stats().multi_sent;
        }
        let u = self.links.urtp.proto.stats();
        s.urtp_data = u.data_sent;
        s.urtp_multicasts = u.multicasts_sent;
        s.urtp_resent = u.resent;
        s.urtp_reqs = u.reqs_sent;
        s.urtp_rto_resent = u.rto_resent;
        s.urtp_out_of_order = u.buffered_out_of_order;
        if let Some(t) = self.links.net.transport.as_ref() {
            let ts = t.stats();
            s.kernel_drops = ts.kernel_drops;
            s.bad_mac = ts.bad_mac;
            s.faults_dropped = ts.faults_dropped;
            s.faults_duplicated = ts.faults_duplicated;
            s.faults_reordered = ts.faults_reordered;
            // Datagrams through rings under the protocols (faults on shared memory).
            s.shm_sent += ts.ring_sent;
            s.shm_received += ts.ring_received;
        }
        s
    }

    /// Ships the timeline to the launcher in parts (module docs of [`crate::trace`]);
    /// recording stops here. A part holds at most `TraceChunk::MAX_EVENTS` events and
    /// about [`TRACE_PART_BYTES`] of JSON at worst (every text byte escaped as `\u00XX`),
    /// so its line stays under the boot protocol's limit.
    fn send_trace(&mut self) -> Result<()> {
        let (events, lost) = crate::trace::take();
        let Some(b) = self.boot.as_mut() else {
            return Ok(());
        };
        let mut part = Vec::new();
        let mut bytes = 0;
        let mut rest = events.iter().peekable();
        loop {
            let next = rest.next();
            if let Some(e) = next {
                bytes += 160 + 6 * (e.name.len() + e.detail.len());
                part.push(phalanx_boot::TraceEvent(
                    e.ts,
                    e.dur,
                    e.kind as u8,
                    e.name.to_string(),
                    e.detail.to_string(),
                    e.a,
                    e.b,
                    e.c,
                    e.n,
                    e.tid,
                ));
            }
            let last = rest.peek().is_none();
            let full =
                part.len() >= phalanx_boot::TraceChunk::MAX_EVENTS || bytes >= TRACE_PART_BYTES;
            if last || full {
                let chunk = phalanx_boot::TraceChunk {
                    events: std::mem::take(&mut part),
                    lost,
                    clock_ns: crate::trace::now_ns(),
                    last,
                };
                bytes = 0;
                b.send_trace(chunk)
                    .map_err(|e| Error::Launcher(e.to_string()))?;
            }
            if last {
                return Ok(());
            }
        }
    }

    /// The counters and the collective algorithm table, for the launcher's summary.
    fn stats_report(&self) -> phalanx_boot::RankStats {
        let mut counters: Vec<(String, u64)> = self
            .stats()
            .fields()
            .into_iter()
            .map(|(n, v)| (n.to_string(), v))
            .collect();
        counters.push(("mac".into(), u64::from(self.sealed)));
        phalanx_boot::RankStats {
            counters,
            collectives: stats::collective_algorithms()
                .into_iter()
                .map(|(k, a, n)| (k.to_string(), a.to_string(), n))
                .collect(),
        }
    }

    fn stats_line(&self) -> String {
        let mac = if self.sealed { "on" } else { "off" };
        format!(
            "phalanx stats rank {}: {} mac={mac}",
            self.rank,
            self.stats()
        )
    }
}
