//! Cartesian topologies (rsmpi's `CartesianCommunicator`, MPI §7.5).
//!
//! Contract: [`Communicator::create_cartesian_communicator`] lays the first
//! `product(dims)` members out on a grid in row-major order (the last dimension varies
//! fastest, as MPI's `MPI_Cart_create` without reordering — `reorder` is accepted and
//! keeps ranks, which MPI allows); members beyond the grid get `None`. A grid larger
//! than the communicator, a negative extent or mismatched lengths end the rank through
//! the error handler, as MPI's errors do. Coordinates and shifts are local arithmetic;
//! [`CartesianCommunicator::subgroup`] is collective (a split).

use super::{Color, Communicator, SimpleCommunicator};
use crate::{Count, Rank};

/// The grid of a [`CartesianCommunicator`]: extents, periodicity, and this rank's
/// coordinates, one entry per dimension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CartesianLayout {
    /// Extent of each dimension.
    pub dims: Vec<Count>,
    /// Whether each dimension wraps around.
    pub periods: Vec<bool>,
    /// This rank's coordinate in each dimension.
    pub coords: Vec<Count>,
}

/// A communicator whose members are laid out on a grid.
#[derive(Debug, Clone)]
pub struct CartesianCommunicator {
    comm: SimpleCommunicator,
    dims: Vec<Count>,
    periods: Vec<bool>,
}

impl Communicator for CartesianCommunicator {
    fn as_simple(&self) -> &SimpleCommunicator {
        &self.comm
    }
}

fn invalid(call: &str, what: String) -> ! {
    crate::runtime::fatal(call, crate::Error::InvalidArg(what))
}

/// The grid's size, checked (module docs).
pub(super) fn grid_size(call: &str, dims: &[Count], periods: &[bool], size: Rank) -> Rank {
    if dims.len() != periods.len() {
        invalid(
            call,
            format!("{} extents but {} periods", dims.len(), periods.len()),
        );
    }
    let mut n: i64 = 1;
    for &d in dims {
        if d <= 0 {
            invalid(call, format!("extent {d} in {dims:?}"));
        }
        n = n.saturating_mul(i64::from(d));
    }
    if n > i64::from(size) {
        invalid(
            call,
            format!("a grid of {n} members ({dims:?}) on a communicator of {size}"),
        );
    }
    n as Rank
}

impl CartesianCommunicator {
    /// The grid over `comm`'s first members (collective over `comm`; module docs).
    pub(super) fn create(
        comm: &SimpleCommunicator,
        dims: &[Count],
        periods: &[bool],
    ) -> Option<CartesianCommunicator> {
        let n = grid_size("create_cartesian_communicator", dims, periods, comm.size);
        let color = if comm.rank < n {
            Color::with_value(0)
        } else {
            Color::undefined()
        };
        let c = comm.split_by_color_with_key(color, comm.rank)?;
        Some(CartesianCommunicator::wrap(c, dims, periods))
    }

    /// `comm` with the grid `dims`/`periods`, which it records (kept by duplicates).
    pub(super) fn wrap(
        mut comm: SimpleCommunicator,
        dims: &[Count],
        periods: &[bool],
    ) -> CartesianCommunicator {
        comm.grid = Some(std::sync::Arc::new((dims.to_vec(), periods.to_vec())));
        CartesianCommunicator {
            comm,
            dims: dims.to_vec(),
            periods: periods.to_vec(),
        }
    }

    /// Number of dimensions (`MPI_Cartdim_get`).
    pub fn num_dimensions(&self) -> Count {
        self.dims.len() as Count
    }

    /// Extents, periods and this rank's coordinates (`MPI_Cart_get`).
    pub fn get_layout(&self) -> CartesianLayout {
        CartesianLayout {
            dims: self.dims.clone(),
            periods: self.periods.clone(),
            coords: self.rank_to_coordinates(self.comm.rank),
        }
    }

    /// The coordinates of `rank` (`MPI_Cart_coords`).
    pub fn rank_to_coordinates(&self, rank: Rank) -> Vec<Count> {
        if rank < 0 || rank >= self.comm.size {
            crate::runtime::fatal(
                "rank_to_coordinates",
                crate::Error::InvalidRank {
                    rank,
                    size: self.comm.size as usize,
                },
            );
        }
        let mut coords = vec![0; self.dims.len()];
        let mut r = rank;
        for (c, &d) in coords.iter_mut().zip(&self.dims).rev() {
            *c = r % d;
            r /= d;
        }
        coords
    }

    /// The rank at `coords` (`MPI_Cart_rank`): periodic dimensions wrap, a coordinate
    /// outside a non-periodic one is an error.
    pub fn coordinates_to_rank(&self, coords: &[Count]) -> Rank {
        if coords.len() != self.dims.len() {
            invalid(
                "coordinates_to_rank",
                format!(
                    "{} coordinates on a {}-d grid",
                    coords.len(),
                    self.dims.len()
                ),
            );
        }
        self.at(coords).unwrap_or_else(|| {
            invalid(
                "coordinates_to_rank",
                format!("{coords:?} outside the grid {:?}", self.dims),
            )
        })
    }

