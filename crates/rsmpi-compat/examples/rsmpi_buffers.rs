//! rsmpi's buffer traits, the way rsmpi 0.8 programs use them: types of the program's own
//! made buffers by implementing `Pointer`/`PointerMut`, `Collection` and `AsDatatype`
//! (one with a predefined datatype, one with a strided `UserDatatype`) and sent,
//! received, broadcast, gathered and scattered; `count()` as a `Count` on values, slices,
//! vectors and arrays (an array is D elements); a derived struct with nested array
//! fields; `Partition`/`PartitionMut` read through `Partitioned`, `PartitionedBuffer`
//! and `PartitionedBufferMut`. Every value is checked exactly.

use mpi::datatype::{Partition, PartitionMut, UserDatatype};
use mpi::traits::*;
use mpi::Count;
use std::ffi::c_void;

/// Samples of the program's own: its buffer is the vector it holds.
#[derive(Debug, PartialEq)]
struct Samples {
    data: Vec<f64>,
}

unsafe impl Pointer for Samples {
    fn pointer(&self) -> *const c_void {
        self.data.as_ptr() as *const c_void
    }
}
unsafe impl PointerMut for Samples {
    fn pointer_mut(&mut self) -> *mut c_void {
        self.data.as_mut_ptr() as *mut c_void
    }
}
unsafe impl Collection for Samples {
    fn count(&self) -> Count {
        self.data.len() as Count
    }
}
unsafe impl AsDatatype for Samples {
    type Out = <f64 as Equivalence>::Out;
    fn as_datatype(&self) -> Self::Out {
        f64::equivalent_datatype()
    }
}
unsafe impl Buffer for Samples {}
unsafe impl BufferMut for Samples {}

/// Every other element of a vector: one element of a strided user datatype.
struct EveryOther {
    data: Vec<i32>,
    datatype: UserDatatype,
}

impl EveryOther {
    fn new(data: Vec<i32>) -> Self {
        let n = data.len().div_ceil(2) as Count;
        let datatype = UserDatatype::vector(n, 1, 2, &i32::equivalent_datatype());
        EveryOther { data, datatype }
    }
}

unsafe impl Pointer for EveryOther {
    fn pointer(&self) -> *const c_void {
        self.data.as_ptr() as *const c_void
    }
}
unsafe impl PointerMut for EveryOther {
    fn pointer_mut(&mut self) -> *mut c_void {
        self.data.as_mut_ptr() as *mut c_void
    }
}
unsafe impl Collection for EveryOther {
    fn count(&self) -> Count {
        1
    }
}
unsafe impl AsDatatype for EveryOther {
    type Out = UserDatatype;
    fn as_datatype(&self) -> Self::Out {
        self.datatype.clone()
    }
}
unsafe impl Buffer for EveryOther {}
unsafe impl BufferMut for EveryOther {}

/// A derived struct with nested array fields.
#[derive(Equivalence, Debug, PartialEq, Clone, Copy, Default)]
struct Cell {
    corners: [[f64; 3]; 4],
    id: u64,
    flags: [u8; 8],
}

/// The count of any buffer, as rsmpi's generic code reads it.
fn count_of<B: Buffer + ?Sized>(b: &B) -> Count {
    b.count()
}

/// The counts, displacements, start and element size of a partitioned buffer.
fn layout_of<P: PartitionedBuffer>(p: &P) -> (Vec<Count>, Vec<Count>, *const c_void) {
    (p.counts().to_vec(), p.displs().to_vec(), p.pointer())
}

/// The elements a partitioned receive buffer takes in all.
fn total_of<P: PartitionedBufferMut>(p: &mut P) -> (Count, *mut c_void) {
    (p.counts().iter().sum(), p.pointer_mut())
}

