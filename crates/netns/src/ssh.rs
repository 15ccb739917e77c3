//! Test hosts reached over real ssh: an sshd (OpenSSH, from the Debian package
//! `openssh-server`) in every namespace of a [`TestNet`], with keys made for the test.
//!
//! Contract:
//! * [`SshNet::create`]`(n)` makes a [`TestNet`] of `n` namespaces, a directory of its own
//!   (`/tmp/phalanx-sshnet-<pid>-<k>`) with a host key, a client key, `authorized_keys`,
//!   `known_hosts` (the host key for every namespace address: strict host key checking
//!   stays on) and an ssh client configuration, and starts `sshd -D` in each namespace
//!   on port 22, as root, key login only. It returns once every sshd accepts
//!   connections (bounded by [`READY_TIMEOUT`]).
//! * [`SshNet::launcher_cmd`] is the remote shell to hand `phalanx run --launcher-cmd`.
//! * [`SshNet::strays`] lists, per namespace, the processes in it other than its sshd
//!   listener: what a launch left behind.
//! * `Drop` stops every sshd by its pid (SIGTERM, then SIGKILL), kills whatever is left
//!   in the namespaces, removes the directory (and sshd's `/run/sshd` if it made it),
//!   then the namespaces. Leftovers of killed
//!   test processes (their directories name their sshd pids) are stopped by the next
//!   `create`.
//! * [`SshNet::sshd`] says where sshd is, or why ssh tests cannot run here;
//!   [`SshNet::for_test`] turns that into a skip (or a failure where CI requires sshd).

use crate::TestNet;
use std::fs;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Bound on every sshd starting to accept connections.
pub const READY_TIMEOUT: Duration = Duration::from_secs(20);
const SSHD: &str = "/usr/sbin/sshd";
const PRIVSEP: &str = "/run/sshd";
const DIR_PREFIX: &str = "phalanx-sshnet-";
static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Namespaces with an sshd each (module docs).
#[derive(Debug)]
pub struct SshNet {
    sshd: Vec<Child>,
    /// `/run/sshd` was made here (removed again on drop).
    made_privsep: bool,
    dir: PathBuf,
    // Dropped last: the namespaces outlive what runs in them.
    net: TestNet,
}

fn run(cmd: &mut Command) -> io::Result<()> {
    let out = cmd.stdin(Stdio::null()).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

fn keygen(path: &Path) -> io::Result<()> {
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "phalanx-test", "-f"])
        .arg(path))
}

impl SshNet {
    /// sshd's path, or why there is none (install `openssh-server`).
    pub fn sshd() -> Result<PathBuf, String> {
        let p = PathBuf::from(SSHD);
        if !p.exists() {
            return Err(format!(
                "{SSHD} is missing (apt-get install openssh-server)"
            ));
        }
        if Command::new("ssh-keygen").arg("-?").output().is_err() {
            return Err("ssh-keygen is missing (apt-get install openssh-client)".into());
        }
        Ok(p)
    }

    /// For tests: `n` namespaces with sshd, or `None` where sshd is missing and
    /// `PHALANX_TEST_SSH=1` is not set (it says on stderr that the test was skipped and
    /// why). Panics where CI requires sshd (`PHALANX_TEST_SSH=1`) and it is missing, or
    /// where the namespaces or sshd cannot be started.
    pub fn for_test(n: usize) -> Option<SshNet> {
        if let Err(why) = SshNet::sshd() {
            let required = std::env::var("PHALANX_TEST_SSH").is_ok_and(|v| v == "1");
            assert!(!required, "PHALANX_TEST_SSH=1 but {why}");
            eprintln!("skipped: {why} (CI installs it and requires these tests)");
            return None;
        }
        Some(SshNet::create(n).expect("namespaces with sshd for an ssh launch test"))
    }

