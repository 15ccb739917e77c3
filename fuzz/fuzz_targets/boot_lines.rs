//! The start-up protocol's line reader and messages (`RankMsg`, `LauncherMsg`) on chunked bytes.
//! The body, its input layout and its invariants: `phalanx_fuzzing::boot_lines`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| phalanx_fuzzing::boot_lines(data));
