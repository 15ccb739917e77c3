//! Programs written for rsmpi 0.8 (the `mpi` crate), run on phalanx.
//!
//! Contract: this crate depends on phalanx under the name `mpi` — the only change a port
//! from rsmpi makes — and its examples use the API the way rsmpi's documentation does
//! (`use mpi::traits::*`, `mpi::initialize()`, `#[derive(Equivalence)]`, the
//! `mpi::point_to_point` free functions, `mpi::request` scopes and guards,
//! `mpi::environment`). `tests/rsmpi.rs` runs each example with the launcher on 2 and 3
//! ranks and checks what it prints. The library itself is empty.
