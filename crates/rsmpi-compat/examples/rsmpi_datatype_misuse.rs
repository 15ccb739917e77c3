//! Misuse of rsmpi's datatype API, one case per argument: each ends the rank through
//! the error handler with a message naming the call (never a panic, never a read or
//! write outside a buffer).

use mpi::datatype::{MutView, UserDatatype, View};
use mpi::traits::*;

fn main() {
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    let case = std::env::args().nth(1).unwrap_or_default();
    let int = i32::equivalent_datatype();
    let data = [0i32; 4];
    match case.as_str() {
        "view" => {
            // Three strided elements reach 36 bytes into a 16-byte buffer.
            let t = UserDatatype::vector(2, 1, 2, &int);
            let v = unsafe { View::with_count_and_datatype(&data[..], 3, &t) };
            world.process_at_rank(0).send(&v);
        }
        "mutview" => {
            let t = UserDatatype::contiguous(5, &int);
            let mut out = [0i32; 4];
            let _ = unsafe { MutView::with_count_and_datatype(&mut out[..], 1, &t) };
        }
        "vector" => {
            let _ = UserDatatype::vector(-1, 1, 1, &int);
        }
        "structured" => {
            let _ = UserDatatype::structured(&[1, 1], &[0], &[&int, &int]);
        }
        "unpack" => {
            let mut out = [0i32; 4];
            unsafe { world.unpack_into(&[0u8; 8], &mut out[..], 0) };
        }
        "pack" => {
            let mut out = [0u8; 8];
            world.pack_into(&data[..], &mut out, 0);
        }
        _ => {}
    }
    println!(
        "rank {} of {}: misuse {case:?} not caught",
        world.rank(),
        world.size()
    );
}
