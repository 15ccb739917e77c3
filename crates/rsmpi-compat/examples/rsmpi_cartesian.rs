//! rsmpi's Cartesian example (a 2×2 grid, periodic in its second dimension, on four or
//! more ranks), and a periodic ring on any number of ranks with a shift and a
//! send-receive around it.

use mpi::point_to_point as p2p;
use mpi::traits::*;

fn main() {
    let universe = mpi::initialize().unwrap();
    let comm = universe.world();
    let (rank, size) = (comm.rank(), comm.size());

    // A ring: every rank on it, both neighbours defined.
    let ring = comm
        .create_cartesian_communicator(&[size], &[true], false)
        .expect("every rank is on the ring");
    assert_eq!(comm.cartesian_map(&[size], &[true]), Some(rank));
    let (src, dst) = ring.shift(0, 1);
    let (src, dst) = (src.unwrap(), dst.unwrap());
    assert_eq!(dst, (rank + 1) % size);
    let (got, _): (i32, _) = p2p::send_receive(
        &rank,
        &ring.process_at_rank(dst),
        &ring.process_at_rank(src),
    );
    assert_eq!(got, src);
    assert_eq!(ring.coordinates_to_rank(&[-1]), size - 1, "periodic wrap");

    if size >= 4 {
        let grid = comm.create_cartesian_communicator(&[2, 2], &[false, true], true);
        let Some(cart) = grid else {
            assert!(rank >= 4);
            comm.barrier();
            println!("rank {rank} of {size}: cartesian ok");
            return;
        };
        assert_eq!(2, cart.num_dimensions());
        let mpi::topology::CartesianLayout {
            dims,
            periods,
            coords,
        } = cart.get_layout();
        assert_eq!([2 as mpi::Count, 2], &dims[..]);
        assert_eq!([false, true], &periods[..]);
        let (xrank, yrank) = (coords[0], coords[1]);
        assert_eq!(cart.coordinates_to_rank(&coords), cart.rank());

        let xcomm = cart.subgroup(&[true, false]);
        let ycomm = cart.subgroup(&[false, true]);
        assert_eq!((2, xrank), (xcomm.size(), xcomm.rank()));
        assert_eq!((2, yrank), (ycomm.size(), ycomm.rank()));

        // The first dimension is not periodic: one neighbour each.
        let (x_src, x_dest) = cart.shift(0, 1);
        if xrank == 0 {
            assert!(x_src.is_none());
            assert_eq!(cart.rank_to_coordinates(x_dest.unwrap())[0], 1);
        } else {
            assert!(x_dest.is_none());
            assert_eq!(cart.rank_to_coordinates(x_src.unwrap())[0], 0);
        }
        // The second is: both, the same rank on a 2-wide ring.
        let (y_src, y_dest) = cart.shift(1, 1);
        assert_eq!(y_src, y_dest);
        assert_eq!(cart.rank_to_coordinates(y_src.unwrap())[1], 1 - yrank);
    }
    comm.barrier();
    println!("rank {rank} of {size}: cartesian ok");
}
