//! The rank side of PMI, the process-management interface of Slurm (`srun --mpi=pmi2`)
//! and MPICH's Hydra: how a rank bootstraps when no `phalanx run` started it.
//!
//! Contract:
//! * [`PmiEnv::from_lookup`] reads `PMI_FD`, `PMI_RANK`, `PMI_SIZE` (and `PMI_JOBID`);
//!   `Ok(None)` when `PMI_FD` is unset. Bounds: `PMI_SIZE` is `1..=`[`crate::MAX_RANKS`],
//!   `PMI_JOBID` at most [`MAX_JOBID`] bytes without `;`, `=`, spaces or control
//!   characters (it travels inside a PMI-2 command); past one the error names the
//!   variable. A process started by Slurm without PMI
//!   (`SLURM_PROCID` set, no `PMI_FD`) is an error saying how to launch.
//! * [`Pmi::init`] speaks the PMI-2 wire protocol (a PMI-1 `cmd=init pmi_version=2`
//!   line, then `fullinit` in 6-byte-length-prefixed `cmd=…;key=value;` messages), or
//!   PMI-1 "simple" (`cmd=init pmi_version=1`, `get_maxes`, `get_my_kvsname`; newline
//!   terminated `key=value` words) when `PHALANX_PMI=1` asks for it or the server
//!   answers PMI-2's init with version 1.
//! * [`Pmi::put`], [`Pmi::fence`] (`kvs-fence` / `barrier_in`), [`Pmi::get`],
//!   [`Pmi::finalize`] are blocking with the stream's timeout; [`Pmi::fence_start`] and
//!   [`Pmi::fence_done`] split a fence so that a rank keeps serving its peers while the
//!   others arrive (Finalize). Values travel hex-encoded (no `;`, `=` or space can
//!   appear) and are at most [`MAX_VALUE`] bytes before encoding; every reply is bounded
//!   ([`MAX_REPLY`]) and an unexpected or failed reply is an error naming the command.
//! * [`abort_step`] asks the server to end the whole step (PMI-2 `abort;isworld=TRUE`,
//!   PMI-1 `abort`): `MPI_Abort`, a panic or a fatal error end every rank, as under
//!   `phalanx run`. It only writes to the PMI socket, so it is safe on any exit path;
//!   a process that exits after [`Pmi::init`] without [`Pmi::finalize`] calls it too
//!   (an `atexit` handler).

use crate::BootError;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};
use std::time::Duration;

/// Longest value [`Pmi::put`] takes (before hex encoding; Slurm's PMI-2 limit is 1024
/// characters).
pub const MAX_VALUE: usize = 500;
/// Longest `PMI_JOBID` (Slurm's are like `12.0`).
pub const MAX_JOBID: usize = 256;
/// Longest reply read from the server.
pub const MAX_REPLY: usize = 64 << 10;

/// The PMI socket and version of this process, for [`abort_step`] (-1: none).
static ABORT_FD: AtomicI32 = AtomicI32::new(-1);
static ABORT_VERSION: AtomicU8 = AtomicU8::new(0);
/// The process that initialized PMI (a forked child must not abort the step).
static ABORT_PID: AtomicI32 = AtomicI32::new(0);

/// What the PMI server put in this process's environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmiEnv {
    pub fd: RawFd,
    pub rank: u32,
    pub size: u32,
    /// `PMI_JOBID` (PMI-2's `pmijobid`), if set.
    pub jobid: Option<String>,
    /// PMI-1 asked for (`PHALANX_PMI=1`).
    pub v1: bool,
}