fn main() {
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    let rank = world.rank();
    let size = world.size();
    let next = world.process_at_rank((rank + 1) % size);
    let previous = world.process_at_rank((rank - 1 + size) % size);
    let from = (rank - 1 + size) % size;

    // count() is a Count: a value is 1, a slice, vector or array its length.
    let arr = [1i32, 2, 3, 4, 5];
    let c: Count = arr.count();
    assert_eq!(c, 5);
    assert_eq!(arr[1..].count(), 4 as Count);
    assert_eq!(vec![0u8; 7].count(), 7 as Count);
    assert_eq!(2.5f64.count(), 1 as Count);
    assert_eq!(count_of(&arr), 5);
    assert_eq!(count_of(&arr[..2]), 2);
    assert_eq!(count_of(&[[0f32; 3]; 2][0]), 3);
    assert_eq!(arr.pointer(), arr.as_ptr() as *const c_void);
    let s = Samples { data: vec![0.0; 3] };
    assert_eq!(count_of(&s), 3);

    // An array is D elements: sent as five i32s, received as a vector of five and into
    // an array of five.
    let mine = [rank; 5];
    mpi::request::scope(|scope| {
        let sreq = next.immediate_send(scope, &mine);
        let (v, status) = previous.receive_vec::<i32>();
        assert_eq!(v, vec![from; 5]);
        assert_eq!(status.count(i32::equivalent_datatype()), 5);
        sreq.wait();
    });
    let mut got = [-1i32; 5];
    mpi::request::scope(|scope| {
        let sreq = next.immediate_send(scope, &mine);
        previous.receive_into(&mut got);
        sreq.wait();
    });
    assert_eq!(got, [from; 5]);

    // A type of the program's own, sent and received around the ring.
    let out = Samples {
        data: (0..4).map(|i| (rank * 10 + i) as f64).collect(),
    };
    let mut into = Samples {
        data: vec![-1.0; 4],
    };
    mpi::request::scope(|scope| {
        let sreq = next.immediate_send(scope, &out);
        let status = previous.receive_into(&mut into);
        assert_eq!(status.count(f64::equivalent_datatype()), 4);
        sreq.wait();
    });
    let want: Vec<f64> = (0..4).map(|i| (from * 10 + i) as f64).collect();
    assert_eq!(into.data, want);

    // ... broadcast from rank 0, gathered to every rank.
    let mut b = Samples {
        data: if rank == 0 {
            vec![1.5, 2.5, 3.5]
        } else {
            vec![0.0; 3]
        },
    };
    world.process_at_rank(0).broadcast_into(&mut b);
    assert_eq!(b.data, [1.5, 2.5, 3.5]);
    let mut all = Samples {
        data: vec![0.0; 4 * size as usize],
    };
    world.all_gather_into(&out, &mut all);
    for r in 0..size {
        let at = 4 * r as usize;
        let want: Vec<f64> = (0..4).map(|i| (r * 10 + i) as f64).collect();
        assert_eq!(all.data[at..at + 4], want[..]);
    }

    // A type with a strided datatype of its own: every other element moves, the gaps of
    // the receive stay.
    let out = EveryOther::new((0..6).map(|i| rank * 100 + i).collect());
    let mut into = EveryOther::new(vec![-1; 6]);
    mpi::request::scope(|scope| {
        let sreq = next.immediate_send(scope, &out);
        previous.receive_into(&mut into);
        sreq.wait();
    });
    let f = |i| from * 100 + i;
    assert_eq!(into.data, [f(0), -1, f(2), -1, f(4), -1]);
    let mut b = EveryOther::new(if rank == 0 {
        vec![7, 8, 9, 10]
    } else {
        vec![0; 4]
    });
    world.process_at_rank(0).broadcast_into(&mut b);
    assert_eq!(
        b.data,
        if rank == 0 {
            [7, 8, 9, 10]
        } else {
            [7, 0, 9, 0]
        }
    );

    // A derived struct with nested arrays.
    let cell = |r: i32| Cell {
        corners: std::array::from_fn(|i| {
            std::array::from_fn(|j| (r * 12 + (i * 3 + j) as i32) as f64)
        }),
        id: r as u64 * 7,
        flags: [r as u8; 8],
    };
    let (got, status): (Cell, _) = mpi::point_to_point::send_receive(&cell(rank), &next, &previous);
    assert_eq!(got, cell(from));
    assert_eq!(status.count(Cell::equivalent_datatype()), 1);
    assert_eq!(status.count(f64::equivalent_datatype()), 12 + 2);
    let mut cells = vec![Cell::default(); size as usize];
    world.all_gather_into(&cell(rank), &mut cells[..]);
    assert!(cells.iter().enumerate().all(|(r, c)| *c == cell(r as i32)));

    // Partitions through rsmpi's traits: rank r gives r + 1 elements.
    let counts: Vec<Count> = (1..=size).collect();
    let displs: Vec<Count> = counts
        .iter()
        .scan(0, |acc, &c| {
            let d = *acc;
            *acc += c;
            Some(d)
        })
        .collect();
    let n = counts.iter().sum::<Count>() as usize;
    let mut everyone = vec![-1i32; n];
    {
        let mut partition = PartitionMut::new(&mut everyone[..], counts.clone(), &displs[..]);
        assert_eq!(total_of(&mut partition).0, n as Count);
        let mine: Vec<i32> = (0..=rank).map(|i| rank * 10 + i).collect();
        world.all_gather_varcount_into(&mine[..], &mut partition);
    }
    for r in 0..size {
        let d = displs[r as usize] as usize;
        assert!((0..=r).all(|i| everyone[d + i as usize] == r * 10 + i));
    }
    // Scattered from a partition of the program's own type.
    let source = Samples {
        data: (0..n).map(|i| i as f64 * 0.5).collect(),
    };
    let partition = Partition::new(&source, &counts[..], displs.clone());
    let (c, d, p) = layout_of(&partition);
    assert_eq!(
        (c, d, p),
        (counts.clone(), displs.clone(), source.pointer())
    );
    let mut mine = Samples {
        data: vec![-1.0; rank as usize + 1],
    };
    let root = world.process_at_rank(0);
    if rank == 0 {
        root.scatter_varcount_into_root(&partition, &mut mine);
    } else {
        root.scatter_varcount_into(&mut mine);
    }
    let d = displs[rank as usize] as usize;
    assert_eq!(mine.data, source.data[d..d + rank as usize + 1]);

    println!("rank {rank} of {size}: buffers ok");
}
