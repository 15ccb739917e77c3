//! The job manager on this machine (`phalanx gang`): a master started with `up`, jobs
//! that share the nodes alternate between running and suspended (each switch halts the
//! outgoing job's network through its launcher), finish with correct results and their
//! exit codes; `cancel`, `logs`, `--wait`, bad input and `down` behave as documented.
//! Ranks are started by the node daemons; with `--netns` each node is a network
//! namespace, and a node whose daemon is killed takes its jobs down (F, naming it)
//! without leaving a process behind.

mod common;
use common::*;
use std::process::Command;
use std::time::{Duration, Instant};

struct Cluster {
    dir: std::path::PathBuf,
}

impl Cluster {
    fn gang(&self, args: &[&str]) -> Run {
        let mut cmd = Command::new(phalanx());
        cmd.arg("gang").arg("--dir").arg(&self.dir).args(args);
        cmd.env_remove("PHALANX_FAULTS").env_remove("PHALANX_BOOT");
        run_cmd(cmd, Duration::from_secs(120))
    }

    fn states(&self) -> Vec<(u64, String)> {
        let r = self.gang(&["queue", "--json"]);
        assert!(r.ok(), "{}", r.dump());
        let v: serde_json::Value = serde_json::from_str(&r.stdout).expect("queue --json");
        v.as_array()
            .expect("an array")
            .iter()
            .map(|j| {
                (
                    j["id"].as_u64().unwrap(),
                    j["state"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }
}

impl Cluster {
    /// Every job's log and the master's, for a failure message.
    fn all_logs(&self) -> String {
        let mut out = String::new();
        for (id, st) in self.states() {
            out += &format!(
                "--- job {id} ({st})\n{}",
                self.gang(&["logs", &id.to_string()]).stdout
            );
        }
        out + "--- master\n"
            + &std::fs::read_to_string(self.dir.join("master.log")).unwrap_or_default()
    }

    /// A cluster of two nodes with a 200 ms quantum in a fresh directory named `name`.
    fn up(name: &str) -> Cluster {
        Cluster::up_with(name, &["--nodes", "2", "--quantum", "200"])
    }

    /// A cluster brought up with `args` in a fresh directory named `name`.
    fn up_with(name: &str, args: &[&str]) -> Cluster {
        let c = Cluster {
            dir: std::env::temp_dir().join(format!("phalanx-gang-{name}-{}", std::process::id())),
        };
        let _ = std::fs::remove_dir_all(&c.dir);
        let mut v = vec!["up"];
        v.extend_from_slice(args);
        let r = c.gang(&v);
        assert!(r.ok() && r.stdout.contains("master pid"), "{}", r.dump());
        c
    }

    /// Submits `args`; the job id.
    fn submit(&self, args: &[&str]) -> u64 {
        let mut v = vec!["submit"];
        v.extend_from_slice(args);
        let r = self.gang(&v);
        assert!(r.ok(), "{}", r.dump());
        r.stdout.trim().parse().expect("a job id")
    }

    fn state(&self, id: u64) -> String {
        let s = self.states();
        s.iter().find(|(i, _)| *i == id).expect("the job").1.clone()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.gang(&["down"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn mr_gang_jobs_alternate_and_finish() {
    let c = Cluster::up("alternate");
    let again = c.gang(&["up", "--nodes", "2"]);
    assert!(
        !again.ok() && again.stderr.contains("already up"),
        "{}",
        again.dump()
    );
    let master_pid: i32 = std::fs::read_to_string(c.dir.join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();

    // A command that does not know the cluster's secret is refused: a copy of the
    // cluster's directory (same port) with another secret in it.
    let stranger = c.dir.with_extension("stranger");
    let _ = std::fs::remove_dir_all(&stranger);
    std::fs::create_dir_all(&stranger).unwrap();
    std::fs::copy(c.dir.join("port"), stranger.join("port")).unwrap();
    std::fs::write(stranger.join("secret"), "00".repeat(32)).unwrap();
    let mut cmd = Command::new(phalanx());
    cmd.arg("gang").arg("--dir").arg(&stranger).arg("queue");
    let r = run_cmd(cmd, Duration::from_secs(60));
    assert!(
        !r.ok() && r.stderr.contains("not authenticated"),
        "{}",
        r.dump()
    );
    let _ = std::fs::remove_dir_all(&stranger);

    // Bad input: one line each, non-zero.
    let stress = example("stress").display().to_string();
    for (args, want) in [
        (
            vec!["submit", "-n", "4", "--nodes", "3", &stress],
            "has 2 up",
        ),
        (
            vec!["submit", "-n", "2", "/no/such/program"],
            "does not exist",
        ),
        (vec!["cancel", "999"], "no job 999"),
    ] {
        let r = c.gang(&args);
        assert!(!r.ok() && r.stderr.contains(want), "{args:?}\n{}", r.dump());
        assert_eq!(r.stderr.lines().count(), 1, "{}", r.dump());
    }

    // Two jobs that each need both nodes: two slots, switched every quantum.
    let a = c.gang(&[
        "submit", "-n", "2", "--name", "a", &stress, "20", "200", "1",
    ]);
    let b = c.gang(&[
        "submit", "-n", "2", "--name", "b", &stress, "20", "200", "2",
    ]);
    assert!(a.ok() && b.ok(), "{}\n{}", a.dump(), b.dump());
    let ids: Vec<u64> = [&a, &b]
        .iter()
        .map(|r| r.stdout.trim().parse().unwrap())
        .collect();
    let mut seen_alternation = false;
    let t = Instant::now();
    loop {
        let s = c.states();
        let st = |id| s.iter().find(|(i, _)| *i == id).unwrap().1.clone();
        let (sa, sb) = (st(ids[0]), st(ids[1]));
        if (sa == "Running" && sb == "Suspended") || (sa == "Suspended" && sb == "Running") {
            seen_alternation = true;
        }
        if sa == "Completed" && sb == "Completed" {
            break;
        }
        assert!(
            !["Failed", "Cancelled"].contains(&sa.as_str())
                && !["Failed", "Cancelled"].contains(&sb.as_str()),
            "{s:?}\n{}",
            c.all_logs()
        );
        assert!(
            t.elapsed() < Duration::from_secs(90),
            "jobs did not finish: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(seen_alternation, "the two jobs never alternated");
    for id in &ids {
        let log = c.gang(&["logs", &id.to_string()]);
        assert_eq!(
            log.stdout.matches("all checksums ok").count(),
            2,
            "{}",
            log.dump()
        );
        assert!(log.stdout.contains("job halted in"), "{}", log.dump());
    }
    let m = c.gang(&["matrix"]);
    assert!(m.ok() && m.stdout.contains("node1"), "{}", m.dump());
    // Every switch is recorded with the time of its three stages.
    let sw = c.gang(&["switches", "--json"]);
    assert!(sw.ok(), "{}", sw.dump());
    let v: serde_json::Value = serde_json::from_str(&sw.stdout).expect("switches --json");
    let recs = v.as_array().expect("an array");
    assert!(!recs.is_empty(), "{}", sw.dump());
    assert!(
        recs.iter().any(|r| r["halt_us"].as_u64().unwrap() > 0),
        "{}",
        sw.dump()
    );

    // A failing program ends F with its code; a long job cancelled ends CA.
    let f = c.gang(&["submit", "-n", "1", "--wait", "false"]);
    assert!(!f.ok(), "{}", f.dump());
    let long = c.gang(&["submit", "-n", "2", &stress, "100000", "200", "3"]);
    let long_id = long.stdout.trim().to_string();
    std::thread::sleep(Duration::from_millis(500));
    let r = c.gang(&["cancel", &long_id]);
    assert!(r.ok(), "{}", r.dump());
    let q = c.gang(&["queue"]);
    assert!(
        q.stdout.contains(" F ") && q.stdout.contains(" CA "),
        "{}",
        q.dump()
    );

    // Output of any bytes (control bytes expand sixfold as JSON between the node
    // daemon and the launcher) reaches the log whole; the job is fine.
    let noisy = c.gang(&[
        "submit",
        "-n",
        "2",
        "--wait",
        "sh",
        "-c",
        "head -c 200000 /dev/zero | tr '\\0' '\\1'; echo; echo noisy-done",
    ]);
    assert!(
        noisy.ok() && noisy.stdout.matches("noisy-done").count() == 2,
        "{}",
        noisy.dump()
    );
    assert!(noisy.stdout.matches('\u{1}').count() >= 400_000);

    // --wait streams the output and exits with the job's code.
    let hello = example("hello").display().to_string();
    let w = c.gang(&["submit", "-n", "2", "--wait", &hello]);
    assert!(
        w.ok() && w.stdout.contains("hello from rank 1"),
        "{}",
        w.dump()
    );

    // down stops the master and leaves nothing running.
    let d = c.gang(&["down"]);
    assert!(d.ok(), "{}", d.dump());
    let t = Instant::now();
    // SAFETY: signal 0 only checks that the process exists.
    while unsafe { libc::kill(master_pid, 0) } == 0 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: as above.
    assert_ne!(
        unsafe { libc::kill(master_pid, 0) },
        0,
        "the master is still running"
    );
}

/// The master killed with SIGKILL in the middle of a run and started again: it takes
/// over both jobs (one running, one suspended), goes on switching, and both finish
/// with correct results.
#[test]
fn mr_gang_master_restart_loses_no_job() {
    let c = Cluster::up("restart");
    let stress = example("stress").display().to_string();
    let mut ids = Vec::new();
    for seed in ["1", "2"] {
        let r = c.gang(&["submit", "-n", "2", &stress, "30", "200", seed]);
        assert!(r.ok(), "{}", r.dump());
        ids.push(r.stdout.trim().parse::<u64>().unwrap());
    }
    // Both started (one running, one suspended), then the master dies.
    let t = Instant::now();
    while !c
        .states()
        .iter()
        .all(|(_, s)| s == "Running" || s == "Suspended")
    {
        assert!(t.elapsed() < Duration::from_secs(30), "{:?}", c.states());
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let pid: i32 = std::fs::read_to_string(c.dir.join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: killing the master this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    std::thread::sleep(Duration::from_millis(300));
    let r = c.gang(&["up", "--nodes", "2", "--quantum", "200"]);
    assert!(r.ok(), "{}", r.dump());
    let t = Instant::now();
    loop {
        let s = c.states();
        if s.iter().all(|(_, st)| st == "Completed") {
            break;
        }
        assert!(
            !s.iter().any(|(_, st)| st == "Failed" || st == "Cancelled"),
            "{s:?}\n{}\n{}",
            c.gang(&["queue"]).stdout,
            c.all_logs()
        );
        assert!(
            t.elapsed() < Duration::from_secs(90),
            "jobs did not finish: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for id in ids {
        let log = c.gang(&["logs", &id.to_string()]);
        assert_eq!(
            log.stdout.matches("all checksums ok").count(),
            2,
            "{}",
            log.dump()
        );
    }
}

/// Processes whose command line contains `marker` (an argument unique to a test's jobs).
fn processes_with(marker: &str) -> Vec<i32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |st| {
            st.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        });
        if args.contains(&marker.as_bytes()) && !zombie {
            v.push(pid);
        }
    }
    v
}

/// Four nodes, each a network namespace with its node daemon: three jobs that each need
/// all four nodes alternate and finish with correct results; `logs -f` and `cancel`
/// work; killing a node daemon with SIGKILL ends its jobs as F naming the node within
/// 10 s and leaves none of their processes; `down` leaves no daemon and no namespace.
#[test]
fn mr_gang_four_namespace_nodes_share_jobs_and_survive_a_node_loss() {
    let c = Cluster::up_with("netns", &["--nodes", "4", "--netns", "--quantum", "300"]);
    let nodes = c.gang(&["nodes", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&nodes.stdout).expect("nodes --json");
    let nodes = v.as_array().expect("an array");
    assert_eq!(nodes.len(), 4, "{v}");
    for n in nodes {
        assert_eq!(n["state"], "up", "{v}");
        // Each daemon listens on its namespace's own address, not loopback.
        assert!(!n["agent"].as_str().unwrap().starts_with("127."), "{v}");
    }
    let net: serde_json::Value =
        serde_json::from_slice(&std::fs::read(c.dir.join("netns.json")).unwrap()).unwrap();
    let namespaces: Vec<String> = net["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();

    let (jacobi, matmul, stress) = (
        example("jacobi").display().to_string(),
        example("matmul").display().to_string(),
        example("stress").display().to_string(),
    );
    let ids = [
        c.submit(&["-n", "4", &jacobi, "64", "300"]),
        c.submit(&["-n", "4", &matmul, "192", "2"]),
        c.submit(&["-n", "4", &stress, "20", "200", "5"]),
    ];
    let mut seen = [(false, false); 3];
    let t = Instant::now();
    loop {
        let st: Vec<String> = ids.iter().map(|&id| c.state(id)).collect();
        for (i, s) in st.iter().enumerate() {
            seen[i].0 |= s == "Running";
            seen[i].1 |= s == "Suspended";
        }
        if st.iter().all(|s| s == "Completed") {
            break;
        }
        assert!(
            !st.iter().any(|s| s == "Failed" || s == "Cancelled"),
            "{st:?}\n{}",
            c.all_logs()
        );
        assert!(t.elapsed() < Duration::from_secs(150), "{st:?}");
        std::thread::sleep(Duration::from_millis(30));
    }
    assert!(
        seen.iter().filter(|(r, s)| *r && *s).count() >= 2,
        "jobs were not time-sliced: {seen:?}"
    );
    let log = |id: u64| c.gang(&["logs", &id.to_string()]).stdout;
    assert!(log(ids[0]).contains("bit-identical"), "{}", log(ids[0]));
    assert!(
        log(ids[1]).contains("max abs error 0.000e0"),
        "{}",
        log(ids[1])
    );
    assert_eq!(
        log(ids[2]).matches("all checksums ok").count(),
        4,
        "{}",
        log(ids[2])
    );

    // logs -f follows a job to its end; cancel ends one as CA.
    let f = c.submit(&["-n", "4", &stress, "10", "100", "6"]);
    let follow = c.gang(&["logs", "-f", &f.to_string()]);
    assert_eq!(
        follow.stdout.matches("all checksums ok").count(),
        4,
        "{}",
        follow.dump()
    );
    let long = c.submit(&["-n", "4", &stress, "100000", "200", "7"]);
    std::thread::sleep(Duration::from_millis(500));
    assert!(c.gang(&["cancel", &long.to_string()]).ok());
    assert_eq!(c.state(long), "Cancelled");

    // Node 2's daemon killed: both jobs on it end F naming it, and nothing of theirs
    // is left on any node.
    let marker = "4242";
    let doomed = [
        c.submit(&["-n", "4", &stress, "100000", "200", marker]),
        c.submit(&["-n", "8", &stress, "100000", "200", marker]),
    ];
    let t = Instant::now();
    while !doomed
        .iter()
        .all(|&id| ["Running", "Suspended"].contains(&c.state(id).as_str()))
    {
        assert!(t.elapsed() < Duration::from_secs(30), "{:?}", c.states());
        std::thread::sleep(Duration::from_millis(20));
    }
    while processes_with(marker).len() < 12 {
        assert!(t.elapsed() < Duration::from_secs(30), "ranks did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let daemon: i32 = std::fs::read_to_string(c.dir.join("nodes/2.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: killing the node daemon this test's cluster started.
    unsafe { libc::kill(daemon, libc::SIGKILL) };
    let t = Instant::now();
    while doomed.iter().any(|&id| c.state(id) != "Failed") {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{}",
            c.gang(&["queue"]).stdout
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let q = c.gang(&["queue"]);
    assert!(
        q.stdout.matches("node 2 went down").count() >= 2,
        "{}",
        q.dump()
    );
    let n = c.gang(&["nodes"]);
    assert!(n.stdout.contains("down"), "{}", n.dump());
    while !processes_with(marker).is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "orphans: {:?}",
            processes_with(marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // down: no daemon, no namespace.
    let pids: Vec<i32> = (0..4)
        .filter_map(|i| {
            std::fs::read_to_string(c.dir.join(format!("nodes/{i}.pid")))
                .ok()?
                .trim()
                .parse()
                .ok()
        })
        .collect();
    let d = c.gang(&["down"]);
    assert!(d.ok(), "{}", d.dump());
    for p in pids {
        assert!(gone(p), "node daemon {p} is still running");
    }
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    for ns in namespaces {
        assert!(!list.contains(&ns), "namespace {ns} is left:\n{list}");
    }
}

/// A job's communication budget sizes its credits: with a small `PHALANX_COMM_BUDGET`
/// the go-back-n window shrinks (to one 64 KiB loopback datagram here), and the job
/// still moves its data correctly.
#[test]
fn mr_comm_budget_shrinks_the_window() {
    let bw = example("gang_bw").display().to_string();
    let run_with = |budget: Option<&str>| {
        let mut env = vec![("PHALANX_TRANSPORT", "udp"), ("PHALANX_STATS", "1")];
        if let Some(b) = budget {
            env.push(("PHALANX_COMM_BUDGET", b));
        }
        let r = run(
            &["-n", "2", &bw, "16384", "0.3"],
            &env,
            Duration::from_secs(60),
        );
        assert!(
            r.ok() && r.stdout.contains("gang_bw: bytes=16384"),
            "{}",
            r.dump()
        );
        r
    };
    assert_eq!(
        run_with(None).stat("window="),
        2 * 128,
        "the default window"
    );
    assert_eq!(
        run_with(Some("64k")).stat("window="),
        2,
        "one packet per peer"
    );
    let bad = run(
        &["-n", "2", &bw, "16", "0.1"],
        &[("PHALANX_COMM_BUDGET", "lots")],
        Duration::from_secs(60),
    );
    assert!(
        !bad.ok() && bad.stderr.contains("PHALANX_COMM_BUDGET"),
        "{}",
        bad.dump()
    );
}
