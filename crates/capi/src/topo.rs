//! Cartesian topologies: `MPI_Cart_create`, `MPI_Cart_get`, `MPI_Cartdim_get`,
//! `MPI_Cart_coords`, `MPI_Cart_rank`, `MPI_Cart_shift`, `MPI_Cart_sub`, `MPI_Cart_map`,
//! `MPI_Topo_test` and `MPI_Dims_create`, on the Rust API's
//! [`CartesianCommunicator`] (row-major, ranks not reordered). Graphs are in
//! [`crate::graph`], the neighbour collectives in [`crate::neighbor`]; `MPI_Topo_test`
//! answers for all three kinds.
//!
//! Contract: a communicator made by `MPI_Cart_create` or `MPI_Cart_sub` carries its grid
//! in its table entry; the `MPI_Cart_*` queries on any other communicator fail with
//! `MPI_ERR_TOPOLOGY`. Every argument is checked here (extents, lengths, ranks,
//! coordinates outside a non-periodic dimension) and a bad one is an error through the
//! communicator's handler — the Rust layer's fatal checks are never reached.

use crate::consts::*;
use crate::state;
use crate::{count, err, export, guard, out, typed, CResult};
use phalanx::topology::{CartesianCommunicator, Communicator};
use phalanx::Count;
use std::ffi::c_int;

const WORLD: Handle = COMM_WORLD as Handle;

/// The grid of communicator `h`, if it has one.
pub fn grid_of(h: Handle) -> Option<CartesianCommunicator> {
    state::with(|s| s.comms.get(&(h as usize)).and_then(|e| e.cart.clone()))
}

/// The grid of communicator `h` (`MPI_ERR_TOPOLOGY` if it has none).
fn cart(h: Handle) -> CResult<CartesianCommunicator> {
    state::comm(h)?;
    grid_of(h).ok_or_else(|| err(MPI_ERR_TOPOLOGY, "not a Cartesian communicator"))
}

/// `MPI_COMM_NULL` into a non-null output handle before anything can fail, so a caller
/// going on under `MPI_ERRORS_RETURN` never uses a garbage handle.
fn null_first(h: *mut Handle) -> CResult {
    if h.is_null() {
        return Err(err(MPI_ERR_ARG, "null output communicator"));
    }
    // SAFETY: a non-null output handle is writable (MPI contract).
    unsafe { h.write(COMM_NULL as Handle) };
    Ok(())
}

/// A new communicator handle for `c`, inheriting `parent`'s error handler.
pub fn add_cart(c: CartesianCommunicator, parent: Handle) -> Handle {
    let h = state::add_comm(c.as_simple().clone(), state::errhandler(parent));
    state::with(|s| {
        if let Some(e) = s.comms.get_mut(&(h as usize)) {
            e.cart = Some(c);
        }
    });
    h
}

/// Extents and periods as given, checked against a communicator of `size`.
///
/// # Safety
/// `dims` and `periods` hold `ndims` ints (MPI contract).
unsafe fn grid(
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    size: c_int,
) -> CResult<(Vec<Count>, Vec<bool>)> {
    let n = count(ndims)?;
    // SAFETY: the caller passes ndims ints in each.
    let (d, p) = unsafe {
        (
            typed::<c_int>(dims.cast(), n)?,
            typed::<c_int>(periods.cast(), n)?,
        )
    };
    let mut total: i64 = 1;
    for &x in d {
        if x <= 0 {
            return Err(err(MPI_ERR_DIMS, format!("extent {x} in {d:?}")));
        }
        total = total.saturating_mul(i64::from(x));
    }
    if total > i64::from(size) {
        return Err(err(
            MPI_ERR_DIMS,
            format!("a grid of {total} members on a communicator of {size}"),
        ));
    }
    Ok((d.to_vec(), p.iter().map(|&x| x != 0).collect()))
}

export!(MPI_Cart_create, PMPI_Cart_create,
        (comm_old: Handle, ndims: c_int, dims: *const c_int, periods: *const c_int,
         reorder: c_int, comm_cart: *mut Handle) -> c_int {
    guard("MPI_Cart_create", comm_old, || {
        null_first(comm_cart)?;
        let c = state::comm(comm_old)?;
        // SAFETY: ndims ints in dims and periods (MPI contract).
        let (d, p) = unsafe { grid(ndims, dims, periods, c.size())? };
        let h = match c.create_cartesian_communicator(&d, &p, reorder != 0) {
            Some(cc) => add_cart(cc, comm_old),
            None => COMM_NULL as Handle,
        };
        // SAFETY: writable handle (MPI contract).
        unsafe { out(comm_cart, h) }
    })
});

export!(MPI_Cartdim_get, PMPI_Cartdim_get, (comm: Handle, ndims: *mut c_int) -> c_int {
    guard("MPI_Cartdim_get", comm, || {
        let n = cart(comm)?.num_dimensions();
        // SAFETY: writable int (MPI contract).
        unsafe { out(ndims, n) }
    })
});

