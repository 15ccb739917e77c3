//! Attribute caching on communicators (rsmpi's `mpi::attribute`, MPI §7.7).
//!
//! Contract: an attribute is a value of a type implementing [`CommAttribute`], cached on
//! a communicator under the type's [`AttributeKey`] with
//! [`AnyCommunicator::set_attr`](super::AnyCommunicator::set_attr) and read back by
//! reference with [`AnyCommunicator::get_attr`](super::AnyCommunicator::get_attr).
//! Handles of one communicator (clones, every `universe.world()`) share its attributes;
//! a communicator made by `duplicate` starts with clones of the attributes whose type
//! says [`CommAttribute::CLONE_ON_DUP`] (MPI's copy callback), every other way of making
//! one (split, subgroup, Cartesian) starts with none. Values are dropped (MPI's delete
//! callback) when the communicator's last handle goes (the world's: at thread exit). A
//! replaced value stops being visible at once but is dropped with the others, not at
//! the replacement: a reference that `get_attr` returned through another handle of the
//! same communicator may still point to it (so a program that replaces a value in a loop
//! holds every old one until the communicator goes).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Keys handed out by [`CommAttribute::get_key`], by type.
static KEYS: Mutex<Option<HashMap<TypeId, i32>>> = Mutex::new(None);
/// The next key (user keys start where MPI's predefined ones end).
static NEXT_KEY: AtomicI32 = AtomicI32::new(1000);

/// User data cached on communicators (rsmpi's `CommAttribute`): implement it for a type
/// (`impl CommAttribute for MyData {}`) and use `set_attr`/`get_attr`. Values are `Send`
/// and `Sync`: a communicator's handles may live on several threads.
pub trait CommAttribute: 'static + Sized + Clone + Send + Sync {
    /// Whether `duplicate` gives the new communicator a clone of the value (`true`) or
    /// nothing (`false`, the default), as MPI's copy callback decides.
    const CLONE_ON_DUP: bool = false;

    /// The key this type's values are cached under: one per type, made on first use
    /// (`MPI_Comm_create_keyval`).
    fn get_key() -> AttributeKey {
        let id = TypeId::of::<Self>();
        let mut keys = KEYS.lock().unwrap_or_else(|p| p.into_inner());
        let k = *keys
            .get_or_insert_with(HashMap::new)
            .entry(id)
            .or_insert_with(|| NEXT_KEY.fetch_add(1, Ordering::Relaxed));
        AttributeKey(k)
    }
}

/// The key an attribute is cached under (an MPI keyval).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AttributeKey(i32);

impl AttributeKey {
    /// A key from a raw keyval number, for [`CommAttribute::get_key`] implementations that
    /// share a key on purpose.
    ///
    /// # Safety
    /// Kept `unsafe` as in rsmpi; phalanx checks the value's type on every read, so a
    /// shared or made-up key only makes `get_attr` return `None`.
    pub unsafe fn new_unchecked(k: i32) -> AttributeKey {
        AttributeKey(k)
    }

    /// The keyval number.
    pub fn as_raw(&self) -> i32 {
        self.0
    }
}

/// A cached value of any attribute type.
trait Stored: Send + Sync {
    /// A clone for a duplicate, if the type's [`CommAttribute::CLONE_ON_DUP`] asks.
    fn dup(&self) -> Option<Box<dyn Stored>>;
    /// The value, to downcast.
    fn as_any(&self) -> &dyn Any;
}

impl<A: CommAttribute> Stored for A {
    fn dup(&self) -> Option<Box<dyn Stored>> {
        A::CLONE_ON_DUP.then(|| Box::new(self.clone()) as Box<dyn Stored>)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// `m` locked (a panic while it was held left nothing half-done here).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The attributes of one communicator (shared by its handles through an `Arc`).
#[derive(Default)]
pub(crate) struct Attributes {
    /// The current value of each key.
    live: Mutex<Vec<(i32, Box<dyn Stored>)>>,
    /// Replaced values a reference may still point to (module docs).
    retired: Mutex<Vec<Box<dyn Stored>>>,
}

impl std::fmt::Debug for Attributes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<i32> = lock(&self.live).iter().map(|(k, _)| *k).collect();
        f.debug_struct("Attributes").field("keys", &keys).finish()
    }
}

/// The world's attributes, shared by every world handle.
static WORLD: crate::runtime::Shared<Arc<Attributes>> =
    crate::runtime::Shared::new(|| Arc::new(Attributes::default()));

impl Attributes {
    /// The world communicator's attributes.
    pub(crate) fn world() -> Arc<Attributes> {
        WORLD.with(Arc::clone)
    }

    /// The attributes a duplicate starts with (module docs).
    pub(crate) fn duplicate(&self) -> Arc<Attributes> {
        let live = lock(&self.live)
            .iter()
            .filter_map(|(k, v)| v.dup().map(|d| (*k, d)))
            .collect();
        Arc::new(Attributes {
            live: Mutex::new(live),
            retired: Mutex::default(),
        })
    }

    /// The value of `A` on the communicator whose store is `this`.
    pub(crate) fn get<A: CommAttribute>(this: &Attributes) -> Option<&A> {
        let key = A::get_key().0;
        let live = lock(&this.live);
        let (_, v) = live.iter().find(|(k, _)| *k == key)?;
        let a: *const A = v.as_any().downcast_ref::<A>()?;
        drop(live);
        // SAFETY: the value is boxed, so its address does not move when the vectors do,
        // and the box is dropped only with the store (`set` moves a replaced one to
        // `retired`), which lives at least as long as the borrow of `this`.
        Some(unsafe { &*a })
    }

    /// Caches `val` as `A` on the communicator whose store is `this`; a replaced value
    /// is retired (module docs).
    pub(crate) fn set<A: CommAttribute>(this: &Attributes, val: A) {
        let key = A::get_key().0;
        let old = {
            let mut live = lock(&this.live);
            match live.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => Some(std::mem::replace(&mut slot.1, Box::new(val))),
                None => {
                    live.push((key, Box::new(val)));
                    None
                }
            }
        };
        if let Some(v) = old {
            lock(&this.retired).push(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct Kept(i32);
    impl CommAttribute for Kept {
        const CLONE_ON_DUP: bool = true;
    }
    #[derive(Clone, Debug, PartialEq)]
    struct Local(i32);
    impl CommAttribute for Local {}

    #[test]
    fn values_are_per_type_and_duplicates_clone_only_what_asks() {
        let s = Arc::new(Attributes::default());
        assert_eq!(Attributes::get::<Kept>(&s), None);
        Attributes::set(&s, Kept(1));
        Attributes::set(&s, Local(2));
        Attributes::set(&s, Kept(3));
        assert_eq!(Attributes::get::<Kept>(&s), Some(&Kept(3)));
        assert_eq!(Attributes::get::<Local>(&s), Some(&Local(2)));
        assert_eq!(lock(&s.retired).len(), 1, "the replaced value is kept");
        let d = s.duplicate();
        assert_eq!(Attributes::get::<Kept>(&d), Some(&Kept(3)));
        assert_eq!(Attributes::get::<Local>(&d), None);
        assert_ne!(Kept::get_key(), Local::get_key());
        let shared = Arc::clone(&d);
        let held = Attributes::get::<Kept>(&shared);
        Attributes::set(&d, Kept(4));
        assert_eq!(
            held,
            Some(&Kept(3)),
            "a replaced value another handle borrows stays"
        );
        assert_eq!(Attributes::get::<Kept>(&d), Some(&Kept(4)));
    }
}
