//! Multi-process test harness: a test re-runs its own binary once per rank with
//! `PHALANX_SHM_TEST_ROLE=<test>:<rank>:<n>:<segment>`; the child runs the rank's body,
//! a panic there is a non-zero exit, and the parent fails on it (bounded wait).
#![allow(dead_code)]

use std::os::fd::RawFd;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use phalanx_shm::{ShmConfig, ShmTransport};

pub const ROLE: &str = "PHALANX_SHM_TEST_ROLE";

/// The rank's view in a child process.
pub struct Ctx {
    pub rank: u32,
    pub n: u32,
    pub seg: String,
}

impl Ctx {
    pub fn ranks(&self) -> Vec<u32> {
        (0..self.n).collect()
    }
    pub fn connect(&self, cfg: ShmConfig) -> ShmTransport {
        let t = ShmTransport::connect(&self.seg, &self.ranks(), self.rank, cfg).expect("connect");
        // Every rank has attached (connect is collective): the file must be gone.
        assert!(
            !t.segment().path().exists(),
            "segment file still present after attach"
        );
        t
    }
}

/// `Some` in a child process running `test`.
pub fn child(test: &str) -> Option<Ctx> {
    let v = std::env::var(ROLE).ok()?;
    let mut it = v.splitn(4, ':');
    let name = it.next()?;
    if name != test {
        return None;
    }
    let rank = it.next()?.parse().ok()?;
    let n = it.next()?.parse().ok()?;
    let seg = it.next()?.to_string();
    Some(Ctx { rank, n, seg })
}

/// Run `n` ranks of `test` as processes; panics if any fails or they take longer than
/// `limit` (a hang guard, not a performance assertion). Returns the segment path.
pub fn run_ranks(test: &str, n: u32, limit: Duration, env: &[(&str, &str)]) -> std::path::PathBuf {
    let seg = format!("phalanx-test-{}-{test}", std::process::id());
    let exe = std::env::current_exe().expect("current_exe");
    let mut kids: Vec<(u32, Child)> = (0..n)
        .map(|r| {
            let mut c = Command::new(&exe);
            c.args([test, "--exact", "--nocapture", "--test-threads=1"])
                .env(ROLE, format!("{test}:{r}:{n}:{seg}"));
            for (k, v) in env {
                c.env(k, v);
            }
            (r, c.spawn().expect("spawn rank"))
        })
        .collect();
    let deadline = Instant::now() + limit;
    let mut failed = Vec::new();
    while !kids.is_empty() {
        let mut i = 0;
        while i < kids.len() {
            if let Some(st) = kids[i].1.try_wait().expect("wait") {
                if !st.success() {
                    failed.push((kids[i].0, st));
                }
                kids.remove(i);
            } else {
                i += 1;
            }
        }
        if !failed.is_empty() || Instant::now() > deadline {
            for (_, k) in &mut kids {
                let _ = k.kill();
                let _ = k.wait();
            }
            assert!(failed.is_empty(), "{test}: ranks failed: {failed:?}");
            panic!("{test}: ranks still running after {limit:?} (hang guard)");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let path = phalanx_shm::private_dir(std::path::Path::new("/dev/shm"))
        .unwrap()
        .join(&seg);
    assert!(!path.exists(), "{} left behind", path.display());
    path
}

/// Deterministic content for frame `idx` from `src` to `dst`.
pub fn fill(src: u32, dst: u32, idx: u64, buf: &mut [u8]) {
    let mut x =
        (u64::from(src) << 48 ^ u64::from(dst) << 32 ^ idx).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for c in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        c.copy_from_slice(&x.to_le_bytes()[..c.len()]);
    }
}

/// Wait for POLLIN on `fd` for at most `ms`; true if readable.
pub fn poll_in(fd: RawFd, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd on the stack.
    unsafe { libc::poll(&mut p, 1, ms) > 0 }
}

/// Bounded wait until `cond` (hang guard: panics with `what` after 30 s).
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::yield_now();
    }
}

/// FNV-1a, for transfer checksums.
pub fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, x| {
        (h ^ u64::from(*x)).wrapping_mul(0x100_0000_01b3)
    })
}
