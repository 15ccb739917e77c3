//! Arbitrary bytes drive a `Urtp` of rank 0 in a job of 5; nothing panics, the bounds hold.
//! The body, its input layout and its invariants: `phalanx_fuzzing::urtp_input`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| phalanx_fuzzing::urtp_input(data));
