//! The job manager's hooks on real processes: every rank halts its links in the middle of
//! traffic, drains what is in flight, saves what the links hold, stays stopped, restores
//! and resumes — over shared memory, go-back-n, careful and go-back-n under injected
//! faults — and every message still arrives intact and in order. A rank that stays out
//! of the library makes the others' drain end in an error naming it.

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
