//! Starts an [`SshNet`] of N namespaces (argument, default 4), prints its hostfile and
//! `--launcher-cmd`, and keeps it until stdin closes: for trying `phalanx run
//! --launcher ssh` by hand.

use phalanx_netns::SshNet;
use std::io::Read;

fn main() {
    let n = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(4);
    let net = match SshNet::create(n) {
        Ok(net) => net,
        Err(e) => {
            eprintln!("sshnet: {e}");
            std::process::exit(1);
        }
    };
    print!("{}", net.hostfile(2));
    println!("--launcher-cmd '{}'", net.launcher_cmd());
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}
