//! Only the job gets in (issue 13): a datagram forged with the job key and a member's
//! source address is dropped and counted (`bad_mac`) and the real message arrives — and
//! without the MAC (`PHALANX_MAC=0`) the same forgery is taken, so the test does stage
//! the attack; an attacker without privileges cannot take a rank's port, and its
//! forgeries fail the MAC too. A stranger that connects to the launcher first and says hello as a rank
//! is refused, reported and sent nothing, and the job runs correct with the real rank.

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

fn forger(env: &[(&str, &str)], timeout: &str) -> Run {
    let ex = example("forger").display().to_string();
    let mut all = vec![("PHALANX_TRANSPORT", "udp")];
    all.extend_from_slice(env);
    run(&["-n", "3", "--timeout", timeout, &ex], &all, LIMIT)
}

#[test]
fn mr_forged_datagrams_are_dropped_and_counted() {
    let r = forger(&[], "60");
    assert!(r.ok(), "{}", r.dump());
    let line = r
        .stdout
        .lines()
        .find(|l| l.starts_with("forger:"))
        .unwrap_or_else(|| panic!("no report\n{}", r.dump()));
    assert!(line.contains("received real!!"), "{}", r.dump());
    // Every one of the 64 forgeries was refused by its MAC.
    assert!(
        line.contains("bad_mac=64 foreign=0 sealed=true"),
        "{}",
        r.dump()
    );
    // The same attack without the MAC gets through (and the stream is then broken: the
    // real packets are taken for duplicates, so the job ends at --timeout).
    let r = forger(&[("PHALANX_MAC", "0")], "5");
    assert!(
        r.stdout.contains("forger: received FORGED"),
        "the forgery did not get through without the MAC, so this test stages nothing\n{}",
        r.dump()
    );
}

#[test]
fn mr_unprivileged_forgeries_fail_the_mac() {
    // The forger as an ordinary user: the bind of rank 2's address and port is refused,
    // and the datagrams from its own socket (job key, rank 2's number, the right
    // sequence numbers) fail the MAC; the real message arrives.
    let r = forger(&[("FORGER_AS", "user")], "60");
    assert!(r.ok(), "{}", r.dump());
    assert!(r.stdout.contains("forger: bind refused"), "{}", r.dump());
    assert!(
        r.stdout
            .contains("forger: received real!! bad_mac=64 foreign=0 sealed=true"),
        "{}",
        r.dump()
    );
}

#[test]
fn mr_startup_hijack_is_refused() {
    let (hijack, stress) = (example("hijack"), example("stress"));
    let script = format!(
        "if [ \"$PHALANX_RANK\" = 1 ]; then {}; fi; exec {}",
        hijack.display(),
        stress.display()
    );
    for transport in ["udp", "shm"] {
        let r = run(
            &["-n", "3", "--timeout", "60", "sh", "-c", &script],
            &[("PHALANX_TRANSPORT", transport)],
            LIMIT,
        );
        assert!(r.ok(), "{transport}\n{}", r.dump());
        assert!(r.stdout.contains("hijack: refused"), "{}", r.dump());
        assert!(
            r.stderr.contains("refused a boot connection")
                && r.stderr.contains("claiming rank 1")
                && r.stderr.contains("(1 refused)"),
            "{}",
            r.dump()
        );
        assert_eq!(
            r.stdout.matches("all checksums ok").count(),
            3,
            "{}",
            r.dump()
        );
    }
}
