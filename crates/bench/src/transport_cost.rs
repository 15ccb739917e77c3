//! Seed 002 on this host's UDP transport, without the launcher (one process, loopback):
//!
//! * `calibrate`: the cost model's lines (seed 002 §2 and appendix), measured by
//!   [`phalanx_transport::cost::measure`] (its docs say what each line times): one row
//!   per packet size, the fitted lines, λ per message size. With `--save` the figures go
//!   to this host's cache, where `phalanx run` reads them for its jobs.
//! * `multisend`: one datagram of each size (up to 16 KiB) to k = 1 … 15 destinations as
//!   one multi-send (one `sendmmsg`) against k separate sends (k `sendto`), timed until
//!   the last destination has it; prints both latencies, the factor, and the system calls
//!   of each (the transport's own counters).
//!
//! Timings are medians of alternating blocks (multi, separate, multi, …): the machine is
//! shared and noisy.

use phalanx_transport::cost::{measure, median, sizes, Loopback, BLOCKS, REPS};
use phalanx_transport::Transport;
use std::time::Instant;

/// Most destinations of `multisend`.
const MAX_DESTS: usize = 15;

/// `phalanx-bench calibrate [--save]` (module docs).
pub fn calibrate(save: bool) -> std::io::Result<()> {
    println!("# phalanx-bench calibrate: loopback UDP, medians of {BLOCKS} blocks of {REPS}");
    println!(
        "# {:>8} {:>10} {:>10} {:>10}",
        "Size", "send(us)", "xmit(us)", "recv(us)"
    );
    let model = measure(|m, send, xmit, recv| {
        println!("  {m:>8} {send:>10.2} {xmit:>10.2} {recv:>10.2}");
    })?;
    let max = Loopback::new(1)?.max();
    println!("# fitted lines (us = a + b*bytes):");
    for (name, l) in [
        ("send", model.send),
        ("xmit", model.xmit),
        ("recv", model.recv),
    ] {
        println!("#   {name}: {:.3} + {:.6} * m", l.a, l.b);
    }
    println!(
        "# lambda per message size (packets of at most {} bytes):",
        max
    );
    println!("# {:>8} {:>6}", "Size", "lambda");
    for m in [1usize, 64, 1024, 4096, 16384, 65536, 1 << 20] {
        println!("  {m:>8} {:>6}", model.lambda(m, max));
    }
    println!("PHALANX_COST={}", model.format());
    if save {
        let path = phalanx::coll::cost::cache_path().ok_or_else(|| {
            std::io::Error::other("no cache directory (set HOME or XDG_CACHE_HOME)")
        })?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, model.format() + "\n")?;
        println!("# saved to {}", path.display());
    }
    Ok(())
}

/// `phalanx-bench multisend` (module docs).
pub fn multisend(max_size: usize) -> std::io::Result<()> {
    let mut net = Loopback::new(MAX_DESTS)?;
    let all: Vec<u32> = (1..=MAX_DESTS as u32).collect();
    println!("# phalanx-bench multisend: one multi-send (sendmmsg) vs k sends (sendto),");
    println!("# time until the last destination has the datagram, medians of {BLOCKS} alternating blocks of {REPS}");
    println!(
        "# {:>8} {:>4} {:>12} {:>12} {:>8} {:>14} {:>14}",
        "Size", "k", "multi(us)", "separate(us)", "factor", "calls/multi", "calls/separate"
    );
    for m in sizes(net.max(), max_size.min(16384)) {
        let data = net.payload(m).to_vec();
        for k in 1..=MAX_DESTS {
            let (mut mt, mut st) = (Vec::new(), Vec::new());
            let (mut m_calls, mut s_calls) = (0u64, 0u64);
            for _ in 0..BLOCKS {
                let before = net.tx.stats();
                let t = Instant::now();
                for _ in 0..REPS {
                    let _ = net.tx.multi_send(&data, &all[..k]);
                    net.take_one(k - 1);
                }
                mt.push(t.elapsed().as_secs_f64() * 1e6 / REPS as f64);
                m_calls += net.tx.stats().send_calls - before.send_calls;
                for i in 0..k - 1 {
                    net.drain(i);
                }
                let before = net.tx.stats();
                let t = Instant::now();
                for _ in 0..REPS {
                    for p in &all[..k] {
                        let _ = net.tx.send_to(*p, &data);
                    }
                    net.take_one(k - 1);
                }
                st.push(t.elapsed().as_secs_f64() * 1e6 / REPS as f64);
                s_calls += net.tx.stats().send_calls - before.send_calls;
                for i in 0..k - 1 {
                    net.drain(i);
                }
            }
            let (mm, sm) = (median(mt), median(st));
            let ops = (BLOCKS * REPS) as f64;
            println!(
                "  {m:>8} {k:>4} {mm:>12.2} {sm:>12.2} {:>8.2} {:>14.1} {:>14.1}",
                sm / mm,
                m_calls as f64 / ops,
                s_calls as f64 / ops
            );
        }
    }
    Ok(())
}
