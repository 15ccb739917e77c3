//! Every rank says hello; rank 0 collects a greeting from every other rank.
use phalanx::traits::*;

fn main() {
    let universe = phalanx::initialize().expect("phalanx initialized twice");
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    if rank == 0 {
        println!("hello from rank 0 of {size}");
        for _ in 1..size {
            let (msg, status) = world.any_process().receive_vec::<u8>();
            println!(
                "rank 0 got from rank {}: {}",
                status.source_rank(),
                String::from_utf8_lossy(&msg)
            );
        }
    } else {
        let text = format!("hello from rank {rank} of {size}");
        world.process_at_rank(0).send(text.as_bytes());
    }
}
