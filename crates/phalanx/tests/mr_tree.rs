//! Broadcast along the postal model's optimal tree (seed 002) on real processes without
//! multicast (`PHALANX_MCAST=0`, UDP): every byte right for 16 ranks and sizes up to
//! 1 MiB under injected loss, duplication and reordering — with λ forced and from the
//! cost model, with and without packet-wise pipelining; reduction and gather along the
//! same trees, every root, under faults; the default takes the tree where the model
//! predicts it clearly faster (see `collective/root.rs`: a broadcast or gather from
//! 32 KiB, a reduction at every size), the binomial tree elsewhere.

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(150);

fn bcast_check(n: &str, env: &[(&str, &str)]) -> Run {
    let ex = example("bcast_check").display().to_string();
    let mut all = vec![
        ("PHALANX_TRANSPORT", "udp"),
        ("PHALANX_MCAST", "0"),
        ONE_PER_CPU,
    ];
    all.extend_from_slice(env);
    run(&["-n", n, &ex, "1048576", "1"], &all, LIMIT)
}

fn assert_all_ok(r: &Run, n: usize, what: &str) {
    assert!(r.ok(), "{what}:\n{}", r.dump());
    assert_eq!(
        r.stdout.matches("broadcasts ok").count(),
        n,
        "{what}:\n{}",
        r.dump()
    );
}

#[test]
fn mr_tree_bcast_is_exact_under_faults() {
    let faults = "loss=0.05,dup=0.03,reorder=0.05,seed=21";
    for (lambda, pipeline) in [("3", "1"), ("3", "0"), ("1", "1"), ("15", "1")] {
        let env = [
            ("PHALANX_COLL_BCAST", "tree"),
            ("PHALANX_COLL_LAMBDA", lambda),
            ("PHALANX_COLL_PIPELINE", pipeline),
            ("PHALANX_FAULTS", faults),
        ];
        let r = bcast_check("16", &env);
        assert_all_ok(&r, 16, &format!("λ={lambda} pipeline={pipeline}"));
    }
    // λ from the cost model, odd group size.
    let env = [("PHALANX_COLL_BCAST", "tree"), ("PHALANX_FAULTS", faults)];
    assert_all_ok(&bcast_check("7", &env), 7, "model λ, 7 ranks");
}

/// Figures whose λ is 3 for every size: (5 + 3 + 1) / 3.
const COST_LAMBDA_3: (&str, &str) = ("PHALANX_COST", "send=5+0,xmit=3+0,recv=1+0");

/// The model's λ as it is: without it the launcher scales λ by the ranks per CPU of this
/// machine (`coll/cost.rs`), which depends on the machine the tests run on.
const ONE_PER_CPU: (&str, &str) = ("PHALANX_RANKS_PER_CPU", "1");

#[test]
fn mr_tree_default_follows_the_model() {
    // PHALANX_LOG=debug names each collective's algorithm. At λ = 3 the model predicts
    // the tree 17 % ahead at 4 ranks (not enough: binomial) and 29 % at 8 (tree, for
    // messages of 32 KiB and more: bcast_check's 64 KiB and 1 MiB).
    let debug = ("PHALANX_LOG", "debug");
    let line = "collective=\"broadcast_into\" algorithm=";
    for (n, want) in [("4", "binomial"), ("8", "tree")] {
        let r = bcast_check(n, &[debug, COST_LAMBDA_3]);
        assert_all_ok(&r, n.parse().unwrap(), n);
        if want == "binomial" {
            assert!(
                !r.stderr.contains(&format!("{line}\"tree\"")),
                "{}",
                r.dump()
            );
        }
        assert!(
            r.stderr.contains(&format!("{line}\"{want}\"")),
            "{n} ranks: {want} expected\n{}",
            r.dump()
        );
    }
    // Asked for, either runs.
    for (n, alg) in [("6", "tree"), ("8", "binomial")] {
        let r = bcast_check(n, &[debug, COST_LAMBDA_3, ("PHALANX_COLL_BCAST", alg)]);
        assert_all_ok(&r, n.parse().unwrap(), alg);
        assert!(
            r.stderr.contains(&format!("{line}\"{alg}\"")),
            "{}",
            r.dump()
        );
    }
}

/// Every collective, every root, with broadcast, reduction and gather on postal trees.
fn collectives_on_trees(n: &str, max: &str, env: &[(&str, &str)]) -> Run {
    let ex = example("collectives").display().to_string();
    let mut all = vec![
        ("PHALANX_TRANSPORT", "udp"),
        ("PHALANX_MCAST", "0"),
        ("PHALANX_COLL_BCAST", "tree"),
        ("PHALANX_COLL_REDUCE", "tree"),
        ("PHALANX_COLL_GATHER", "tree"),
        ONE_PER_CPU,
    ];
    all.extend_from_slice(env);
    run(&["-n", n, &ex, max], &all, LIMIT)
}

