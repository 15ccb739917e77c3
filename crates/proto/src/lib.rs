//! phalanx sans-I/O reliability protocols.
//!
//! * [`gbn`]: go-back-n with lazy (piggy-backed) acknowledgements, seed 004 §5–6.
//! * [`urtp`]: URTP, reliable point-to-point and multicast FIFO with per-pair counters,
//!   receiver-driven REQs and block ACKs, seed 000 §3 and Appendix A.
//! * [`careful`]: the careful protocol for links declared reliable, seed 003.
//! * [`timers`]: the one timer table all three keep their deadlines in.
//!
//! Nothing in this crate reads a clock, does I/O or uses unseeded randomness: time is a
//! `u64` count of nanoseconds supplied by the caller, datagrams go in through
//! `handle_packet` and come out through `poll_transmit`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod careful;
pub mod gbn;
pub mod timers;
pub mod urtp;
