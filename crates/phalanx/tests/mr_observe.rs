//! Seeing what a job did (issue 17): `phalanx run --stats` gathers every rank's counters
//! at Finalize and prints one summary for the job — checked here in its JSON form, on
//! shared memory (collectives on the board and on point-to-point schedules) and over UDP
//! under injected loss (retransmissions, drops by reason).

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

/// Runs `args` under `--stats=json:FILE` and returns the run and the parsed summary.
fn with_stats(tag: &str, args: &[&str], env: &[(&str, &str)]) -> (Run, serde_json::Value) {
    let file =
        std::env::temp_dir().join(format!("phalanx-stats-{}-{tag}.json", std::process::id()));
    let opt = format!("--stats=json:{}", file.display());
    let mut all = vec![opt.as_str()];
    all.extend_from_slice(args);
    let r = run(&all, env, LIMIT);
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let _ = std::fs::remove_file(&file);
    let v = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("no JSON summary ({e}):\n{text}\n{}", r.dump()));
    (r, v)
}

#[test]
fn mr_stats_summarise_the_job() {
    let ex = example("collectives").display().to_string();
    let (r, s) = with_stats("shm", &["-n", "4", &ex, "4096"], &[]);
    assert!(r.ok(), "{}", r.dump());
    assert_eq!(s["ranks"], 4, "{s}");
    assert_eq!(s["missing"].as_array().map(Vec::len), Some(0), "{s}");
    for rank in 0..4 {
        let me = &s["per_rank"][rank.to_string()];
        assert!(me["coll_calls"].as_u64() > Some(100), "rank {rank}: {me}");
        assert!(me["waits"].as_u64() > Some(0), "rank {rank}: {me}");
    }
    // Both the board and point-to-point schedules ran (the example splits the world).
    let coll = &s["collectives"];
    assert!(coll["broadcast"]["shm"].as_u64() > Some(0), "{coll}");
    assert!(coll["broadcast"]["binomial"].as_u64() > Some(0), "{coll}");
    assert!(coll["all_reduce"].is_object(), "{coll}");
    // A total is the sum of the ranks'.
    let sum: u64 = (0..4)
        .map(|r| {
            s["per_rank"][r.to_string()]["coll_calls"]
                .as_u64()
                .unwrap_or(0)
        })
        .sum();
    assert_eq!(s["total"]["coll_calls"].as_u64(), Some(sum), "{s}");

    // Over UDP with 5 % of the datagrams lost: the retransmissions and the drops they
    // cause are in the summary, and every message's bytes by kind.
    let ex = example("stress").display().to_string();
    let env = [
        ("PHALANX_TRANSPORT", "udp"),
        ("PHALANX_FAULTS", "loss=0.05,seed=11"),
    ];
    let (r, s) = with_stats("udp", &["-n", "3", &ex, "2", "30", "3"], &env);
    assert!(r.ok(), "{}", r.dump());
    assert_eq!(s["missing"].as_array().map(Vec::len), Some(0), "{s}");
    let total = &s["total"];
    assert!(total["retransmits"].as_u64() > Some(0), "{total}");
    assert!(total["faults_dropped"].as_u64() > Some(0), "{total}");
    assert!(total["eager_bytes"].as_u64() > Some(0), "{total}");
    assert!(total["rndv_bytes"].as_u64() > Some(0), "{total}");
    assert_eq!(s["per_rank"]["0"]["mac"], 1, "datagrams are sealed: {s}");
}

#[test]
fn mr_stats_table_names_a_rank_that_never_reported() {
    // Rank 1 exits with code 3 without Finalize: the job fails, and the summary still comes, naming it.
    let crash = example("crash").display().to_string();
    let r = run(&["-n", "3", "--stats", &crash, "exit3"], &[], LIMIT);
    assert!(!r.ok(), "{}", r.dump());
    assert!(
        r.stderr.contains("phalanx: job statistics: ") && r.stderr.contains("missing: ["),
        "{}",
        r.dump()
    );
}

/// Runs `args` (with `--trace FILE` added first) and returns the run and the parsed trace.
fn traced(tag: &str, args: &[&str], env: &[(&str, &str)]) -> (Run, serde_json::Value) {
    let file =
        std::env::temp_dir().join(format!("phalanx-trace-{tag}-{}.json", std::process::id()));
    let path = file.display().to_string();
    let mut all = vec!["--trace", path.as_str()];
    all.extend_from_slice(args);
    let r = run(&all, env, LIMIT);
    assert!(r.ok(), "{tag}: {}", r.dump());
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let _ = std::fs::remove_file(&file);
    let doc = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{tag}: not JSON ({e})\n{}", r.dump()));
    (r, doc)
}