#[test]
fn mr_tree_reduce_and_gather_are_exact_under_faults() {
    let faults = ("PHALANX_FAULTS", "loss=0.05,dup=0.03,reorder=0.05,seed=23");
    for (n, lambda) in [("8", "3"), ("5", "15"), ("16", "2")] {
        let r = collectives_on_trees(n, "131072", &[faults, ("PHALANX_COLL_LAMBDA", lambda)]);
        assert!(r.ok(), "{n} ranks, λ={lambda}:\n{}", r.dump());
        assert_collectives_ok(&r, n);
    }
    // And chosen by default (λ from the model) at 8 ranks, names in the log.
    let r = collectives_on_trees("8", "65536", &[COST_LAMBDA_3, ("PHALANX_LOG", "debug")]);
    assert!(r.ok(), "{}", r.dump());
    for name in ["reduce", "gather"] {
        let line = format!("collective=\"{name}\" algorithm=\"tree\"");
        assert!(r.stderr.contains(&line), "{line}\n{}", r.dump());
    }
}

/// Every one of the `n` ranks of a `collectives` run found every result right.
fn assert_collectives_ok(r: &Run, n: &str) {
    assert_eq!(
        r.stdout.matches("all collectives ok").count(),
        n.parse::<usize>().unwrap(),
        "{}",
        r.dump()
    );
}

/// Runs the `collectives` example (every collective, up to 1 KiB) on `n` ranks over
/// UDP at λ = 3 with `env`, checks every result, and says whether the log names `line`.
fn collectives_log_has(n: &str, env: &[(&str, &str)], line: &str) -> bool {
    let ex = example("collectives").display().to_string();
    let mut all = vec![
        ("PHALANX_TRANSPORT", "udp"),
        ("PHALANX_LOG", "debug"),
        COST_LAMBDA_3,
        ONE_PER_CPU,
    ];
    all.extend_from_slice(env);
    let r = run(&["-n", n, &ex, "1024"], &all, LIMIT);
    assert!(r.ok(), "{n} ranks:\n{}", r.dump());
    assert_collectives_ok(&r, n);
    r.stderr.contains(line)
}

#[test]
fn mr_tree_reductions_of_every_size_take_the_tree_where_the_model_predicts_it() {
    // Reductions take the postal tree at every size where the model predicts it clearly
    // faster (`REDUCE_TREE_MIN`, collective/root.rs): at λ = 3, from 8 ranks, not at 4.
    let line = "collective=\"reduce\" algorithm=\"tree\"";
    for (n, tree) in [("8", true), ("4", false)] {
        let got = collectives_log_has(n, &[("PHALANX_MCAST", "0")], line);
        assert_eq!(got, tree, "{n} ranks");
    }
    // With multicast, a small all-reduce from 8 ranks is that reduce and one multicast
    // broadcast (`REDUCE_BCAST_MIN_P`, collective.rs), recursive doubling at 4.
    let line = "collective=\"all_reduce_into\" algorithm=\"reduce_bcast\"";
    for (n, reduce_bcast) in [("8", true), ("4", false)] {
        assert_eq!(collectives_log_has(n, &[], line), reduce_bcast, "{n} ranks");
    }
}

/// The first CPU this process may run on.
fn first_allowed_cpu() -> usize {
    // SAFETY: a zeroed cpu_set_t is a valid empty set, filled by the kernel for this
    // process; CPU_ISSET reads it within CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let size = std::mem::size_of::<libc::cpu_set_t>();
        assert_eq!(
            libc::sched_getaffinity(0, size, &mut set),
            0,
            "sched_getaffinity"
        );
        (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &set))
            .expect("a CPU")
    }
}

#[test]
fn mr_tree_ranks_sharing_cpus_widen_the_trees() {
    // The launcher counts the ranks it starts on its machine against the CPUs it may use
    // (one here) and gives every rank the same figure; one the user gives is kept.
    let cpu = first_allowed_cpu().to_string();
    let show = |n: &str, env: &[(&str, &str)]| {
        let mut cmd = std::process::Command::new("taskset");
        cmd.args(["-c", &cpu]).arg(phalanx()).args(["run", "-n", n]);
        cmd.args(["sh", "-c", "echo share:$PHALANX_RANKS_PER_CPU"]);
        cmd.env_remove("PHALANX_RANKS_PER_CPU");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let r = run_cmd(cmd, LIMIT);
        assert!(r.ok(), "{}", r.dump());
        let got: Vec<String> = r.stdout.lines().map(str::to_string).collect();
        assert_eq!(got.len(), n.parse::<usize>().unwrap(), "{}", r.dump());
        got
    };
    assert!(show("3", &[]).iter().all(|l| l == "share:3"));
    assert_eq!(show("1", &[]), ["share:"]);
    let given = [("PHALANX_RANKS_PER_CPU", "1.5")];
    assert!(show("2", &given).iter().all(|l| l == "share:1.5"));
    // With two ranks per CPU, λ = 3 × 2: reductions of 4 ranks take the tree, which they
    // do not at λ = 3 (above); every result is checked.
    let line = "collective=\"reduce\" algorithm=\"tree\"";
    let env = [("PHALANX_MCAST", "0"), ("PHALANX_RANKS_PER_CPU", "2")];
    assert!(collectives_log_has("4", &env, line));
}

