//! Foreign traffic at every rank: random bytes and well-formed datagrams with a wrong
//! job key are sent to each rank's port; they must be dropped and counted, and the job
//! must still complete. Prints each rank's drop counters: with the kernel filter on they are
//! dropped (and counted) by the kernel, with `PHALANX_BPF=0` in user space — by the
//! datagram MAC (`bad_mac`), or with `PHALANX_MAC=0` by the header checks.
use phalanx::traits::*;
use rand::{Rng, SeedableRng};

fn main() {
    let universe = phalanx::initialize().expect("phalanx initialized twice");
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    const N: usize = 200;
    // Every rank has its kernel filter in place once the start-up barrier is passed
    // (before it, foreign datagrams are still dropped and counted, in user space).
    world.barrier();
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind intruder socket");
    let mut rng = rand::rngs::SmallRng::seed_from_u64(rank as u64);
    for r in 0..size as u32 {
        let Some(addr) = phalanx::testing::peer_addr(r) else {
            continue;
        };
        for i in 0..N {
            let len = rng.gen_range(0..200);
            let junk: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            let _ = sock.send_to(&junk, addr);
            // A well-formed datagram with a wrong key, claiming to come from rank r.
            let mut h = phalanx_wire::Header::new(phalanx_wire::Kind::GbnData, rng.gen(), r);
            h.msg = phalanx_wire::MsgKind::Eager;
            h.seq = i as u32;
            let _ = sock.send_to(&h.to_datagram(b"intruder"), addr);
        }
    }
    // Real traffic after the noise: a ring exchange, twice.
    for _ in 0..2 {
        let next = world.process_at_rank((rank + 1) % size);
        let prev = world.process_at_rank((rank + size - 1) % size);
        phalanx::request::scope(|s| {
            let r = next.immediate_send(s, &rank);
            let (v, _) = prev.receive::<i32>();
            assert_eq!(v, (rank + size - 1) % size);
            r.wait();
        });
    }
    let st = phalanx::testing::stats().expect("stats");
    println!(
        "intruder: rank {rank}: drop_malformed={} drop_foreign={} kernel_drops={} bad_mac={}",
        st.drop_malformed, st.drop_foreign, st.kernel_drops, st.bad_mac
    );
}
