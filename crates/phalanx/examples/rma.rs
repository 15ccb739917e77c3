//! One-sided communication, every operation under every synchronization, each result
//! checked: put, get, accumulate, get-accumulate, fetch-and-op and compare-and-swap
//! under fence, post-start-complete-wait and locks (exclusive, shared, lock-all,
//! flush), on allocated, created, dynamic and shared windows, with contiguous and
//! strided datatypes and data larger than a control message.
//!
//! Usage: `phalanx run -n P rma [elements]` (default 3000 u64 per rank, which sends the
//! data of most operations after their control message). Prints "rma ok" per rank.
use phalanx::datatype::TypeMap;
use phalanx::rma::{AccOp, LockKind, Window, MODE_NOPRECEDE, MODE_NOSUCCEED};
use phalanx::traits::*;
use phalanx_core::coll::ops::OpKind;

fn u64t() -> TypeMap {
    phalanx::datatype::type_map_of::<u64>()
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let universe = phalanx::initialize().expect("initialize");
    let world = universe.world();
    let (me, p) = (world.rank() as usize, world.size() as usize);
    let next = (me + 1) % p;
    let prev = (me + p - 1) % p;
    let t = u64t();

    // --- fence: put to the next rank, get from it, accumulate into everyone ---
    let mut w = Window::allocate(&world, n * 8 * (p + 1), 8).expect("allocate");
    let base = w.base() as *mut u64;
    let mine: Vec<u64> = (0..n).map(|i| (me * 1_000_000 + i) as u64).collect();
    w.fence(MODE_NOPRECEDE).unwrap();
    // SAFETY: `mine` outlives the epoch; the ranges lie in the windows.
    unsafe {
        w.put(
            mine.as_ptr() as *const u8,
            n,
            &t,
            next,
            (me * n) as u64,
            n,
            &t,
        )
        .unwrap();
    }
    w.fence(0).unwrap();
    // SAFETY: the window holds n * p elements.
    let got = unsafe { std::slice::from_raw_parts(base.add(prev * n), n) };
    let want: Vec<u64> = (0..n).map(|i| (prev * 1_000_000 + i) as u64).collect();
    assert_eq!(got, &want[..], "rank {me}: put under fence");
    let mut back = vec![0u64; n];
    // SAFETY: as above.
    unsafe {
        w.get(
            back.as_mut_ptr() as *mut u8,
            n,
            &t,
            next,
            (me * n) as u64,
            n,
            &t,
        )
        .unwrap();
    }
    // Everyone adds (rank + 1) to every element of the extra block p of every rank.
    let ones: Vec<u64> = vec![(me + 1) as u64; n];
    for r in 0..p {
        // SAFETY: as above.
        unsafe {
            w.accumulate(
                ones.as_ptr() as *const u8,
                n,
                &t,
                r,
                (p * n) as u64,
                n,
                &t,
                AccOp::Op(OpKind::Sum),
            )
            .unwrap();
        }
    }
    w.fence(MODE_NOSUCCEED).unwrap();
    assert_eq!(back, mine, "rank {me}: get under fence");
    let sum: u64 = (1..=p as u64).sum();
    // SAFETY: block p of this rank's window.
    let blkp = unsafe { std::slice::from_raw_parts(base.add(p * n), n) };
    for (i, &v) in blkp.iter().enumerate() {
        assert_eq!(v, sum, "rank {me}: accumulate under fence, element {i}");
    }

    // --- strided target datatype: every other element of block `me` at the next rank ---
    let strided = TypeMap::try_vector(n as i64 / 2, 1, 2, &t).expect("vector");
    w.fence(MODE_NOPRECEDE).unwrap();
    let halves: Vec<u64> = (0..n / 2).map(|i| 7_000_000 + i as u64).collect();
    // SAFETY: n/2 elements at stride 2 lie inside block `me` of the target.
    unsafe {
        w.put(
            halves.as_ptr() as *const u8,
            n / 2,
            &t,
            next,
            (me * n) as u64,
            1,
            &strided,
        )
        .unwrap();
    }
    w.fence(MODE_NOSUCCEED).unwrap();
    // SAFETY: as above.
    let blk = unsafe { std::slice::from_raw_parts(base.add(prev * n), n) };
    for i in 0..n / 2 {
        assert_eq!(blk[2 * i], 7_000_000 + i as u64, "rank {me}: strided put");
        assert_eq!(blk[2 * i + 1], (prev * 1_000_000 + 2 * i + 1) as u64);
    }

    // --- errors: outside the window, outside an epoch ---
    let e = unsafe { w.put(mine.as_ptr() as *const u8, 1, &t, next, 0, 1, &t) };
    assert!(e.is_err(), "put outside an epoch must fail");
    w.fence(MODE_NOPRECEDE).unwrap();
    let e = unsafe {
        w.put(
            mine.as_ptr() as *const u8,
            n,
            &t,
            next,
            (n * p + 1) as u64,
            n,
            &t,
        )
    };
    assert!(e.is_err(), "put beyond the window must fail");
    w.fence(MODE_NOSUCCEED).unwrap();

    // --- locks: a counter on rank 0 by fetch-and-op under exclusive locks ---
    world.barrier();
    if me == 0 {
        // SAFETY: rank 0's window, before anyone locks it.
        unsafe { *base = 0 };
    }
    world.barrier();
    let rounds = 20;
    let mut seen = Vec::new();
    for _ in 0..rounds {
        w.lock(LockKind::Exclusive, 0, 0).unwrap();
        let one = 1u64;
        let mut old = 0u64;
        // SAFETY: one element at displacement 0 of rank 0.
        unsafe {
            w.get_accumulate(
                &one as *const u64 as *const u8,
                1,
                &t,
                &mut old as *mut u64 as *mut u8,
                1,
                &t,
                0,
                0,
                1,
                &t,
                AccOp::Op(OpKind::Sum),
            )
            .unwrap();
        }
        w.unlock(0).unwrap();
        seen.push(old);
    }
    world.barrier();
    if me == 0 {
        // SAFETY: rank 0's window after everyone unlocked.
        assert_eq!(
            unsafe { *base },
            (rounds * p) as u64,
            "fetch-and-op counter"
        );
    }
    seen.dedup();
    assert_eq!(
        seen.len(),
        rounds,
        "rank {me}: every fetched value distinct"
    );

    // --- compare-and-swap: one winner per round under a shared lock ---
    world.barrier();
    if me == 0 {
        // SAFETY: as above.
        unsafe { *base = u64::MAX };
    }
    world.barrier();
    w.lock_all(0).unwrap();
    let mine_id = me as u64;
    let free = u64::MAX;
    let mut old = 0u64;
    // SAFETY: one element at rank 0.
    unsafe {
        w.compare_and_swap(
            &mine_id as *const u64 as *const u8,
            &free as *const u64 as *const u8,
            &mut old as *mut u64 as *mut u8,
            &t,
            0,
            0,
        )
        .unwrap();
    }
    w.flush(0).unwrap();
    w.unlock_all().unwrap();
    let won = u64::from(old == u64::MAX);
    let mut winners = 0u64;
    world.all_reduce_into(
        &won,
        &mut winners,
        phalanx::collective::SystemOperation::sum(),
    );
    assert_eq!(winners, 1, "exactly one compare-and-swap wins");

    // --- shared lock, large get from the previous rank ---
    world.barrier();
    w.lock(LockKind::Shared, prev, 0).unwrap();
    let mut big = vec![0u64; n];
    let r = unsafe {
        w.get(
            big.as_mut_ptr() as *mut u8,
            n,
            &t,
            prev,
            (n * ((prev + p - 1) % p)) as u64,
            n,
            &t,
        )
        .unwrap()
    };
    let req = w.request_of(r).unwrap();
    w.unlock(prev).unwrap();
    phalanx_core::capi_support::wait(req).unwrap();
    let pp = (prev + p - 1) % p;
    // (Element 0 of rank 0 held the counters above.)
    for (i, &v) in big
        .iter()
        .enumerate()
        .skip(usize::from(prev == 0 && pp == 0))
    {
        let want = if i % 2 == 0 && i / 2 < n / 2 {
            7_000_000 + (i / 2) as u64
        } else {
            (pp * 1_000_000 + i) as u64
        };
        assert_eq!(v, want, "rank {me}: get under a shared lock, element {i}");
    }
    world.barrier();

    // --- post-start-complete-wait on a created window: ring neighbours ---
    let mut mem = vec![0u64; n];
    // SAFETY: `mem` outlives the window (freed below, before `mem`).
    let mut cw = unsafe { Window::create(&world, mem.as_mut_ptr() as *mut u8, n * 8, 8) }.unwrap();
    cw.post(&[prev], 0).unwrap();
    cw.start(&[next], 0).unwrap();
    // SAFETY: `mine` outlives the epoch.
    unsafe {
        cw.put(mine.as_ptr() as *const u8, n, &t, next, 0, n, &t)
            .unwrap();
    }
    cw.complete().unwrap();
    cw.wait().unwrap();
    let want: Vec<u64> = (0..n).map(|i| (prev * 1_000_000 + i) as u64).collect();
    assert_eq!(mem, want, "rank {me}: put under post/start/complete/wait");
    cw.free().unwrap();

    // --- dynamic window: attach, exchange addresses, put ---
    let dw = Window::create_dynamic(&world).unwrap();
    let mut dmem = vec![0u64; 4];
    // SAFETY: `dmem` outlives the attachment (detached below).
    unsafe { dw.attach(dmem.as_mut_ptr() as *mut u8, 32).unwrap() };
    let addr = dmem.as_ptr() as u64;
    let mut addrs = vec![0u64; p];
    world.all_gather_into(&addr, &mut addrs[..]);
    let mut dw = dw;
    dw.fence(MODE_NOPRECEDE).unwrap();
    let v = [me as u64 + 100; 4];
    // SAFETY: four elements at the next rank's attached memory.
    unsafe {
        dw.put(v.as_ptr() as *const u8, 4, &t, next, addrs[next], 4, &t)
            .unwrap()
    };
    dw.fence(MODE_NOSUCCEED).unwrap();
    assert_eq!(
        dmem,
        vec![prev as u64 + 100; 4],
        "rank {me}: dynamic window"
    );
    dw.detach(dmem.as_ptr() as *const u8).unwrap();
    dw.free().unwrap();

    // --- shared window: direct loads of the neighbour's part ---
    let sw = Window::allocate_shared(&world, 64, 8);
    if let Ok(sw) = sw {
        // SAFETY: this rank's part holds 64 bytes.
        unsafe { *(sw.base() as *mut u64) = me as u64 * 3 };
        world.barrier();
        let (b, s, d) = sw.shared_query(next).unwrap();
        assert_eq!((s, d), (64, 8));
        // SAFETY: the neighbour's part, written before the barrier.
        assert_eq!(
            unsafe { *(b as *const u64) },
            next as u64 * 3,
            "shared window"
        );
        world.barrier();
        sw.free().unwrap();
    }

    w.free().unwrap();
    println!("rma ok rank {me}");
}