/// Runs `args` (an example and its arguments) on `n` ranks, rank 1 with λ = `other`,
/// and checks for a mismatch error naming `what`, both λ (`env` gives the others'),
/// not a hang.
fn lambdas_differ(n: &str, args: &str, other: &str, env: &[(&str, &str)], want: &[&str]) {
    let script = format!(
        "if [ \"$PHALANX_RANK\" = 1 ]; then export PHALANX_COLL_LAMBDA={other}; fi; exec {args}"
    );
    let r = run(
        &["-n", n, "--timeout", "60", "sh", "-c", &script],
        env,
        LIMIT,
    );
    assert!(!r.ok(), "{}", r.dump());
    assert!(r.stderr.contains("collective mismatch"), "{}", r.dump());
    for w in want {
        assert!(r.stderr.contains(w), "{w}:\n{}", r.dump());
    }
    assert_ne!(r.code, Some(124), "it hung instead:\n{}", r.dump());
}

#[test]
fn mr_tree_lambdas_that_differ_are_a_mismatch() {
    // Ranks whose figures differ (here rank 1 is given another λ) would build other
    // trees: the tree's λ travels in the call's signature, so they get a clear error
    // naming both, not a hang.
    let ex = example("bcast_check").display().to_string();
    let env = [
        ("PHALANX_TRANSPORT", "udp"),
        ("PHALANX_MCAST", "0"),
        ("PHALANX_COLL_BCAST", "tree"),
        ("PHALANX_COLL_LAMBDA", "2"),
    ];
    lambdas_differ("4", &format!("{ex} 65536 1"), "4", &env, &["λ 4", "λ 2"]);
    // The same for an all-reduce's reduce on the tree (a reduce + multicast broadcast,
    // 8 ranks; reductions themselves binomial here, so the all-reduce meets it first).
    let ex = example("collectives").display().to_string();
    let env = [
        ("PHALANX_TRANSPORT", "udp"),
        ("PHALANX_COLL_REDUCE", "binomial"),
        ("PHALANX_COLL_LAMBDA", "3"),
    ];
    let want = ["all_reduce", "λ 5", "λ 3"];
    lambdas_differ("8", &format!("{ex} 1024"), "5", &env, &want);
}

#[test]
fn mr_tree_launcher_gives_every_rank_its_hosts_figures() {
    // The launcher's host cache (here a file of figures) reaches every rank as
    // PHALANX_COST; with PHALANX_COST=measure the launcher measures once for all.
    let dir = std::env::temp_dir().join(format!("phx-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("cost");
    std::fs::write(&file, "send=5+0,xmit=3+0,recv=1+0.001\n").expect("write figures");
    let file = file.display().to_string();
    let show = ["-n", "3", "sh", "-c", "echo cost:$PHALANX_COST"];
    let figures = |r: &Run| -> Vec<String> {
        r.stdout
            .lines()
            .filter_map(|l| l.strip_prefix("cost:"))
            .map(str::to_string)
            .collect()
    };
    let r = run(&show, &[("PHALANX_COST_FILE", &file)], LIMIT);
    assert!(r.ok(), "{}", r.dump());
    let got = figures(&r);
    assert_eq!(got.len(), 3, "{}", r.dump());
    assert!(
        got.iter()
            .all(|f| f.starts_with("send=5.0000+0.0000000,xmit=3.0000")),
        "{}",
        r.dump()
    );
    let r = run(&show, &[("PHALANX_COST", "measure")], LIMIT);
    assert!(r.ok(), "{}", r.dump());
    let got = figures(&r);
    assert_eq!(got.len(), 3, "{}", r.dump());
    assert!(
        got.iter().all(|f| f == &got[0] && f.starts_with("send=")),
        "{}",
        r.dump()
    );
    // A job with measured figures runs its trees on them.
    let r = bcast_check(
        "4",
        &[("PHALANX_COST", "measure"), ("PHALANX_COLL_BCAST", "tree")],
    );
    assert_all_ok(&r, 4, "measured");
    let _ = std::fs::remove_dir_all(&dir);
}
