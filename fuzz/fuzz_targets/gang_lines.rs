//! The job manager's protocol lines (line reader, `serde_json`, `read_challenge`) on chunked bytes.
//! The body, its input layout and its invariants: `phalanx_fuzzing::gang_lines`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| phalanx_fuzzing::gang_lines(data));
