//! The job manager's hooks on real processes: every rank halts its links in the middle of
//! traffic, drains what is in flight, saves what the links hold, stays stopped, restores
//! and resumes — over shared memory, go-back-n, careful and go-back-n under injected
//! faults — and every message still arrives intact and in order. A rank that stays out
//! of the library makes the others' drain end in an error naming it. The same, driven by
//! the launcher: `phalanx run` suspended with SIGTSTP and continued with SIGCONT, the
//! ranks exchanging "running again" before their links take new data.

mod common;
use common::*;
use std::time::Duration;

fn switch_job(env: &[(&str, &str)], args: &[&str]) -> Run {
    let exe = example("switch").display().to_string();
    let mut a = vec!["-n", "4", exe.as_str()];
    a.extend_from_slice(args);
    run(&a, env, Duration::from_secs(120))
}

fn assert_all_switched(r: &Run, what: &str) {
    assert!(r.ok(), "{what}:\n{}", r.dump());
    assert_eq!(
        r.stdout.matches("switches ok").count(),
        4,
        "{what}:\n{}",
        r.dump()
    );
}

#[test]
fn mr_switch_on_shared_memory_saves_the_rings() {
    let r = switch_job(&[("PHALANX_TRANSPORT", "shm")], &["64", "200", "2"]);
    assert_all_switched(&r, "shm");
}

#[test]
fn mr_switch_on_udp_go_back_n() {
    let r = switch_job(&[("PHALANX_TRANSPORT", "udp")], &["64", "200", "2"]);
    assert_all_switched(&r, "udp");
}

#[test]
fn mr_switch_on_careful_links() {
    let env = [("PHALANX_TRANSPORT", "udp"), ("PHALANX_RELIABLE_NET", "1")];
    let r = switch_job(&env, &["64", "200", "2"]);
    assert_all_switched(&r, "careful");
}

#[test]
fn mr_switch_under_loss() {
    // Go-back-n keeps recovering while halted, so the drain completes under loss; the
    // stop is longer than the retransmission clamp (resumed timers do not count it).
    let env = [("PHALANX_FAULTS", "loss=0.1,dup=0.02,reorder=0.05,seed=7")];
    let r = switch_job(&env, &["32", "500", "2"]);
    assert_all_switched(&r, "faults");
}

#[test]
fn mr_switch_drain_names_a_rank_outside_the_library() {
    let r = switch_job(
        &[("PHALANX_TRANSPORT", "udp")],
        &["64", "0", "1", "1", "500"],
    );
    assert!(!r.ok(), "the drain should have failed:\n{}", r.dump());
    assert!(
        r.stderr.contains("did not quiesce within") && r.stderr.contains("[1]"),
        "{}",
        r.dump()
    );
}

/// `phalanx run` suspended (SIGTSTP, as Ctrl-Z sends) and continued (SIGCONT): the launcher
/// halts every rank's links, stops the job and itself, and on SIGCONT resumes it; the job
/// completes with every checksum right. Returns the launcher's stderr.
fn suspend_and_continue(env: &[(&str, &str)], stress_args: &[&str]) -> String {
    use std::io::Read;
    use std::process::{Command, Stdio};
    use std::time::Instant;
    let mut cmd = Command::new(phalanx());
    cmd.args(["run", "-n", "4"])
        .arg(example("stress"))
        .args(stress_args)
        .env_remove("PHALANX_FAULTS")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn the launcher");
    let pid = child.id() as i32;
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let state = || -> Option<char> {
        let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        s.rsplit(')').next()?.trim_start().chars().next()
    };
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, libc::SIGTSTP) };
    // The launcher stops itself once every rank halted (or the halt bound passed).
    let t = Instant::now();
    while state() != Some('T') && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let stopped = state() == Some('T');
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let t = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        if t.elapsed() > Duration::from_secs(120) {
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            break child.wait().expect("wait");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (stdout, stderr) = (out_t.join().unwrap(), err_t.join().unwrap());
    let dump = format!("{status:?}\n{stdout}\n{stderr}");
    assert!(stopped, "the launcher never stopped\n{dump}");
    assert!(status.success(), "{dump}");
    assert_eq!(stdout.matches("all checksums ok").count(), 4, "{dump}");
    assert!(stderr.contains("job halted in"), "{dump}");
    assert!(stderr.contains("job continued after"), "{dump}");
    assert!(!stderr.contains("did not halt"), "{dump}");
    stderr
}

#[test]
fn mr_suspend_and_continue_on_shared_memory() {
    suspend_and_continue(&[("PHALANX_TRANSPORT", "shm")], &["20", "200", "1"]);
}

/// Every rank's value of counter `key` in PHALANX_STATS output.
fn values(stderr: &str, key: &str) -> Vec<u64> {
    stderr
        .split_whitespace()
        .filter_map(|w| w.strip_prefix(key))
        .filter_map(|v| v.parse().ok())
        .collect()
}

#[test]
fn mr_suspend_and_continue_over_udp() {
    let env = [("PHALANX_TRANSPORT", "udp"), ("PHALANX_STATS", "1")];
    let stderr = suspend_and_continue(&env, &["20", "200", "1"]);
    // The resume exchange ran: ranks announced they run again (a rank that heard every
    // peer's announcement before its own turn only answers), and every rank heard each
    // of its three peers before its links took new data.
    let sent = values(&stderr, "resume_sent=");
    assert_eq!(sent.len(), 4, "{stderr}");
    assert!(sent.iter().sum::<u64>() >= 3, "{sent:?}\n{stderr}");
    assert_eq!(values(&stderr, "resume_missing="), [0, 0, 0, 0], "{stderr}");
}

#[test]
fn mr_suspend_and_continue_under_loss() {
    // Lost announcements and answers are sent again: every rank still hears every peer.
    let env = [
        ("PHALANX_TRANSPORT", "udp"),
        ("PHALANX_STATS", "1"),
        ("PHALANX_FAULTS", "loss=0.2,dup=0.05,reorder=0.05,seed=11"),
    ];
    let stderr = suspend_and_continue(&env, &["8", "100", "1"]);
    assert_eq!(values(&stderr, "resume_missing="), [0, 0, 0, 0], "{stderr}");
}
