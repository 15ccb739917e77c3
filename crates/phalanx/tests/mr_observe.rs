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
    assert_eq!(
        s["per_rank"]["0"]["mac"], 0,
        "loopback goes without the MAC: {s}"
    );
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