export!(MPI_Cart_get, PMPI_Cart_get,
        (comm: Handle, maxdims: c_int, dims: *mut c_int, periods: *mut c_int,
         coords: *mut c_int) -> c_int {
    guard("MPI_Cart_get", comm, || {
        let l = cart(comm)?.get_layout();
        let n = l.dims.len().min(count(maxdims)?);
        for i in 0..n {
            // SAFETY: maxdims writable ints in each array (MPI contract).
            unsafe {
                out(dims.add(i), l.dims[i])?;
                out(periods.add(i), c_int::from(l.periods[i]))?;
                out(coords.add(i), l.coords[i])?;
            }
        }
        Ok(())
    })
});

export!(MPI_Cart_coords, PMPI_Cart_coords,
        (comm: Handle, rank: c_int, maxdims: c_int, coords: *mut c_int) -> c_int {
    guard("MPI_Cart_coords", comm, || {
        let c = cart(comm)?;
        if rank < 0 || rank >= c.size() {
            return Err(err(MPI_ERR_RANK, format!("rank {rank} of {}", c.size())));
        }
        let xs = c.rank_to_coordinates(rank);
        for (i, &x) in xs.iter().take(count(maxdims)?).enumerate() {
            // SAFETY: maxdims writable ints (MPI contract).
            unsafe { out(coords.add(i), x)? };
        }
        Ok(())
    })
});

export!(MPI_Cart_rank, PMPI_Cart_rank,
        (comm: Handle, coords: *const c_int, rank: *mut c_int) -> c_int {
    guard("MPI_Cart_rank", comm, || {
        let c = cart(comm)?;
        let l = c.get_layout();
        // SAFETY: one int per dimension (MPI contract).
        let xs = unsafe { typed::<c_int>(coords.cast(), l.dims.len())? };
        for ((&x, &d), &p) in xs.iter().zip(&l.dims).zip(&l.periods) {
            if !p && !(0..d).contains(&x) {
                return Err(err(MPI_ERR_ARG, format!("coordinates {xs:?} off the grid")));
            }
        }
        // SAFETY: writable int (MPI contract).
        unsafe { out(rank, c.coordinates_to_rank(xs)) }
    })
});

export!(MPI_Cart_shift, PMPI_Cart_shift,
        (comm: Handle, direction: c_int, disp: c_int, rank_source: *mut c_int,
         rank_dest: *mut c_int) -> c_int {
    guard("MPI_Cart_shift", comm, || {
        let c = cart(comm)?;
        if direction < 0 || direction >= c.num_dimensions() {
            return Err(err(MPI_ERR_ARG, format!("direction {direction}")));
        }
        let (s, d) = c.shift(direction, disp);
        // SAFETY: two writable ints (MPI contract).
        unsafe {
            out(rank_source, s.unwrap_or(MPI_PROC_NULL))?;
            out(rank_dest, d.unwrap_or(MPI_PROC_NULL))
        }
    })
});

export!(MPI_Cart_sub, PMPI_Cart_sub,
        (comm: Handle, remain_dims: *const c_int, newcomm: *mut Handle) -> c_int {
    guard("MPI_Cart_sub", comm, || {
        null_first(newcomm)?;
        let c = cart(comm)?;
        let n = c.num_dimensions() as usize;
        // SAFETY: one int per dimension (MPI contract).
        let keep: Vec<bool> =
            unsafe { typed::<c_int>(remain_dims.cast(), n)? }.iter().map(|&x| x != 0).collect();
        let h = add_cart(c.subgroup(&keep), comm);
        // SAFETY: writable handle (MPI contract).
        unsafe { out(newcomm, h) }
    })
});

export!(MPI_Cart_map, PMPI_Cart_map,
        (comm: Handle, ndims: c_int, dims: *const c_int, periods: *const c_int,
         newrank: *mut c_int) -> c_int {
    guard("MPI_Cart_map", comm, || {
        let c = state::comm(comm)?;
        // SAFETY: ndims ints in dims and periods (MPI contract).
        let (d, p) = unsafe { grid(ndims, dims, periods, c.size())? };
        let r = c.cartesian_map(&d, &p).unwrap_or(MPI_UNDEFINED);
        // SAFETY: writable int (MPI contract).
        unsafe { out(newrank, r) }
    })
});

export!(MPI_Topo_test, PMPI_Topo_test, (comm: Handle, status: *mut c_int) -> c_int {
    guard("MPI_Topo_test", comm, || {
        state::comm(comm)?;
        let is_cart = state::with(|s| s.comms.get(&(comm as usize)).is_some_and(|e| e.cart.is_some()));
        let kind = match crate::graph::topo_of(comm).as_deref() {
            _ if is_cart => MPI_CART,
            Some(crate::graph::Topo::Graph { .. }) => MPI_GRAPH,
            Some(crate::graph::Topo::Dist { .. }) => MPI_DIST_GRAPH,
            None => MPI_UNDEFINED,
        };
        // SAFETY: writable int (MPI contract).
        unsafe { out(status, kind) }
    })
});