    /// `n` namespaces, each with a running sshd (module docs).
    pub fn create(n: usize) -> io::Result<SshNet> {
        let sshd = SshNet::sshd().map_err(io::Error::other)?;
        stop_stale();
        let net = TestNet::create(n)?;
        let dir = std::env::temp_dir().join(format!(
            "{DIR_PREFIX}{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir)?;
        let mut me = SshNet {
            sshd: Vec::new(),
            made_privsep: false,
            dir,
            net,
        };
        me.start(&sshd)?;
        Ok(me)
    }

    fn start(&mut self, sshd: &Path) -> io::Result<()> {
        let d = self.dir.clone();
        let (host_key, id) = (d.join("host_key"), d.join("id"));
        keygen(&host_key)?;
        keygen(&id)?;
        fs::copy(d.join("id.pub"), d.join("authorized_keys"))?;
        let host_pub = fs::read_to_string(d.join("host_key.pub"))?;
        let host_pub = host_pub.split_whitespace().take(2).collect::<Vec<_>>();
        let known: String = self
            .net
            .ips()
            .iter()
            .map(|ip| format!("{ip} {}\n", host_pub.join(" ")))
            .collect();
        fs::write(d.join("known_hosts"), known)?;
        fs::write(
            d.join("sshd_config"),
            format!(
                "Port 22\nHostKey {hk}\nAuthorizedKeysFile {ak}\nPidFile none\n\
                 PermitRootLogin prohibit-password\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n\
                 MaxStartups 100:30:200\nMaxSessions 100\nX11Forwarding no\n\
                 PrintMotd no\nLogLevel ERROR\n",
                hk = host_key.display(),
                ak = d.join("authorized_keys").display()
            ),
        )?;
        fs::write(
            d.join("ssh_config"),
            format!(
                "Host *\n  User root\n  IdentityFile {id}\n  IdentitiesOnly yes\n\
                 \x20 UserKnownHostsFile {kh}\n  StrictHostKeyChecking yes\n\
                 \x20 BatchMode yes\n  ConnectTimeout 10\n  LogLevel ERROR\n",
                id = id.display(),
                kh = d.join("known_hosts").display()
            ),
        )?;
        // sshd's privilege-separation directory (compiled in).
        if !Path::new(PRIVSEP).exists() {
            fs::create_dir_all(PRIVSEP)?;
            self.made_privsep = true;
        }
        let mut pids = String::new();
        for i in 0..self.net.names().len() {
            let log = fs::File::create(d.join(format!("sshd-{i}.log")))?;
            let child = self
                .net
                .command(i, sshd)
                .args(["-D", "-e", "-f"])
                .arg(d.join("sshd_config"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()?;
            pids.push_str(&format!("{}\n", child.id()));
            self.sshd.push(child);
        }
        fs::write(d.join("sshd.pids"), pids)?;
        let deadline = Instant::now() + READY_TIMEOUT;
        for (i, &ip) in self.net.ips().iter().enumerate() {
            let addr = SocketAddr::from((ip, 22));
            while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
                if let Ok(Some(st)) = self.sshd[i].try_wait() {
                    let log =
                        fs::read_to_string(d.join(format!("sshd-{i}.log"))).unwrap_or_default();
                    return Err(io::Error::other(format!("sshd {i} ended ({st}): {log}")));
                }
                if Instant::now() >= deadline {
                    return Err(io::Error::other(format!(
                        "sshd {i} does not accept at {addr}"
                    )));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(())
    }

    /// The namespaces.
    pub fn net(&self) -> &TestNet {
        &self.net
    }

    /// The remote shell for `phalanx run --launcher-cmd`: ssh with this net's keys.
    pub fn launcher_cmd(&self) -> String {
        format!("ssh -F {}", self.dir.join("ssh_config").display())
    }

    /// A hostfile naming every namespace by its address, `slots` each.
    pub fn hostfile(&self, slots: u32) -> String {
        self.net
            .ips()
            .iter()
            .map(|ip| format!("{ip} slots={slots}\n"))
            .collect()
    }

    /// Per namespace, the pids in it other than its sshd listener.
    pub fn strays(&self) -> Vec<Vec<u32>> {
        self.net
            .names()
            .iter()
            .zip(&self.sshd)
            .map(|(ns, sshd)| {
                ns_pids(ns)
                    .into_iter()
                    .filter(|&p| p != sshd.id())
                    .collect()
            })
            .collect()
    }

    /// Waits (up to `bound`) until no namespace holds a stray; the strays then left.
    pub fn wait_no_strays(&self, bound: Duration) -> Vec<Vec<u32>> {
        let deadline = Instant::now() + bound;
        loop {
            let s = self.strays();
            if s.iter().all(Vec::is_empty) || Instant::now() >= deadline {
                return s;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What process `pid` runs (its command line), for failure messages.
    pub fn describe(pid: u32) -> String {
        fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_else(|_| "(gone)".into())
    }
}

impl Drop for SshNet {
    fn drop(&mut self) {
        for c in &mut self.sshd {
            // SAFETY: kill(2) on our own unreaped child; no memory is involved.
            unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        for c in &mut self.sshd {
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in self.net.names() {
            for p in ns_pids(ns) {
                // SAFETY: as above; these are processes in our test namespace.
                unsafe { libc::kill(p as libc::pid_t, libc::SIGKILL) };
            }
        }
        let _ = fs::remove_dir_all(&self.dir);
        if self.made_privsep {
            let _ = fs::remove_dir(PRIVSEP); // only if empty: another sshd may use it
        }
    }
}

/// The pids in namespace `ns` (`ip netns pids`).
fn ns_pids(ns: &str) -> Vec<u32> {
    Command::new("ip")
        .args(["netns", "pids", ns])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Stops the sshd of test processes that died without dropping their [`SshNet`].
fn stop_stale() {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(owner) = name
            .strip_prefix(DIR_PREFIX)
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{owner}")).exists() {
            continue;
        }
        let pids = fs::read_to_string(e.path().join("sshd.pids")).unwrap_or_default();
        for pid in pids.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
            // Only a test sshd: its command line names this directory's configuration
            // (a reused pid may be anyone's, the machine's own sshd included).
            let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let dir = e.path().to_string_lossy().into_owned();
            if String::from_utf8_lossy(&cmdline).contains(&dir) {
                // SAFETY: kill(2) on a recorded test sshd that is still an sshd.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        let _ = fs::remove_dir_all(e.path());
    }
}