impl PmiEnv {
    /// Reads the PMI variables (module docs).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Option<PmiEnv>, BootError> {
        let Some(fd) = get("PMI_FD") else {
            // A task of a step of several tasks (a batch script itself is a job of one).
            let tasks = get("SLURM_STEP_NUM_TASKS").and_then(|n| n.trim().parse::<u32>().ok());
            if get("SLURM_STEP_ID").is_some() && tasks.is_some_and(|n| n > 1) {
                return Err(BootError::BadEnv(
                    "started by Slurm without PMI: launch with `srun --mpi=pmi2 PROG` (or \
                     `phalanx run` inside the allocation)"
                        .into(),
                ));
            }
            return Ok(None);
        };
        let num = |name: &str| -> Result<u32, BootError> {
            let v = get(name)
                .ok_or_else(|| BootError::BadEnv(format!("PMI_FD is set but {name} is missing")))?;
            crate::env::bounded_u32(name, &v, crate::MAX_RANKS)
        };
        let fd = fd
            .trim()
            .parse::<RawFd>()
            .ok()
            .filter(|&f| f >= 0)
            .ok_or_else(|| {
                BootError::BadEnv(format!(
                    "PMI_FD={:?} is not a descriptor",
                    crate::env::shown(&fd)
                ))
            })?;
        let (rank, size) = (num("PMI_RANK")?, num("PMI_SIZE")?);
        if size == 0 || rank >= size {
            return Err(BootError::BadEnv(format!(
                "PMI_RANK={rank} is out of range for PMI_SIZE={size}"
            )));
        }
        let jobid = get("PMI_JOBID");
        if let Some(j) = &jobid {
            let plain = |c: char| !(c == ';' || c == '=' || c.is_whitespace() || c.is_control());
            if j.len() > MAX_JOBID || !j.chars().all(plain) {
                return Err(BootError::BadEnv(format!(
                    "PMI_JOBID={:?} ({} bytes) is not at most {MAX_JOBID} bytes without \
                     ';', '=', spaces or control characters",
                    crate::env::shown(j),
                    j.len()
                )));
            }
        }
        Ok(Some(PmiEnv {
            fd,
            rank,
            size,
            jobid,
            v1: get("PHALANX_PMI").is_some_and(|v| v.trim() == "1"),
        }))
    }
}

/// A connection to the PMI server.
#[derive(Debug)]
pub struct Pmi {
    s: UnixStream,
    v1: bool,
    /// PMI-1: the KVS name.
    kvsname: String,
    /// Bytes read past the last reply.
    buf: Vec<u8>,
    fence_pending: bool,
}

