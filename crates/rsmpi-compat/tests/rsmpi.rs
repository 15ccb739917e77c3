//! Runs the rsmpi-style examples (phalanx imported as `mpi`) on 2 and 3 ranks through
//! the launcher: every rank must print its line and the job exit 0.

#[path = "../../phalanx/tests/common/mod.rs"]
mod common;

use std::time::Duration;

fn example(name: &str) -> String {
    let path = common::profile_dir().join("examples").join(name);
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = std::process::Command::new(cargo);
        cmd.args(["build", "-p", "phalanx-rsmpi-compat", "--examples"]);
        if common::profile_dir()
            .file_name()
            .is_some_and(|n| n == "release")
        {
            cmd.arg("--release");
        }
        assert!(cmd.status().expect("cargo build").success());
    }
    path.to_string_lossy().into_owned()
}

fn runs_on(name: &str, np: u32, what: &str) {
    runs_over(name, np, what, "auto");
}

fn runs_over(name: &str, np: u32, what: &str, transport: &str) {
    let prog = example(name);
    let np_s = np.to_string();
    let env = [("PHALANX_TRANSPORT", transport)];
    let r = common::run(&["-n", &np_s, &prog], &env, Duration::from_secs(60));
    assert!(r.ok(), "{name} on {np} ranks: {}", r.dump());
    for rank in 0..np {
        let line = format!("rank {rank} of {np}: {what} ok");
        assert!(
            r.stdout.contains(&line),
            "{name}: no {line:?}\n{}",
            r.dump()
        );
    }
}

#[test]
fn rsmpi_ring_on_2_and_3_ranks() {
    runs_on("rsmpi_ring", 2, "ring");
    runs_on("rsmpi_ring", 3, "ring");
}

#[test]
fn rsmpi_exchange_on_2_and_3_ranks() {
    runs_on("rsmpi_exchange", 2, "exchange");
    runs_on("rsmpi_exchange", 3, "exchange");
    runs_over("rsmpi_exchange", 3, "exchange", "udp");
}

#[test]
fn rsmpi_collectives_on_2_3_and_5_ranks() {
    for np in [2, 3, 5] {
        runs_on("rsmpi_collectives", np, "collectives");
    }
    runs_over("rsmpi_collectives", 3, "collectives", "udp");
    runs_over("rsmpi_collectives", 5, "collectives", "udp");
}

#[test]
fn rsmpi_cartesian_on_2_3_4_and_5_ranks() {
    for np in [2, 3, 4, 5] {
        runs_on("rsmpi_cartesian", np, "cartesian");
    }
}

/// rsmpi's spawn and spawn_multiple, over shared memory and UDP: the launcher starts
/// the children, both sides talk over the intercommunicator, merge it and reduce.
#[test]
fn rsmpi_spawn_on_2_and_3_ranks() {
    for (np, transport) in [(2, "auto"), (3, "auto"), (3, "udp"), (4, "auto")] {
        let prog = example("rsmpi_spawn");
        let np_s = np.to_string();
        let env = [("PHALANX_TRANSPORT", transport)];
        let r = common::run(&["-n", &np_s, &prog], &env, Duration::from_secs(60));
        assert!(
            r.ok(),
            "rsmpi_spawn on {np} ranks ({transport}): {}",
            r.dump()
        );
        for rank in 0..np {
            let line = format!("rank {rank} of {np}: spawn ok");
            assert!(r.stdout.contains(&line), "no {line:?}\n{}", r.dump());
        }
        for (rank, size, arg) in [
            (0, 2, "from_parent"),
            (1, 2, "from_parent"),
            (0, 3, "FirstChild"),
            (1, 3, "FirstChild"),
            (2, 3, "SecondChild"),
            (0, 1, "from_self"),
        ] {
            let line = format!("child {rank} of {size} ({arg}): spawn ok");
            assert!(r.stdout.contains(&line), "no {line:?}\n{}", r.dump());
        }
    }
}

#[test]
fn rsmpi_groups_on_2_and_3_ranks() {
    runs_on("rsmpi_groups", 2, "groups");
    runs_on("rsmpi_groups", 3, "groups");
    runs_over("rsmpi_groups", 3, "groups", "udp");
    // Two odd members, which make their tagged communicators in opposite orders.
    runs_on("rsmpi_groups", 4, "groups");
}

#[test]
fn rsmpi_requests_on_2_and_3_ranks() {
    runs_on("rsmpi_requests", 2, "requests");
    runs_on("rsmpi_requests", 3, "requests");
    runs_over("rsmpi_requests", 3, "requests", "udp");
    // Careful links over UDP hold messages in their receive buffers until a receive (or
    // a waiting matched probe) wants them.
    let prog = example("rsmpi_requests");
    let env = [("PHALANX_TRANSPORT", "udp"), ("PHALANX_RELIABLE_NET", "1")];
    let r = common::run(&["-n", "3", &prog], &env, Duration::from_secs(60));
    assert!(r.ok(), "rsmpi_requests on careful links: {}", r.dump());
    assert_eq!(r.stdout.matches("requests ok").count(), 3, "{}", r.dump());
}

#[test]
fn rsmpi_datatypes_on_2_and_3_ranks() {
    runs_on("rsmpi_datatypes", 2, "datatypes");
    runs_on("rsmpi_datatypes", 3, "datatypes");
    runs_over("rsmpi_datatypes", 3, "datatypes", "udp");
}

#[test]
fn rsmpi_buffers_on_2_and_3_ranks() {
    runs_on("rsmpi_buffers", 2, "buffers");
    runs_on("rsmpi_buffers", 3, "buffers");
    runs_over("rsmpi_buffers", 3, "buffers", "udp");
}

#[test]
fn rsmpi_datatype_misuse_is_an_error() {
    let prog = example("rsmpi_datatype_misuse");
    for (case, call) in [
        ("view", "View"),
        ("mutview", "MutView"),
        ("vector", "UserDatatype::vector"),
        ("structured", "UserDatatype::structured"),
        ("unpack", "unpack_into"),
        ("pack", "pack_into"),
    ] {
        let r = common::run(&["-n", "1", &prog, case], &[], Duration::from_secs(60));
        assert!(!r.ok(), "{case}: misuse not reported\n{}", r.dump());
        assert!(
            r.stderr.contains(call) && !r.stdout.contains("not caught"),
            "{case}: no error naming {call}\n{}",
            r.dump()
        );
        assert!(
            !r.stderr.contains("panicked"),
            "{case}: a panic\n{}",
            r.dump()
        );
    }
}

/// rsmpi's `mpi::ffi` beside the Rust API (the C interface's functions on the same
/// universe), on 1–3 ranks.
#[test]
fn rsmpi_ffi_on_1_2_and_3_ranks() {
    runs_on("rsmpi_ffi", 1, "ffi");
    runs_on("rsmpi_ffi", 2, "ffi");
    runs_on("rsmpi_ffi", 3, "ffi");
    runs_over("rsmpi_ffi", 3, "ffi", "udp");
}
