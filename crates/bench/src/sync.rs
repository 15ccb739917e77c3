//! A two-rank barrier from point-to-point messages (the point-to-point tests keep it so
//! they measure the same thing as the C benchmark's `pair_barrier`).

use phalanx::topology::SimpleCommunicator;
use phalanx::traits::*;

/// Tag reserved for synchronization messages.
const SYNC_TAG: phalanx::Tag = 999;

/// Returns on both ranks only after both have entered: rank 0 sends an empty message and
/// waits for the empty reply.
pub fn pair_barrier(world: &SimpleCommunicator) {
    let peer = world.process_at_rank(1 - world.rank());
    let empty: [u8; 0] = [];
    let mut sink: [u8; 0] = [];
    if world.rank() == 0 {
        peer.send_with_tag(&empty[..], SYNC_TAG);
        peer.receive_into_with_tag(&mut sink[..], SYNC_TAG);
    } else {
        peer.receive_into_with_tag(&mut sink[..], SYNC_TAG);
        peer.send_with_tag(&empty[..], SYNC_TAG);
    }
}