/// The trace-event format's rules a viewer relies on, checked on `doc`; returns the
/// numbers of send slices, arrival slices and flows.
fn check_trace(doc: &serde_json::Value) -> (usize, usize, usize) {
    use std::collections::HashMap;
    let events = doc["traceEvents"].as_array().expect("a traceEvents array");
    let mut last_ts: HashMap<(u64, u64), f64> = HashMap::new();
    // Open X slices per track: their ends, innermost last.
    let mut open: HashMap<(u64, u64), Vec<f64>> = HashMap::new();
    let mut flows: HashMap<u64, (usize, usize, f64, f64)> = HashMap::new();
    // A flow's (tag, bytes) at its send, to compare with its arrival's.
    let mut ends: HashMap<u64, serde_json::Value> = HashMap::new();
    let (mut sends, mut arrivals) = (0, 0);
    for e in events {
        let ph = e["ph"].as_str().expect("every event has a phase");
        let pid = e["pid"].as_u64().expect("a pid");
        let tid = e["tid"].as_u64().expect("a tid");
        if ph == "M" {
            continue;
        }
        let ts = e["ts"].as_f64().expect("a timestamp");
        let track = (pid, tid);
        // Monotone per track.
        let prev = last_ts.insert(track, ts).unwrap_or(f64::MIN);
        assert!(
            ts >= prev,
            "timestamps go back on track {track:?}: {prev} then {e}"
        );
        let stack = open.entry(track).or_default();
        while stack.last().is_some_and(|&end| end <= ts && ph == "X") {
            stack.pop();
        }
        match ph {
            "X" => {
                let dur = e["dur"].as_f64().expect("a slice has a duration");
                assert!(dur >= 0.0, "{e}");
                // Slices nest: this one ends within the one it starts in.
                if let Some(&end) = stack.last() {
                    if ts < end {
                        assert!(ts + dur <= end + 1e-3, "slices overlap on {track:?}: {e}");
                    }
                }
                stack.push(ts + dur);
                match e["cat"].as_str() {
                    Some("message")
                        if e["name"].as_str().is_some_and(|n| n.starts_with("send")) =>
                    {
                        sends += 1
                    }
                    Some("message") => arrivals += 1,
                    _ => {}
                }
            }
            "s" | "f" => {
                let id = e["id"].as_u64().expect("a flow id");
                let f = flows.entry(id).or_insert((0, 0, 0.0, 0.0));
                if ph == "s" {
                    f.0 += 1;
                    f.2 = ts;
                } else {
                    assert_eq!(e["bp"], "e", "{e}");
                    f.1 += 1;
                    f.3 = ts;
                }
                // Both ends are the same message: its tag and length.
                match ends.remove(&id) {
                    None => {
                        ends.insert(id, e["args"].clone());
                    }
                    Some(other) => assert_eq!(other, e["args"], "flow {id} joins two messages"),
                }
            }
            "i" => {}
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    for (id, (s, f, ts_s, ts_f)) in &flows {
        assert_eq!((s, f), (&1, &1), "flow {id}: both ends, once each");
        assert!(ts_f >= ts_s, "flow {id} arrives before it leaves");
    }
    (sends, arrivals, flows.len())
}

#[test]
fn mr_trace_of_jacobi_loads_as_a_timeline() {
    let file = std::env::temp_dir().join(format!("phalanx-trace-{}.json", std::process::id()));
    let path = file.display().to_string();
    let ex = example("jacobi").display().to_string();
    for (medium, env) in [
        ("shm", vec![]),
        (
            "udp",
            vec![
                ("PHALANX_TRACE", path.as_str()),
                ("PHALANX_TRANSPORT", "udp"),
            ],
        ),
    ] {
        // Shared memory through --trace, UDP through PHALANX_TRACE (the same thing).
        let mut args = vec!["-n", "4"];
        if medium == "shm" {
            args.extend(["--trace", path.as_str()]);
        }
        args.extend([ex.as_str(), "32"]);
        let r = run(&args, &env, LIMIT);
        assert!(r.ok(), "{medium}: {}", r.dump());
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let _ = std::fs::remove_file(&file);
        let doc: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{medium}: not JSON ({e})\n{}", r.dump()));
        assert_eq!(doc["otherData"]["events_lost"], 0, "{medium}");
        let (sends, arrivals, flows) = check_trace(&doc);
        // Every message is a flow from its send to its arrival.
        assert!(sends > 100, "{medium}: {sends} sends");
        assert_eq!((sends, arrivals), (flows, flows), "{medium}");
        let events = doc["traceEvents"].as_array().expect("events");
        let has = |cat: &str, name: &str| {
            events
                .iter()
                .any(|e| e["cat"] == cat && e["name"].as_str().is_some_and(|n| n.contains(name)))
        };
        assert!(has("collective", "all_reduce"), "{medium}: no all-reduce");
        assert!(has("call", "receive"), "{medium}: no receive calls");
        // A receive's slice says how many bytes arrived in it (jacobi's halo rows).
        let sized = events.iter().any(|e| {
            e["cat"] == "call" && e["name"] == "receive" && e["args"]["bytes"].as_u64() > Some(0)
        });
        assert!(sized, "{medium}: receive slices without their bytes");
        assert!(has("launcher", "released"), "{medium}: no launcher events");
        // Every rank is a named process, the launcher one more.
        let names = events
            .iter()
            .filter(|e| e["name"] == "process_name")
            .count();
        assert_eq!(names, 5, "{medium}");
    }
}

#[test]
fn mr_trace_flows_join_the_same_message_under_the_careful_protocol() {
    // Careful holds a frame no receive wants yet and hands it over later, out of its
    // arrival order: the flows must still join each message's own two ends. stress
    // receives with specific and wildcard tags, out of send order.
    let ex = example("stress").display().to_string();
    let env = [("PHALANX_TRANSPORT", "udp"), ("PHALANX_RELIABLE_NET", "1")];
    let (_, doc) = traced("careful", &["-n", "4", &ex, "2", "40", "5"], &env);
    let (sends, arrivals, flows) = check_trace(&doc);
    assert!(sends > 100, "{sends}");
    assert_eq!((sends, arrivals), (flows, flows));
}

/// Whether `doc` has a log event named `what`.
fn logged(doc: &serde_json::Value, what: &str) -> bool {
    let events = doc["traceEvents"].as_array().expect("events");
    events
        .iter()
        .any(|e| e["cat"] == "log" && e["name"] == what)
}

#[test]
fn mr_trace_shows_loss_recovery_and_stalls() {
    // Over UDP with 5 % loss: URTP's REQs for multicast collectives, and go-back-n
    // retransmissions for point-to-point traffic, on the timeline. The collectives
    // example sends only a handful of go-back-n datagrams (about one run in forty lost
    // none that needed resending), so retransmissions are looked for in stress's
    // thousands of point-to-point datagrams (about 40 retransmissions a run).
    let env = [
        ("PHALANX_TRANSPORT", "udp"),
        ("PHALANX_FAULTS", "loss=0.05,seed=3"),
    ];
    let ex = example("collectives").display().to_string();
    let (_, doc) = traced("loss", &["-n", "4", &ex, "262144"], &env);
    check_trace(&doc);
    assert!(
        logged(&doc, "URTP REQs sent"),
        "no URTP REQs on the timeline"
    );
    let ex = example("stress").display().to_string();
    let (_, doc) = traced("loss-p2p", &["-n", "3", &ex, "2", "40", "5"], &env);
    check_trace(&doc);
    assert!(
        logged(&doc, "retransmitted datagrams"),
        "no retransmissions on the timeline"
    );
    // Point-to-point traffic through a go-back-n window of 4 datagrams: stalls.
    let ex = example("stress").display().to_string();
    let env = [("PHALANX_TRANSPORT", "udp"), ("PHALANX_WINDOW", "4")];
    let (_, doc) = traced("stalls", &["-n", "3", &ex, "1", "20", "3"], &env);
    check_trace(&doc);
    for what in ["stall begins", "stall ends"] {
        assert!(logged(&doc, what), "no {what:?} on the timeline");
    }
}

#[test]
fn mr_trace_ring_overflow_is_counted_and_said() {
    let file =
        std::env::temp_dir().join(format!("phalanx-trace-small-{}.json", std::process::id()));
    let path = file.display().to_string();
    let ex = example("jacobi").display().to_string();
    let r = run(
        &["-n", "2", "--trace", &path, &ex, "32"],
        &[("PHALANX_TRACE_EVENTS", "100")],
        LIMIT,
    );
    assert!(r.ok(), "{}", r.dump());
    assert!(r.stderr.contains("its ring overwrote its"), "{}", r.dump());
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let _ = std::fs::remove_file(&file);
    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert!(doc["otherData"]["events_lost"].as_u64() > Some(0));
    // What is left still follows the rules (flows whose other end was lost are gone).
    check_trace(&doc);
}

#[test]
fn mr_trace_across_test_hosts_shows_hierarchical_phases() {
    // Two test hosts (network namespaces) with two ranks each: shared memory inside a
    // host, UDP between them; blocking collectives run hierarchically, in phases.
    let net = phalanx_netns::TestNet::create(2).expect("test hosts must be available");
    let hosts = std::env::temp_dir().join(format!("phalanx-trace-hosts-{}", std::process::id()));
    let text: String = net
        .names()
        .iter()
        .map(|n| format!("netns:{n} slots=2\n"))
        .collect();
    std::fs::write(&hosts, text).expect("hostfile");
    let file = std::env::temp_dir().join(format!("phalanx-trace-ns-{}.json", std::process::id()));
    let (h, f) = (hosts.display().to_string(), file.display().to_string());
    let ex = example("collectives").display().to_string();
    let r = run(&["--hostfile", &h, "--trace", &f, &ex, "65536"], &[], LIMIT);
    let _ = std::fs::remove_file(&hosts);
    assert!(r.ok(), "{}", r.dump());
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let _ = std::fs::remove_file(&file);
    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let (sends, _, flows) = check_trace(&doc);
    assert_eq!(sends, flows);
    let events = doc["traceEvents"].as_array().expect("events");
    for phase in ["host phase", "leaders' phase (network)"] {
        assert!(
            events
                .iter()
                .any(|e| e["cat"] == "phase" && e["name"] == phase),
            "no {phase} slice"
        );
    }
    assert!(
        events.iter().any(|e| e["cat"] == "collective"
            && e["args"]["algorithm"]
                .as_str()
                .is_some_and(|a| a.starts_with("hier"))),
        "no hierarchical collective"
    );
}
