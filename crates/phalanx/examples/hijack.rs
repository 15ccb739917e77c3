//! A start-up hijack, as a stranger on the host would try it: it connects to the
//! launcher's rendezvous port (`PHALANX_BOOT`) before the real rank does and says hello
//! as that rank (`PHALANX_RANK`), without the job's secret. Prints what it got after its
//! hello: `hijack: refused` when the launcher closed the connection without sending
//! anything, `hijack: ACCEPTED …` if anything came back. Then exits 0 (a test runs the
//! real rank after it).
use phalanx_boot::frame::{encode, LineReader, Next};
use phalanx_boot::{Endpoint, Hello, HostInfo, LauncherMsg, RankMsg};
use std::io::{Read, Write};
use std::time::Duration;

fn main() {
    let boot = std::env::var("PHALANX_BOOT").expect("PHALANX_BOOT");
    let rank: u32 = std::env::var("PHALANX_RANK")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    let mut s = std::net::TcpStream::connect(&boot).expect("connect to the launcher");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut r = LineReader::new(1 << 16);
    match r.next_msg::<LauncherMsg, _>(&mut s) {
        Ok(Next::Msg(LauncherMsg::Challenge { .. })) => {}
        other => println!("hijack: no challenge first: {other:?}"),
    }
    let hello = RankMsg::Hello(Hello {
        rank,
        pid: std::process::id(),
        endpoint: Endpoint {
            addr: "127.0.0.1:9".parse().unwrap(),
            host: HostInfo::current(),
            recv_frames: 0,
        },
        proof: "00".repeat(32),
        clock_ns: 0,
    });
    s.write_all(&encode(&hello)).expect("send hello");
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    if got.is_empty() {
        println!("hijack: refused");
    } else {
        println!("hijack: ACCEPTED, got {}", String::from_utf8_lossy(&got));
    }
}
