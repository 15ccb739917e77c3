//! Broadcasts of several sizes (0 bytes to `max_bytes`) from several roots, each checked
//! byte for byte on every rank; for exercising one broadcast algorithm
//! (`PHALANX_COLL_BCAST=tree|binomial|mcast`) under loss, duplication and reordering
//! (`PHALANX_FAULTS`). Exits non-zero on the first wrong byte.
//!
//! Usage: `phalanx run -n 16 bcast_check [max_bytes] [repeats]`.
use phalanx::traits::*;

fn byte(root: usize, len: usize, rep: usize, i: usize) -> u8 {
    (i.wrapping_mul(131) ^ root.wrapping_mul(7) ^ len ^ rep.wrapping_mul(17)) as u8
}

fn main() {
    let mut args = std::env::args().skip(1);
    let max: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1 << 20);
    let repeats: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    let universe = phalanx::initialize().expect("phalanx initialized twice");
    let world = universe.world();
    let (rank, p) = (world.rank() as usize, world.size() as usize);
    let mut sizes = vec![0usize, 1, 1000, 1472, 1473, 8000, 65536];
    sizes.retain(|&s| s < max);
    sizes.push(max);
    let mut checked = 0;
    for rep in 0..repeats {
        for &len in &sizes {
            for root in [0, p / 2, p - 1] {
                let mut buf: Vec<u8> = if rank == root {
                    (0..len).map(|i| byte(root, len, rep, i)).collect()
                } else {
                    vec![0xee; len]
                };
                world
                    .process_at_rank(root as i32)
                    .broadcast_into(&mut buf[..]);
                if let Some(i) = (0..len).find(|&i| buf[i] != byte(root, len, rep, i)) {
                    eprintln!("bcast_check: rank {rank}: {len} bytes from {root}: byte {i} wrong");
                    std::process::exit(1);
                }
                checked += 1;
            }
        }
    }
    println!("bcast_check: rank {rank} of {p}: {checked} broadcasts ok");
}
