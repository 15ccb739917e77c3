//! The PMI-1/PMI-2 client against a server whose replies are the input.
//! The body, its input layout and its invariants: `phalanx_fuzzing::pmi_wire`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| phalanx_fuzzing::pmi_wire(data));
