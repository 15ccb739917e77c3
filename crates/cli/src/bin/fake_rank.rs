//! `phalanx-fake-rank`: a stand-in rank program for the launcher's tests.
//!
//! Contract: binds a UDP socket on the address `PHALANX_IP` selects (as the library does:
//! unset → 127.0.0.1, `auto` → the first non-loopback address), does the boot handshake,
//! prints one line `fake-rank rank=R size=N pid=P ip=A table=T args=[...]` to stdout, then behaves per its first
//! argument. Only rank 1 misbehaves; every other rank (and rank 1 in `ok`) sends a stats
//! line, reports `Drained` and exits 0 after `Release`, answering `Query` meanwhile.
//! Modes: `ok`, `warn` (drained with a warning), `panic`, `exit3`, `sigkill`, `nofinalize`
//! (exit 0 without Drained), `hang` (sleep forever answering Query), `hangterm` (same,
//! ignoring SIGTERM and Abort), `badhost` (claims another protocol version). Any `Abort` or loss of
//! the launcher makes the rank exit 1.

use phalanx_boot::{BootClient, BootEnv, Control, Endpoint, HostInfo};
use std::io::Write;
use std::net::{SocketAddr, UdpSocket};
use std::process::exit;
use std::time::Duration;

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "ok".into());
    let rest: Vec<String> = args.collect();
    let spec = std::env::var("PHALANX_IP").ok();
    let ip =
        phalanx_transport::resolve_bind_ip(spec.as_deref()).unwrap_or_else(|e| die(&e.to_string()));
    let udp = UdpSocket::bind((ip, 0)).unwrap_or_else(|e| die(&format!("bind {ip}: {e}")));
    let addr = match udp.local_addr() {
        Ok(SocketAddr::V4(a)) => a,
        other => die(&format!("unexpected local address {other:?}")),
    };
    let env = match BootEnv::from_env() {
        Ok(Some(env)) => env,
        Ok(None) => {
            println!("fake-rank singleton pid={}", std::process::id());
            return;
        }
        Err(e) => die(&e.to_string()),
    };
    let victim = env.rank == 1;
    let mut host = HostInfo::current();
    if victim && mode == "badhost" {
        host.abi_version += 1000;
    }
    let endpoint = Endpoint {
        addr,
        host,
        recv_frames: 0,
    };
    let (mut client, table) = BootClient::connect(&env, endpoint, Duration::from_secs(30))
        .unwrap_or_else(|e| die(&format!("rank {}: {e}", env.rank)));
    println!(
        "fake-rank rank={} size={} pid={} ip={} table={} args={rest:?}",
        env.rank,
        env.size,
        std::process::id(),
        addr.ip(),
        table.endpoints.len()
    );
    if victim {
        match mode.as_str() {
            "panic" => panic!("fake rank 1 panics on purpose"),
            "exit3" => exit(3),
            "sigkill" => {
                // SAFETY: kill(2) on our own pid; no memory is involved.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            }
            "nofinalize" => exit(0),
            "hangterm" => {
                // SAFETY: setting a signal disposition to SIG_IGN installs no handler code.
                unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
                serve(&mut client, "waiting in receive from rank 0", Until::Never);
            }
            "hang" => serve(&mut client, "waiting in receive from rank 0", Until::Abort),
            _ => {}
        }
    }
    let stats = phalanx_boot::RankStats {
        counters: vec![("sent".into(), 2 + u64::from(env.rank))],
        collectives: vec![("barrier".into(), format!("mode-{mode}"), 1)],
    };
    client
        .send_stats(stats)
        .unwrap_or_else(|e| die(&e.to_string()));
    let warning = (mode == "warn").then(|| format!("rank {} gave up on peer 0", env.rank));
    client
        .send_drained(warning)
        .unwrap_or_else(|e| die(&e.to_string()));
    serve(
        &mut client,
        "finalize: drained, waiting for release",
        Until::Release,
    );
}

/// How long [`serve`] keeps going.
#[derive(PartialEq)]
enum Until {
    /// Return on `Release`, exit 1 on `Abort`.
    Release,
    /// Exit 1 on `Abort`.
    Abort,
    /// Ignore even `Abort` (a rank stuck outside any phalanx call); only a signal ends it.
    Never,
}

/// Answers queries with `status` until `until` says stop.
fn serve(client: &mut BootClient, status: &str, until: Until) {
    loop {
        match client.poll() {
            Ok(Some(Control::Query)) => client
                .reply_status(status)
                .unwrap_or_else(|e| die(&e.to_string())),
            Ok(Some(Control::Release)) if until == Until::Release => return,
            Ok(Some(
                Control::Release | Control::Shm(_) | Control::Continue | Control::Spawned(_),
            )) => {}
            // Nothing to drain: halted at once.
            Ok(Some(Control::Halt(_))) => client
                .send_halted(0, 0, 0, 0, None)
                .unwrap_or_else(|e| die(&e.to_string())),
            Ok(Some(Control::Abort(_))) if until == Until::Never => {}
            Ok(Some(Control::Abort(reason))) => die(&format!("aborted: {reason}")),
            Err(_) if until == Until::Never => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => die(&e.to_string()),
        }
    }
}

fn die(msg: &str) -> ! {
    // One write, so that a rank killed right afterwards never leaves half a line.
    let line = format!("fake-rank: {msg}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    exit(1)
}