/// `MPI_Dims_create`'s balanced factorization: `nnodes` over the dimensions whose entry
/// is 0, the others kept; the filled entries non-increasing.
pub fn dims_create(nnodes: c_int, dims: &mut [c_int]) -> CResult {
    if nnodes <= 0 || dims.iter().any(|&d| d < 0) {
        return Err(err(MPI_ERR_DIMS, format!("{nnodes} nodes over {dims:?}")));
    }
    let mut fixed: i64 = 1;
    for &d in dims.iter().filter(|&&d| d > 0) {
        fixed = fixed.saturating_mul(i64::from(d));
        if fixed > i64::from(nnodes) {
            return Err(err(
                MPI_ERR_DIMS,
                format!("the fixed extents {dims:?} exceed {nnodes} nodes"),
            ));
        }
    }
    if i64::from(nnodes) % fixed != 0 {
        return Err(err(
            MPI_ERR_DIMS,
            format!("{nnodes} nodes are not a multiple of the fixed extents {dims:?}"),
        ));
    }
    let free = dims.iter().filter(|&&d| d == 0).count();
    let m = (i64::from(nnodes) / fixed) as c_int;
    if free == 0 {
        return if m == 1 {
            Ok(())
        } else {
            Err(err(
                MPI_ERR_DIMS,
                format!("{nnodes} nodes do not fill {dims:?}"),
            ))
        };
    }
    // The most balanced factorization: the smallest possible largest factor, then
    // recursively the same for the rest (72 over 2 is 9 x 8).
    let mut fill = balanced(m, free);
    fill.sort_unstable_by(|a, b| b.cmp(a));
    let mut it = fill.into_iter();
    for d in dims.iter_mut().filter(|d| **d == 0) {
        *d = it.next().unwrap_or(1);
    }
    Ok(())
}

/// The divisors of `m`, ascending (from its prime factors: at most a few thousand).
fn divisors(m: c_int) -> Vec<c_int> {
    let mut primes: Vec<(c_int, u32)> = Vec::new();
    let mut rest = m;
    let mut f: c_int = 2;
    while f <= rest / f {
        let mut k = 0;
        while rest % f == 0 {
            rest /= f;
            k += 1;
        }
        if k > 0 {
            primes.push((f, k));
        }
        f += 1;
    }
    if rest > 1 {
        primes.push((rest, 1));
    }
    let mut ds = vec![1 as c_int];
    for (p, k) in primes {
        let mut more = Vec::new();
        for &d in &ds {
            let mut x = d;
            for _ in 0..k {
                x *= p;
                more.push(x);
            }
        }
        ds.extend(more);
    }
    ds.sort_unstable();
    ds
}

/// `k` factors of `m`, non-increasing, the largest as small as possible.
fn balanced(m: c_int, k: usize) -> Vec<c_int> {
    fn split(m: c_int, k: usize, cap: c_int, ds: &[c_int]) -> Option<Vec<c_int>> {
        if k == 1 {
            return (m <= cap).then(|| vec![m]);
        }
        for &f in ds.iter().filter(|&&f| f <= cap && m % f == 0) {
            // The largest of k factors is at least the k-th root of m.
            if (f64::from(f)).powi(k as i32) < f64::from(m) * (1.0 - 1e-9) {
                continue;
            }
            if let Some(mut rest) = split(m / f, k - 1, f, ds) {
                rest.insert(0, f);
                return Some(rest);
            }
        }
        None
    }
    let ds = divisors(m);
    split(m, k, m, &ds).unwrap_or_else(|| {
        let mut v = vec![1; k];
        v[0] = m;
        v
    })
}

export!(MPI_Dims_create, PMPI_Dims_create,
        (nnodes: c_int, ndims: c_int, dims: *mut c_int) -> c_int {
    guard("MPI_Dims_create", WORLD, || {
        let n = count(ndims)?;
        // SAFETY: ndims writable ints (MPI contract); typed_mut checks null and alignment.
        let d = unsafe { crate::typed_mut::<c_int>(dims.cast(), n)? };
        dims_create(nnodes, d)
    })
});

#[cfg(test)]
mod tests {
    use super::dims_create;

    fn dims(n: i32, mut d: Vec<i32>) -> Vec<i32> {
        dims_create(n, &mut d).expect("valid");
        d
    }

    #[test]
    fn dims_are_balanced_and_non_increasing() {
        assert_eq!(dims(6, vec![0, 0]), [3, 2]);
        assert_eq!(dims(7, vec![0, 0]), [7, 1]);
        assert_eq!(dims(6, vec![0, 3, 0]), [2, 3, 1]);
        assert_eq!(dims(24, vec![0, 0, 0]), [4, 3, 2]);
        assert_eq!(dims(16, vec![0, 0]), [4, 4]);
        assert_eq!(dims(72, vec![0, 0]), [9, 8], "as balanced as possible");
        assert_eq!(
            dims(i32::MAX, vec![0, 0]),
            [i32::MAX, 1],
            "a large prime, quickly"
        );
        assert!(dims_create(4, &mut [65536, 65536, 65536, 65536]).is_err());
        assert_eq!(dims(1, vec![0, 0]), [1, 1]);
        assert!(dims_create(7, &mut [0, 3]).is_err());
        assert!(dims_create(0, &mut [0]).is_err());
        assert!(dims_create(6, &mut [2, 2]).is_err());
    }
}