impl Pmi {
    /// Takes over `PMI_FD` and initializes (module docs), every read bounded by
    /// `timeout`.
    pub fn init(env: &PmiEnv, timeout: Duration) -> Result<Pmi, BootError> {
        // SAFETY: fcntl(F_GETFD) only checks that the descriptor is open.
        if unsafe { libc::fcntl(env.fd, libc::F_GETFD) } < 0 {
            return Err(BootError::BadEnv(format!(
                "PMI_FD={} is not an open descriptor",
                env.fd
            )));
        }
        // SAFETY: the descriptor is open (checked above) and the PMI server handed it to
        // this process for this purpose; from here on it is owned by the stream.
        let s = unsafe { UnixStream::from_raw_fd(env.fd) };
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        let mut p = Pmi {
            s,
            v1: env.v1,
            kvsname: String::new(),
            buf: Vec::new(),
            fence_pending: false,
        };
        let want = if p.v1 {
            "1 pmi_subversion=1"
        } else {
            "2 pmi_subversion=0"
        };
        // One write: Slurm reads the init line with a single read.
        p.s.write_all(format!("cmd=init pmi_version={want}\n").as_bytes())?;
        let r = p.read_line()?;
        expect(&r, "response_to_init", "init")?;
        let version = field(&r, "pmi_version").unwrap_or("2");
        p.v1 = version == "1";
        if p.v1 {
            p.cmd1("get_maxes", &[])?;
            let r = p.cmd1("get_my_kvsname", &[])?;
            p.kvsname = field(&r, "kvsname")
                .ok_or_else(|| bad("get_my_kvsname", &r))?
                .to_string();
        } else {
            let jobid = env.jobid.clone().unwrap_or_else(|| "0".into());
            let rank = env.rank.to_string();
            let r = p.cmd2(
                "fullinit",
                &[
                    ("pmijobid", &jobid),
                    ("pmirank", &rank),
                    ("threaded", "FALSE"),
                ],
            )?;
            let size = field(&r, "size").and_then(|s| s.parse::<u32>().ok());
            if size.is_some_and(|s| s != env.size) {
                return Err(BootError::Protocol(format!(
                    "PMI says the job has {} ranks, PMI_SIZE says {}",
                    size.unwrap_or(0),
                    env.size
                )));
            }
        }
        // A descriptor of its own: at exit the engine (thread-local) may already have
        // dropped the stream when the exit handler runs.
        // SAFETY: fcntl(F_DUPFD_CLOEXEC) on the open PMI socket; the copy is ours.
        let dup = unsafe { libc::fcntl(p.s.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
        if dup >= 0 {
            let old = ABORT_FD.swap(dup, Ordering::SeqCst);
            if old >= 0 {
                // SAFETY: a descriptor an earlier init duplicated for this purpose.
                unsafe { libc::close(old) };
            }
        }
        ABORT_VERSION.store(if p.v1 { 1 } else { 2 }, Ordering::SeqCst);
        ABORT_PID.store(std::process::id() as i32, Ordering::SeqCst);
        static AT_EXIT: std::sync::Once = std::sync::Once::new();
        // SAFETY: atexit registers a plain extern "C" function, once.
        AT_EXIT.call_once(|| unsafe {
            libc::atexit(exit_without_finalize);
        });
        Ok(p)
    }

    /// The socket (readable when a started fence completes).
    pub fn fd(&self) -> RawFd {
        self.s.as_raw_fd()
    }

    /// Puts `key` = `value` into the job's key-value space (visible after a fence).
    pub fn put(&mut self, key: &str, value: &[u8]) -> Result<(), BootError> {
        if value.len() > MAX_VALUE {
            return Err(BootError::Protocol(format!(
                "PMI value for {key} is {} bytes, more than {MAX_VALUE}",
                value.len()
            )));
        }
        let hex = hex::encode(value);
        if self.v1 {
            let kvs = self.kvsname.clone();
            self.cmd1("put", &[("kvsname", &kvs), ("key", key), ("value", &hex)])?;
        } else {
            self.cmd2("kvs-put", &[("key", key), ("value", &hex)])?;
        }
        Ok(())
    }

    /// The value of `key` put by any rank before the last fence.
    pub fn get(&mut self, key: &str) -> Result<Vec<u8>, BootError> {
        let r = if self.v1 {
            let kvs = self.kvsname.clone();
            self.cmd1("get", &[("kvsname", &kvs), ("key", key)])?
        } else {
            self.cmd2("kvs-get", &[("jobid", ""), ("srcid", "-1"), ("key", key)])?
        };
        if !self.v1 && field(&r, "found") != Some("TRUE") {
            return Err(BootError::Protocol(format!("PMI has no value for {key}")));
        }
        let hex = field(&r, "value").ok_or_else(|| bad("get", &r))?;
        unhex(hex).ok_or_else(|| BootError::Protocol(format!("PMI value of {key} is garbled")))
    }

    /// Every rank's puts become visible to every rank (a barrier).
    pub fn fence(&mut self) -> Result<(), BootError> {
        self.fence_start()?;
        self.fence_wait()
    }

    /// Starts a fence without waiting for the others.
    pub fn fence_start(&mut self) -> Result<(), BootError> {
        if self.v1 {
            self.s.write_all(b"cmd=barrier_in\n")?;
        } else {
            self.s.write_all(frame2("kvs-fence", &[]).as_bytes())?;
        }
        self.fence_pending = true;
        Ok(())
    }

    /// Whether the started fence completed (never blocks).
    pub fn fence_done(&mut self) -> Result<bool, BootError> {
        if !self.fence_pending {
            return Ok(false);
        }
        let mut pfd = libc::pollfd {
            fd: self.s.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd on a socket we own; no waiting.
        let ready = unsafe { libc::poll(&mut pfd, 1, 0) } == 1;
        if !ready && !self.has_reply() {
            return Ok(false);
        }
        self.fence_wait()?;
        Ok(true)
    }

    fn fence_wait(&mut self) -> Result<(), BootError> {
        self.fence_pending = false;
        if self.v1 {
            let r = self.read_line()?;
            expect(&r, "barrier_out", "barrier_in")
        } else {
            let r = self.read2()?;
            expect(&r, "kvs-fence-response", "kvs-fence")
        }
    }

    /// Ends this process's use of PMI.
    pub fn finalize(&mut self) -> Result<(), BootError> {
        let dup = ABORT_FD.swap(-1, Ordering::SeqCst);
        if dup >= 0 {
            // SAFETY: the copy `init` made; nothing else uses it.
            unsafe { libc::close(dup) };
        }
        if self.v1 {
            self.s.write_all(b"cmd=finalize\n")?;
            let r = self.read_line()?;
            expect(&r, "finalize_ack", "finalize")
        } else {
            self.cmd2("finalize", &[]).map(drop)
        }
    }

    fn cmd1(&mut self, cmd: &str, args: &[(&str, &str)]) -> Result<String, BootError> {
        let mut line = format!("cmd={cmd}");
        for (k, v) in args {
            line += &format!(" {k}={v}");
        }
        line.push('\n');
        self.s.write_all(line.as_bytes())?;
        let r = self.read_line()?;
        let want = match cmd {
            "get_maxes" => "maxes",
            "get_my_kvsname" => "my_kvsname",
            "put" => "put_result",
            "get" => "get_result",
            other => other,
        };
        expect(&r, want, cmd)?;
        Ok(r)
    }

    fn cmd2(&mut self, cmd: &str, args: &[(&str, &str)]) -> Result<String, BootError> {
        self.s.write_all(frame2(cmd, args).as_bytes())?;
        let r = self.read2()?;
        expect(&r, &format!("{cmd}-response"), cmd)?;
        Ok(r)
    }

    fn has_reply(&self) -> bool {
        if self.v1 {
            self.buf.contains(&b'\n')
        } else {
            self.buf.len() >= 6
        }
    }

    /// Reads until `buf` holds `n` bytes (bounded).
    fn fill(&mut self, n: usize) -> Result<(), BootError> {
        if n > MAX_REPLY {
            return Err(BootError::Protocol(format!(
                "PMI reply longer than {MAX_REPLY} bytes"
            )));
        }
        let mut chunk = [0u8; 4096];
        while self.buf.len() < n {
            let got = read_retrying(&mut self.s, &mut chunk)?;
            if got == 0 {
                return Err(BootError::LauncherGone);
            }
            self.buf.extend_from_slice(&chunk[..got]);
        }
        Ok(())
    }

    fn read_line(&mut self) -> Result<String, BootError> {
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                return Ok(String::from_utf8_lossy(&line[..i]).into_owned());
            }
            if self.buf.len() > MAX_REPLY {
                return Err(BootError::Protocol("PMI reply line too long".into()));
            }
            let got = read_retrying(&mut self.s, &mut chunk)?;
            if got == 0 {
                return Err(BootError::LauncherGone);
            }
            self.buf.extend_from_slice(&chunk[..got]);
        }
    }

    fn read2(&mut self) -> Result<String, BootError> {
        self.fill(6)?;
        let len: usize = std::str::from_utf8(&self.buf[..6])
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| BootError::Protocol("PMI-2 reply without a length".into()))?;
        self.fill(6 + len)?;
        let body: Vec<u8> = self.buf.drain(..6 + len).skip(6).collect();
        Ok(String::from_utf8_lossy(&body).into_owned())
    }
}