    /// The rank at `coords` if it is on the grid (periodic dimensions wrap).
    fn at(&self, coords: &[Count]) -> Option<Rank> {
        let mut r: Rank = 0;
        for ((&c, &d), &p) in coords.iter().zip(&self.dims).zip(&self.periods) {
            let c = if p {
                c.rem_euclid(d)
            } else if (0..d).contains(&c) {
                c
            } else {
                return None;
            };
            r = r * d + c;
        }
        Some(r)
    }

    /// The ranks `displacement` steps below and above this one along `dimension`
    /// (`MPI_Cart_shift`): (source, destination), `None` off a non-periodic edge.
    pub fn shift(&self, dimension: Count, displacement: Count) -> (Option<Rank>, Option<Rank>) {
        let Some(k) = usize::try_from(dimension)
            .ok()
            .filter(|&k| k < self.dims.len())
        else {
            invalid(
                "shift",
                format!("dimension {dimension} of a {}-d grid", self.dims.len()),
            );
        };
        let me = self.rank_to_coordinates(self.comm.rank);
        let (d, periodic) = (self.dims[k], self.periods[k]);
        // In i64: any displacement, wrapped exactly on a periodic dimension.
        let moved = |by: i64| {
            let x = i64::from(me[k]) + by;
            let x = if periodic {
                x.rem_euclid(i64::from(d))
            } else if (0..i64::from(d)).contains(&x) {
                x
            } else {
                return None;
            };
            let mut c = me.clone();
            c[k] = x as Count;
            self.at(&c)
        };
        let by = i64::from(displacement);
        (moved(-by), moved(by))
    }

    /// A duplicate of this communicator with the same grid (`MPI_Comm_dup` of a
    /// Cartesian communicator). Collective.
    pub fn duplicate(&self) -> CartesianCommunicator {
        CartesianCommunicator {
            comm: self.comm.duplicate(),
            dims: self.dims.clone(),
            periods: self.periods.clone(),
        }
    }

    /// The sub-grids that keep the dimensions marked `true` (`MPI_Cart_sub`): this
    /// rank's sub-grid, ranks in row-major order of the kept dimensions. Collective.
    pub fn subgroup(&self, retain: &[bool]) -> CartesianCommunicator {
        if retain.len() != self.dims.len() {
            invalid(
                "subgroup",
                format!("{} flags on a {}-d grid", retain.len(), self.dims.len()),
            );
        }
        let me = self.rank_to_coordinates(self.comm.rank);
        // Members with the same coordinates in the dropped dimensions share a sub-grid.
        let (mut color, mut key) = (0, 0);
        for ((&c, &d), &keep) in me.iter().zip(&self.dims).zip(retain) {
            if keep {
                key = key * d + c;
            } else {
                color = color * d + c;
            }
        }
        let pick = |v: &[Count]| -> Vec<Count> {
            v.iter()
                .zip(retain)
                .filter(|(_, &k)| k)
                .map(|(&x, _)| x)
                .collect()
        };
        let periods: Vec<bool> = self
            .periods
            .iter()
            .zip(retain)
            .filter(|(_, &k)| k)
            .map(|(&p, _)| p)
            .collect();
        let comm = match self
            .comm
            .split_by_color_with_key(Color::with_value(color), key)
        {
            Some(c) => c,
            None => invalid("subgroup", "no sub-grid for this rank".into()),
        };
        CartesianCommunicator::wrap(comm, &pick(&self.dims), &periods)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(rank: Rank, dims: &[Count], periods: &[bool]) -> CartesianCommunicator {
        let n: Count = dims.iter().product();
        CartesianCommunicator {
            comm: SimpleCommunicator::world(rank as u32, n as u32),
            dims: dims.to_vec(),
            periods: periods.to_vec(),
        }
    }

    #[test]
    fn coordinates_are_row_major_and_round_trip() {
        let g = grid(0, &[3, 4], &[false, true]);
        for r in 0..12 {
            let c = g.rank_to_coordinates(r);
            assert_eq!(c, vec![r / 4, r % 4]);
            assert_eq!(g.coordinates_to_rank(&c), r);
        }
        assert_eq!(
            g.coordinates_to_rank(&[1, -1]),
            7,
            "the periodic dimension wraps"
        );
        assert_eq!(g.at(&[3, 0]), None, "the other does not");
    }

    #[test]
    fn shifts_stop_at_open_edges_and_wrap_at_periodic_ones() {
        // Rank 4 is (1, 0) on a 3x4 grid periodic in its second dimension.
        let g = grid(4, &[3, 4], &[false, true]);
        assert_eq!(g.shift(0, 1), (Some(0), Some(8)));
        assert_eq!(g.shift(0, 2), (None, None));
        assert_eq!(g.shift(1, 1), (Some(7), Some(5)));
        assert_eq!(g.shift(1, -1), (Some(5), Some(7)));
        assert_eq!(
            g.shift(1, Count::MAX),
            (Some(5), Some(7)),
            "2^31 - 1 = 3 mod 4"
        );
        assert_eq!(g.shift(0, Count::MIN), (None, None));
        let layout = g.get_layout();
        assert_eq!(
            (layout.coords, layout.periods),
            (vec![1, 0], vec![false, true])
        );
    }
}