/// A read that a signal (Slurm's SIGTSTP/SIGCONT during start-up) does not end.
fn read_retrying(s: &mut UnixStream, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match s.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// A PMI-2 message: 6-byte length, then `cmd=CMD;k=v;…`.
fn frame2(cmd: &str, args: &[(&str, &str)]) -> String {
    let mut body = format!("cmd={cmd};");
    for (k, v) in args {
        body += &format!("{k}={v};");
    }
    format!("{:<6}{body}", body.len())
}

/// The value of `key` in a reply (`k=v` separated by `;` or spaces).
fn field<'a>(reply: &'a str, key: &str) -> Option<&'a str> {
    reply
        .split([';', ' '])
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

fn bad(cmd: &str, reply: &str) -> BootError {
    let shown: String = reply.chars().take(200).collect();
    BootError::Protocol(format!("PMI {cmd}: unexpected reply {shown:?}"))
}

/// A reply must be `cmd=want` with `rc=0` (when it says).
fn expect(reply: &str, want: &str, cmd: &str) -> Result<(), BootError> {
    if field(reply, "cmd") != Some(want) {
        return Err(bad(cmd, reply));
    }
    match field(reply, "rc") {
        Some(rc) if rc != "0" => Err(BootError::Protocol(format!(
            "PMI {cmd} failed (rc={rc}{})",
            field(reply, "errmsg")
                .or(field(reply, "msg"))
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        ))),
        _ => Ok(()),
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    hex::decode(s).ok()
}

/// At exit: a rank that bootstrapped through PMI and did not finalize (it exited with
/// `std::process::exit` in the middle of the job, say) ends the step, as `phalanx run`
/// ends a job whose rank exits without completing Finalize.
extern "C" fn exit_without_finalize() {
    abort_step("a rank exited without completing Finalize");
}

/// Asks the PMI server to end the whole step, if this process bootstrapped through
/// PMI (module docs); does nothing otherwise.
pub fn abort_step(msg: &str) {
    let fd = ABORT_FD.load(Ordering::SeqCst);
    if fd < 0 || ABORT_PID.load(Ordering::SeqCst) != std::process::id() as i32 {
        return;
    }
    let clean: String = msg
        .chars()
        .map(|c| if c == ';' || c == '\n' { ',' } else { c })
        .take(200)
        .collect();
    let line = if ABORT_VERSION.load(Ordering::SeqCst) == 1 {
        "cmd=abort\n".to_string()
    } else {
        frame2("abort", &[("isworld", "TRUE"), ("msg", &clean)])
    };
    // SAFETY: write(2) of a buffer we own to the PMI socket; errors are irrelevant on an
    // exit path.
    unsafe { libc::write(fd, line.as_ptr().cast(), line.len()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_and_fields() {
        assert_eq!(
            frame2("kvs-put", &[("key", "a"), ("value", "00ff")]),
            "29    cmd=kvs-put;key=a;value=00ff;"
        );
        let r = "cmd=kvs-get-response;rc=0;found=TRUE;value=6869;";
        assert_eq!(field(r, "value"), Some("6869"));
        assert_eq!(unhex("6869").unwrap(), b"hi");
        assert!(unhex("6").is_none() && unhex("zz").is_none());
        assert!(expect("cmd=barrier_out rc=0", "barrier_out", "barrier_in").is_ok());
        let e = expect(
            "cmd=kvs-fence-response;rc=3;errmsg=boom;",
            "kvs-fence-response",
            "x",
        );
        assert!(e.unwrap_err().to_string().contains("rc=3: boom"));
    }

    #[test]
    fn environment() {
        let look = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(PmiEnv::from_lookup(look(&[])).unwrap(), None);
        let e = PmiEnv::from_lookup(look(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_STEP_ID", "0"),
            ("SLURM_STEP_NUM_TASKS", "2"),
        ]));
        assert!(e.unwrap_err().to_string().contains("--mpi=pmi2"));
        // A batch script (no step) or a step of one task is a job of one.
        let one = look(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "8")]);
        assert_eq!(PmiEnv::from_lookup(one).unwrap(), None);
        let ok = PmiEnv::from_lookup(look(&[
            ("PMI_FD", "5"),
            ("PMI_RANK", "1"),
            ("PMI_SIZE", "4"),
            ("PMI_JOBID", "12.0"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((ok.fd, ok.rank, ok.size, ok.v1), (5, 1, 4, false));
        assert!(PmiEnv::from_lookup(look(&[
            ("PMI_FD", "5"),
            ("PMI_RANK", "4"),
            ("PMI_SIZE", "4")
        ]))
        .is_err());
    }

    #[test]
    fn environment_bounds() {
        let with = |vars: Vec<(&'static str, String)>| {
            PmiEnv::from_lookup(move |k: &str| {
                vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
            })
        };
        let base = |size: &str, jobid: String| {
            vec![
                ("PMI_FD", "5".to_string()),
                ("PMI_RANK", "0".to_string()),
                ("PMI_SIZE", size.to_string()),
                ("PMI_JOBID", jobid),
            ]
        };
        let ok = with(base("65536", "j".repeat(MAX_JOBID))).unwrap().unwrap();
        assert_eq!(ok.size, 65536);
        let long = "9".repeat(1 << 20);
        for (vars, name) in [
            (base("65537", "1".into()), "PMI_SIZE"),
            (base("18446744073709551615", "1".into()), "PMI_SIZE"),
            (base(&long, "1".into()), "PMI_SIZE"),
            (base("4", "j".repeat(MAX_JOBID + 1)), "PMI_JOBID"),
            (base("4", "x".repeat(1 << 20)), "PMI_JOBID"),
            (base("4", "1;cmd=abort".into()), "PMI_JOBID"),
        ] {
            let e = with(vars).unwrap_err().to_string();
            assert!(e.contains(name) && e.len() < 1024, "{e}");
        }
        let mut fd = base("4", "1".into());
        fd[0].1 = "1".repeat(1 << 20);
        let e = with(fd).unwrap_err().to_string();
        assert!(e.contains("PMI_FD") && e.len() < 1024, "{e}");
    }

    /// A PMI-2 and a PMI-1 exchange against a scripted server on a socket pair: the
    /// client's bytes are what the servers expect.
    #[test]
    fn talks_both_versions() {
        for v1 in [false, true] {
            let (client, mut server) = UnixStream::pair().unwrap();
            let fd = client.as_raw_fd();
            std::mem::forget(client); // owned by the Pmi below
            let t = std::thread::spawn(move || {
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                let replies: Vec<String> = if v1 {
                    vec![
                        "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n".into(),
                        "cmd=maxes rc=0 kvsname_max=64 keylen_max=64 vallen_max=1024\n".into(),
                        "cmd=my_kvsname rc=0 kvsname=kvs_7\n".into(),
                        "cmd=put_result rc=0\n".into(),
                        "cmd=barrier_out rc=0\n".into(),
                        "cmd=get_result rc=0 value=6869\n".into(),
                        "cmd=finalize_ack\n".into(),
                    ]
                } else {
                    let mut v =
                        vec!["cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n"
                            .to_string()];
                    for body in [
                        "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=1;size=4;",
                        "cmd=kvs-put-response;rc=0;",
                        "cmd=kvs-fence-response;rc=0;",
                        "cmd=kvs-get-response;rc=0;found=TRUE;value=6869;",
                        "cmd=finalize-response;rc=0;",
                    ] {
                        v.push(format!("{:<6}{body}", body.len()));
                    }
                    v
                };
                for r in replies {
                    let n = server.read(&mut buf).unwrap();
                    got.extend_from_slice(&buf[..n]);
                    server.write_all(r.as_bytes()).unwrap();
                }
                String::from_utf8(got).unwrap()
            });
            let env = PmiEnv {
                fd,
                rank: 1,
                size: 4,
                jobid: Some("12.0".into()),
                v1,
            };
            let mut p = Pmi::init(&env, Duration::from_secs(5)).unwrap();
            p.put("k", b"hi").unwrap();
            p.fence().unwrap();
            assert_eq!(p.get("k").unwrap(), b"hi");
            p.finalize().unwrap();
            let sent = t.join().unwrap();
            if v1 {
                assert!(sent.starts_with("cmd=init pmi_version=1 pmi_subversion=1\n"));
                assert!(sent.contains("cmd=put kvsname=kvs_7 key=k value=6869\n"));
                assert!(sent.contains("cmd=barrier_in\n"));
            } else {
                assert!(sent.starts_with("cmd=init pmi_version=2 pmi_subversion=0\n"));
                assert!(sent.contains("cmd=fullinit;pmijobid=12.0;pmirank=1;threaded=FALSE;"));
                assert!(sent.contains("cmd=kvs-fence;"));
            }
        }
    }
}
