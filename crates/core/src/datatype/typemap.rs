//! The core datatype: a type signature plus an (offset, length) block list.
//!
//! Contract: a [`TypeMap`] describes one element: `size` data bytes spread over `blocks`
//! (in type-map order, which need not be memory order), between a lower bound `lb` and an
//! upper bound `ub` (byte offsets from the element's start, `lb ≤ every block`, `ub ≥ the
//! end of every block`); element `i` of a buffer starts at `i · extent`. `signature` lists
//! the primitive types in order — what MPI matches. Offsets are never negative (a
//! constructor given a negative displacement or count returns an error).
//!
//! Types whose single block covers the whole extent and whose primitives accept every bit
//! pattern are *contiguous*: they go straight from/to user memory. A type holding `bool`s
//! never is: a receive unpacks it, and [`TypeMap::unpack`] turns every non-zero `bool`
//! byte into 1, so no byte sequence from the network makes an invalid `bool`.

use std::sync::Arc;

/// The predefined element types (their order in a signature is what MPI matches).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Primitive {
    /// Raw byte.
    U8,
    /// Signed byte.
    I8,
    /// 16-bit unsigned.
    U16,
    /// 16-bit signed.
    I16,
    /// 32-bit unsigned.
    U32,
    /// 32-bit signed.
    I32,
    /// 64-bit unsigned.
    U64,
    /// 64-bit signed.
    I64,
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// Boolean (one byte, 0 or 1; `MPI_C_BOOL`).
    Bool,
    /// Complex of two 32-bit floats (`MPI_C_FLOAT_COMPLEX`).
    C32,
    /// Complex of two 64-bit floats (`MPI_C_DOUBLE_COMPLEX`).
    C64,
}

/// Every primitive by discriminant (the wire form of a type map names them so).
const PRIMITIVES: [Primitive; 13] = [
    Primitive::U8,
    Primitive::I8,
    Primitive::U16,
    Primitive::I16,
    Primitive::U32,
    Primitive::I32,
    Primitive::U64,
    Primitive::I64,
    Primitive::F32,
    Primitive::F64,
    Primitive::Bool,
    Primitive::C32,
    Primitive::C64,
];

impl Primitive {
    /// Every primitive, in declaration order (`primitive_ref` indexes by discriminant).
    #[cfg(test)]
    const ALL: [Primitive; 13] = PRIMITIVES;

    /// Size in bytes.
    pub fn size(self) -> usize {
        match self {
            Primitive::U8 | Primitive::I8 | Primitive::Bool => 1,
            Primitive::U16 | Primitive::I16 => 2,
            Primitive::U32 | Primitive::I32 | Primitive::F32 => 4,
            Primitive::U64 | Primitive::I64 | Primitive::F64 | Primitive::C32 => 8,
            Primitive::C64 => 16,
        }
    }

    /// Alignment in bytes (what a structure's extent is rounded up to).
    pub fn align(self) -> usize {
        match self {
            Primitive::C32 => 4,
            Primitive::C64 => 8,
            p => p.size(),
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
struct Inner {
    size: usize,
    lb: usize,
    ub: usize,
    extent: usize,
    align: usize,
    blocks: Vec<(usize, usize)>,
    signature: Vec<(Primitive, usize)>,
    /// Runs of `bool` bytes in one element: (packed position, memory offset, length).
    bools: Vec<(usize, usize, usize)>,
    /// Received bytes may be written straight into memory (no `bool`s, or a packed copy
    /// whose bytes are checked when unpacked).
    raw_ok: bool,
}

/// The predefined type maps, by [`Primitive`] (`ALL` lists the primitives in
/// declaration order; a test checks it).
static PRIMITIVE_MAPS: [std::sync::OnceLock<TypeMap>; 13] =
    [const { std::sync::OnceLock::new() }; 13];

/// A datatype describing one element (cheap to clone; module docs).
#[derive(Clone, PartialEq, Eq)]
pub struct TypeMap(Repr);

impl std::fmt::Debug for TypeMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("TypeMap").field(&*self.0).finish()
    }
}

/// A type map's description: the predefined ones are built once and never freed, so
/// cloning one (on every call's path) touches no reference count.
#[derive(Clone)]
enum Repr {
    Static(&'static Inner),
    Shared(Arc<Inner>),
}

impl std::ops::Deref for Repr {
    type Target = Inner;
    #[inline]
    fn deref(&self) -> &Inner {
        match self {
            Repr::Static(i) => i,
            Repr::Shared(a) => a,
        }
    }
}

impl PartialEq for Repr {
    fn eq(&self, other: &Repr) -> bool {
        **self == **other
    }
}

impl Eq for Repr {}

/// Accumulates the pieces of a new type map, in type-map order.
struct Builder {
    size: usize,
    lb: usize,
    ub: usize,
    align: usize,
    blocks: Vec<(usize, usize)>,
    signature: Vec<(Primitive, usize)>,
    bools: Vec<(usize, usize, usize)>,
}

impl Builder {
    fn new() -> Builder {
        Builder {
            size: 0,
            lb: usize::MAX,
            ub: 0,
            align: 1,
            blocks: Vec::new(),
            signature: Vec::new(),
            bools: Vec::new(),
        }
    }

    /// Appends `t` at byte offset `off`.
    fn piece(&mut self, off: usize, t: &TypeMap) -> Result<(), String> {
        let t = &t.0;
        let end = off.checked_add(t.ub).ok_or("datatype larger than memory")?;
        self.lb = self.lb.min(off + t.lb);
        self.ub = self.ub.max(end);
        self.align = self.align.max(t.align);
        for &(p, o, l) in &t.bools {
            let (p, o) = (self.size + p, off + o);
            match self.bools.last_mut() {
                Some(last) if last.0 + last.2 == p && last.1 + last.2 == o => last.2 += l,
                _ => self.bools.push((p, o, l)),
            }
        }
        self.size = self
            .size
            .checked_add(t.size)
            .ok_or("datatype larger than memory")?;
        for &(o, l) in &t.blocks {
            let o = off + o;
            match self.blocks.last_mut() {
                Some(last) if last.0 + last.1 == o => last.1 += l,
                _ => self.blocks.push((o, l)),
            }
        }
        for &(p, n) in &t.signature {
            match self.signature.last_mut() {
                Some(last) if last.0 == p => last.1 += n,
                _ => self.signature.push((p, n)),
            }
        }
        Ok(())
    }

    /// The type map; `extent` overrides `ub - lb` (a Rust struct's size).
    fn finish(self, extent: Option<usize>, round_to_align: bool) -> TypeMap {
        let lb = if self.lb == usize::MAX { 0 } else { self.lb };
        let ub = self.ub.max(lb);
        let mut ext = extent.unwrap_or(ub - lb);
        if round_to_align {
            ext = ext.div_ceil(self.align) * self.align;
        }
        let ub = if extent.is_some() {
            ub.max(lb + ext)
        } else {
            ub
        };
        TypeMap(Repr::Shared(Arc::new(Inner {
            size: self.size,
            lb,
            ub,
            extent: ext,
            align: self.align,
            raw_ok: self.bools.is_empty(),
            blocks: self.blocks,
            signature: self.signature,
            bools: self.bools,
        })))
    }
}

fn nonneg(what: &str, n: i64) -> Result<usize, String> {
    usize::try_from(n).map_err(|_| format!("negative {what} ({n})"))
}

fn bytes(what: &str, n: i64, scale: usize) -> Result<usize, String> {
    nonneg(what, n)?
        .checked_mul(scale)
        .ok_or_else(|| format!("{what} {n} beyond memory"))
}

impl TypeMap {
    /// A predefined datatype.
    pub fn primitive(p: Primitive) -> TypeMap {
        Self::primitive_ref(p).clone()
    }

    /// A predefined datatype, built once per primitive (this is on every call's path).
    #[inline]
    pub(crate) fn primitive_ref(p: Primitive) -> &'static TypeMap {
        // Built already (every call but the first): a load and a test. The
        // initialization, with its frame, stays out of line: a byte it stores on the
        // stack and reloads wide stalled this path (store forwarding) when inlined here.
        match PRIMITIVE_MAPS[p as usize].get() {
            Some(t) => t,
            None => Self::first_primitive_ref(p),
        }
    }

    #[cold]
    #[inline(never)]
    fn first_primitive_ref(p: Primitive) -> &'static TypeMap {
        PRIMITIVE_MAPS[p as usize].get_or_init(|| {
            let s = p.size();
            TypeMap(Repr::Static(Box::leak(Box::new(Inner {
                size: s,
                lb: 0,
                ub: s,
                extent: s,
                align: p.align(),
                blocks: vec![(0, s)],
                signature: vec![(p, 1)],
                bools: if p == Primitive::Bool {
                    vec![(0, 0, 1)]
                } else {
                    Vec::new()
                },
                raw_ok: p != Primitive::Bool,
            }))))
        })
    }

    /// `count` consecutive copies of `elem` (infallible form, for arrays and the derive).
    pub fn contiguous(count: usize, elem: &TypeMap) -> TypeMap {
        let fields: Vec<(usize, TypeMap)> = (0..count)
            .map(|i| (i * elem.extent(), elem.clone()))
            .collect();
        TypeMap::structure(count * elem.extent(), &fields)
    }

    /// A Rust structure of `extent` bytes whose fields lie at the given offsets, in memory
    /// order whatever order they are given in (what `#[derive(Equivalence)]` builds).
    pub fn structure(extent: usize, fields: &[(usize, TypeMap)]) -> TypeMap {
        let mut fields: Vec<&(usize, TypeMap)> = fields.iter().collect();
        fields.sort_by_key(|f| f.0);
        let mut b = Builder::new();
        for (off, dt) in fields {
            // Offsets inside a Rust value cannot overflow.
            let _ = b.piece(*off, dt);
        }
        b.lb = 0;
        b.finish(Some(extent), false)
    }

    /// `MPI_Type_contiguous`: `count` copies of `old`, one extent apart.
    pub fn try_contiguous(count: i64, old: &TypeMap) -> Result<TypeMap, String> {
        Self::try_vector(count, 1, 1, old)
    }

    /// `MPI_Type_vector`: `count` blocks of `blocklength` copies of `old`, block starts
    /// `stride` extents of `old` apart.
    pub fn try_vector(
        count: i64,
        blocklength: i64,
        stride: i64,
        old: &TypeMap,
    ) -> Result<TypeMap, String> {
        let stride = bytes("stride", stride, old.extent())?;
        Self::try_hvector(count, blocklength, stride as i64, old)
    }

    /// `MPI_Type_create_hvector`: like [`TypeMap::try_vector`] with `stride` in bytes.
    pub fn try_hvector(
        count: i64,
        blocklength: i64,
        stride: i64,
        old: &TypeMap,
    ) -> Result<TypeMap, String> {
        let n = nonneg("count", count)?;
        let bl = nonneg("blocklength", blocklength)?;
        let stride = nonneg("stride", stride)?;
        let mut b = Builder::new();
        for i in 0..n {
            let start = i
                .checked_mul(stride)
                .ok_or("vector beyond memory".to_string())?;
            Self::block(&mut b, start, bl, old)?;
        }
        Ok(b.finish(None, false))
    }

    /// `MPI_Type_indexed`: block i is `blocklengths[i]` copies of `old` at
    /// `displacements[i]` extents of `old`.
    pub fn try_indexed(
        blocklengths: &[i64],
        displacements: &[i64],
        old: &TypeMap,
    ) -> Result<TypeMap, String> {
        let d: Result<Vec<i64>, String> = displacements
            .iter()
            .map(|&d| bytes("displacement", d, old.extent()).map(|x| x as i64))
            .collect();
        Self::try_hindexed(blocklengths, &d?, old)
    }

    /// `MPI_Type_create_hindexed`: like [`TypeMap::try_indexed`] with displacements in
    /// bytes.
    pub fn try_hindexed(
        blocklengths: &[i64],
        displacements: &[i64],
        old: &TypeMap,
    ) -> Result<TypeMap, String> {
        if blocklengths.len() != displacements.len() {
            return Err(format!(
                "{} block lengths for {} displacements",
                blocklengths.len(),
                displacements.len()
            ));
        }
        let mut b = Builder::new();
        for (&bl, &d) in blocklengths.iter().zip(displacements) {
            Self::block(
                &mut b,
                nonneg("displacement", d)?,
                nonneg("blocklength", bl)?,
                old,
            )?;
        }
        Ok(b.finish(None, false))
    }

    /// `MPI_Type_create_struct`: block i is `blocklengths[i]` copies of `types[i]` at byte
    /// `displacements[i]`, in the order given; the extent is rounded up to the largest
    /// alignment of the primitives inside (as MPI does, so an array of the Rust struct it
    /// describes steps by the struct's size).
    pub fn try_structured(
        blocklengths: &[i64],
        displacements: &[i64],
        types: &[&TypeMap],
    ) -> Result<TypeMap, String> {
        if blocklengths.len() != displacements.len() || blocklengths.len() != types.len() {
            return Err(format!(
                "{} block lengths, {} displacements and {} types",
                blocklengths.len(),
                displacements.len(),
                types.len()
            ));
        }
        let mut b = Builder::new();
        for ((&bl, &d), t) in blocklengths.iter().zip(displacements).zip(types) {
            Self::block(
                &mut b,
                nonneg("displacement", d)?,
                nonneg("blocklength", bl)?,
                t,
            )?;
        }
        Ok(b.finish(None, true))
    }

    /// Appends `n` copies of `old` starting at `start`.
    fn block(b: &mut Builder, start: usize, n: usize, old: &TypeMap) -> Result<(), String> {
        for j in 0..n {
            let off = j
                .checked_mul(old.extent())
                .and_then(|x| x.checked_add(start))
                .ok_or("datatype beyond memory".to_string())?;
            b.piece(off, old)?;
        }
        if n > 0 {
            return Ok(());
        }
        // An empty block still counts for the bounds, as in MPI.
        b.lb = b.lb.min(start);
        b.ub = b.ub.max(start);
        Ok(())
    }

    /// The type map as bytes for another rank of the job ([`TypeMap::from_wire`]): what
    /// one-sided operations send to describe the target's layout.
    pub fn to_wire(&self) -> Vec<u8> {
        let i = &*self.0;
        let mut out = Vec::with_capacity(48 + 16 * i.blocks.len() + 9 * i.signature.len());
        let mut put = |v: u64| out.extend_from_slice(&v.to_le_bytes());
        for v in [i.size, i.lb, i.ub, i.extent, i.align] {
            put(v as u64);
        }
        put(i.blocks.len() as u64);
        put(i.signature.len() as u64);
        put(i.bools.len() as u64);
        for &(o, l) in &i.blocks {
            put(o as u64);
            put(l as u64);
        }
        for &(p, n) in &i.signature {
            put(p as u64);
            put(n as u64);
        }
        for &(p, o, l) in &i.bools {
            put(p as u64);
            put(o as u64);
            put(l as u64);
        }
        out
    }

    /// The type map [`TypeMap::to_wire`] wrote, checked for consistency (blocks inside
    /// the bounds and adding up to the size, the signature too); `None` for anything
    /// else, from any input.
    pub fn from_wire(b: &[u8]) -> Option<TypeMap> {
        let mut at = 0usize;
        let mut get = || -> Option<usize> {
            let v = u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?);
            at += 8;
            usize::try_from(v).ok()
        };
        let (size, lb, ub, extent, align) = (get()?, get()?, get()?, get()?, get()?);
        let (nb, ns, nbo) = (get()?, get()?, get()?);
        let most = b.len() / 16 + 1;
        if nb > most || ns > most || nbo > most || lb > ub || align == 0 {
            return None;
        }
        let mut blocks = Vec::with_capacity(nb);
        let mut total = 0usize;
        for _ in 0..nb {
            let (o, l) = (get()?, get()?);
            if o.checked_add(l)? > ub {
                return None;
            }
            total = total.checked_add(l)?;
            blocks.push((o, l));
        }
        let mut signature = Vec::with_capacity(ns);
        let mut sig_bytes = 0usize;
        for _ in 0..ns {
            let (p, n) = (get()?, get()?);
            let p = *PRIMITIVES.get(p)?;
            sig_bytes = sig_bytes.checked_add(p.size().checked_mul(n)?)?;
            signature.push((p, n));
        }
        let mut bools = Vec::with_capacity(nbo);
        for _ in 0..nbo {
            let (p, o, l) = (get()?, get()?, get()?);
            if p.checked_add(l)? > size || o.checked_add(l)? > ub {
                return None;
            }
            bools.push((p, o, l));
        }
        if total != size || sig_bytes != size || at != b.len() {
            return None;
        }
        Some(TypeMap(Repr::Shared(Arc::new(Inner {
            size,
            lb,
            ub,
            extent,
            align,
            raw_ok: bools.is_empty(),
            blocks,
            signature,
            bools,
        }))))
    }

    /// The same signature with the data packed densely (size = extent): what a packed
    /// copy of a buffer of this type is. Its bytes go raw into a packed copy, which is
    /// checked when unpacked through the original type.
    pub fn packed(&self) -> TypeMap {
        let s = self.size();
        TypeMap(Repr::Shared(Arc::new(Inner {
            size: s,
            lb: 0,
            ub: s,
            extent: s,
            align: 1,
            blocks: if s == 0 { Vec::new() } else { vec![(0, s)] },
            signature: self.0.signature.clone(),
            bools: self.0.bools.iter().map(|&(p, _, l)| (p, p, l)).collect(),
            raw_ok: true,
        })))
    }

    /// Makes every `bool` in `data` (packed elements of this type) 0 or 1.
    pub fn fix_bools(&self, data: &mut [u8]) {
        if self.0.bools.is_empty() || self.size() == 0 {
            return;
        }
        for chunk in data.chunks_mut(self.size()) {
            for &(p, _, l) in &self.0.bools {
                for b in chunk.iter_mut().skip(p).take(l) {
                    *b = (*b != 0) as u8;
                }
            }
        }
    }

    /// Data bytes in one element.
    pub fn size(&self) -> usize {
        self.0.size
    }
    /// Span of one element in memory (the step between elements).
    pub fn extent(&self) -> usize {
        self.0.extent
    }
    /// Lower bound: the offset of the element's first byte.
    pub fn lower_bound(&self) -> usize {
        self.0.lb
    }
    /// Upper bound: the offset just past the element's last byte.
    pub fn upper_bound(&self) -> usize {
        self.0.ub
    }
    /// [`TypeMap::span`], `None` where it would not fit in memory (a count or extent
    /// from another rank is checked with this).
    pub fn checked_span(&self, count: usize) -> Option<usize> {
        if count == 0 {
            return Some(0);
        }
        (count - 1)
            .checked_mul(self.extent())?
            .checked_add(self.upper_bound())
    }
    /// Bytes `count` elements reach from the buffer's start.
    pub fn span(&self, count: usize) -> usize {
        match count {
            0 => 0,
            n => (n - 1) * self.extent() + self.0.ub,
        }
    }
    /// The blocks of one element: (offset, length) in type-map order.
    pub fn blocks(&self) -> &[(usize, usize)] {
        &self.0.blocks
    }
    /// True when one element is a single block covering its extent and any bytes are a
    /// valid value (no `bool`): received data may be written straight into memory.
    pub fn is_contiguous(&self) -> bool {
        self.is_dense() && self.0.raw_ok
    }
    /// True when one element is a single block covering its extent (`bool`s allowed).
    pub fn is_dense(&self) -> bool {
        self.0.blocks.len() <= 1
            && self.0.size == self.0.extent
            && self.0.blocks.first().is_none_or(|b| b.0 == 0)
    }

    /// An identity of a predefined type map, never shared with another one (`None` for a
    /// derived one, whose memory may be reused by the next).
    #[inline]
    pub(crate) fn static_id(&self) -> Option<usize> {
        match &self.0 {
            Repr::Static(i) => Some(*i as *const Inner as usize),
            Repr::Shared(_) => None,
        }
    }

    /// The type signature as runs of (primitive, count).
    pub fn signature(&self) -> &[(Primitive, usize)] {
        &self.0.signature
    }
    /// Whether `count` elements of `self` and `other_count` of `other` have the same type
    /// signature (what MPI requires of a send and its receive).
    pub fn same_signature(&self, count: usize, other: &TypeMap, other_count: usize) -> bool {
        let expand = |t: &TypeMap, n: usize| {
            let mut runs: Vec<(Primitive, usize)> = Vec::new();
            for _ in 0..n {
                for &(p, k) in t.signature() {
                    match runs.last_mut() {
                        Some(last) if last.0 == p => last.1 += k,
                        _ => runs.push((p, k)),
                    }
                }
            }
            runs
        };
        self.size() * count == other.size() * other_count
            && expand(self, count) == expand(other, other_count)
    }

    /// Packs `count` elements at `src` into `out` (appending `count * size` bytes).
    ///
    /// # Safety
    /// `src` must be valid for reads of `span(count)` bytes, all of them initialized
    /// where the blocks lie.
    pub unsafe fn pack(&self, src: *const u8, count: usize, out: &mut Vec<u8>) {
        out.reserve(count * self.size());
        if self.is_dense() {
            // One block covering each element: the elements are one run of bytes.
            // SAFETY: `span(count)` = count · size readable bytes at `src`.
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(src, count * self.size()) });
            return;
        }
        for i in 0..count {
            for &(o, l) in &self.0.blocks {
                // SAFETY: the caller guarantees `span(count)` readable bytes and every
                // block of element i lies below i·extent + ub.
                let s = unsafe { std::slice::from_raw_parts(src.add(i * self.extent() + o), l) };
                out.extend_from_slice(s);
            }
        }
    }

    /// Unpacks packed bytes `data` into elements at `dst`, stopping at the end of `data`;
    /// every `bool` written is made 0 or 1.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `span(ceil(data.len() / size))` bytes.
    pub unsafe fn unpack(&self, data: &[u8], dst: *mut u8) {
        if self.is_contiguous() {
            // One run of bytes, any byte a valid value.
            // SAFETY: the caller guarantees room for every element started.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
            return;
        }
        let mut pos = 0;
        let mut i = 0;
        while pos < data.len() && self.size() > 0 {
            let start = pos;
            let base = i * self.extent();
            for &(o, l) in &self.0.blocks {
                let n = l.min(data.len() - pos);
                // SAFETY: the caller guarantees room for every element started.
                unsafe {
                    std::ptr::copy_nonoverlapping(data.as_ptr().add(pos), dst.add(base + o), n)
                };
                pos += n;
                if pos == data.len() {
                    break;
                }
            }
            let written = pos - start;
            for &(p, o, l) in &self.0.bools {
                if p >= written {
                    break;
                }
                for k in 0..l.min(written - p) {
                    // SAFETY: this byte of element i was just written (inside its room).
                    unsafe {
                        let b = dst.add(base + o + k);
                        *b = (*b != 0) as u8;
                    }
                }
            }
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_form_round_trips_and_refuses_anything_else() {
        let i = TypeMap::primitive(Primitive::I32);
        let b = TypeMap::primitive(Primitive::Bool);
        let types = [
            i.clone(),
            TypeMap::try_vector(5, 2, 3, &i).unwrap(),
            TypeMap::structure(
                16,
                &[
                    (0, b.clone()),
                    (4, i.clone()),
                    (8, TypeMap::primitive(Primitive::F64)),
                ],
            ),
            TypeMap::contiguous(0, &i),
        ];
        for t in &types {
            let w = t.to_wire();
            assert_eq!(TypeMap::from_wire(&w).as_ref(), Some(t));
            // Every truncation and every flipped byte is refused or parses to a
            // consistent type map; none panics.
            for k in 0..w.len() {
                assert!(TypeMap::from_wire(&w[..k]).is_none());
                let mut x = w.clone();
                x[k] ^= 0x5a;
                if let Some(u) = TypeMap::from_wire(&x) {
                    assert_eq!(u.blocks().iter().map(|b| b.1).sum::<usize>(), u.size());
                }
            }
        }
        assert!(TypeMap::from_wire(&[]).is_none());
        assert!(TypeMap::from_wire(&[0xff; 200]).is_none());
    }

    #[test]
    fn all_primitives_are_listed_in_declaration_order() {
        for (i, p) in Primitive::ALL.iter().enumerate() {
            assert_eq!(*p as usize, i);
        }
    }

    fn i32t() -> TypeMap {
        TypeMap::primitive(Primitive::I32)
    }

    #[test]
    fn vector_layout() {
        // 2 blocks of 2 f64, block starts 3 elements apart.
        let f = TypeMap::primitive(Primitive::F64);
        let v = TypeMap::try_vector(2, 2, 3, &f).unwrap();
        assert_eq!(v.blocks(), &[(0, 16), (24, 16)]);
        assert_eq!((v.size(), v.extent(), v.lower_bound()), (32, 40, 0));
        assert_eq!(v.signature(), &[(Primitive::F64, 4)]);
        assert!(!v.is_contiguous());
        let h = TypeMap::try_hvector(3, 1, 12, &i32t()).unwrap();
        assert_eq!(h.blocks(), &[(0, 4), (12, 4), (24, 4)]);
        assert_eq!(h.extent(), 28);
        let c = TypeMap::try_contiguous(4, &i32t()).unwrap();
        assert!(c.is_contiguous());
        assert_eq!((c.size(), c.extent()), (16, 16));
        assert!(TypeMap::try_vector(-1, 1, 1, &f).is_err());
        assert!(TypeMap::try_vector(1, 1, -2, &f).is_err());
    }

    #[test]
    fn indexed_layout_and_bounds() {
        // Blocks [1, 2] at displacements [2, 5]: lb 8, ub 28, extent 20 (as MPI).
        let t = TypeMap::try_indexed(&[1, 2], &[2, 5], &i32t()).unwrap();
        assert_eq!(t.blocks(), &[(8, 4), (20, 8)]);
        assert_eq!((t.lower_bound(), t.upper_bound(), t.extent()), (8, 28, 20));
        assert_eq!(t.span(2), 48);
        assert_eq!(t.signature(), &[(Primitive::I32, 3)]);
        let src: Vec<i32> = (0..12).collect();
        let mut packed = Vec::new();
        // SAFETY: src holds span(2) = 48 bytes.
        unsafe { t.pack(src.as_ptr() as *const u8, 2, &mut packed) };
        let got: Vec<i32> = packed
            .chunks(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, [2, 5, 6, 7, 10, 11]);
        let b = TypeMap::try_hindexed(&[1, 1], &[0, 6], &TypeMap::primitive(Primitive::U16));
        assert_eq!(b.unwrap().blocks(), &[(0, 2), (6, 2)]);
        assert!(TypeMap::try_indexed(&[1], &[0, 1], &i32t()).is_err());
        assert!(TypeMap::try_indexed(&[1], &[-1], &i32t()).is_err());
    }

    #[test]
    fn structured_keeps_type_map_order_and_aligns() {
        // rsmpi's structured example: three i32 at 8, 4, 0 — sent in that order.
        let i = i32t();
        let t = TypeMap::try_structured(&[1, 1, 1], &[8, 4, 0], &[&i, &i, &i]).unwrap();
        assert_eq!(t.blocks(), &[(8, 4), (4, 4), (0, 4)]);
        assert_eq!(t.signature(), &[(Primitive::I32, 3)]);
        let src = [3i32, 2, 1];
        let mut packed = Vec::new();
        // SAFETY: src is one 12-byte element.
        unsafe { t.pack(src.as_ptr() as *const u8, 1, &mut packed) };
        assert_eq!(packed[..4], 1i32.to_ne_bytes());
        // An f64 then a u8: ub 9, extent rounded to the f64's alignment.
        let f = TypeMap::primitive(Primitive::F64);
        let u = TypeMap::primitive(Primitive::U8);
        let s = TypeMap::try_structured(&[1, 1], &[0, 8], &[&f, &u]).unwrap();
        assert_eq!((s.size(), s.upper_bound(), s.extent()), (9, 9, 16));
        assert_eq!(s.signature(), &[(Primitive::F64, 1), (Primitive::U8, 1)]);
        assert!(TypeMap::try_structured(&[1], &[0], &[&f, &u]).is_err());
    }

    #[test]
    fn signatures_match_across_layouts() {
        let f = TypeMap::primitive(Primitive::F64);
        let v = TypeMap::try_vector(2, 2, 3, &f).unwrap();
        assert!(v.same_signature(1, &f, 4));
        assert!(!v.same_signature(1, &f, 3));
        let i = i32t();
        let s = TypeMap::try_structured(&[1, 1], &[0, 8], &[&i, &f]).unwrap();
        let two = TypeMap::try_contiguous(2, &s).unwrap();
        assert!(two.same_signature(1, &s, 2));
        assert!(!s.same_signature(
            1,
            &TypeMap::try_structured(&[1, 1], &[0, 8], &[&f, &i]).unwrap(),
            1
        ));
    }

    #[test]
    fn bool_bytes_are_made_valid() {
        let b = TypeMap::primitive(Primitive::Bool);
        assert!(b.is_dense() && !b.is_contiguous());
        let arr = TypeMap::contiguous(4, &b);
        assert!(!arr.is_contiguous());
        let mut dst = [false; 4];
        // SAFETY: dst holds one 4-byte element; every byte written is normalized.
        unsafe { arr.unpack(&[0, 1, 2, 255], dst.as_mut_ptr() as *mut u8) };
        assert_eq!(dst, [false, true, true, true]);
        // A bool inside a structure (i32 at 0, bool at 4, extent 8), partial data too.
        let s = TypeMap::try_structured(&[1, 1], &[0, 4], &[&i32t(), &b]).unwrap();
        assert_eq!(s.extent(), 8);
        let mut mem = [0u8; 16];
        let data = [1, 0, 0, 0, 7, 2, 0, 0, 0, 9];
        // SAFETY: mem holds two 8-byte elements.
        unsafe { s.unpack(&data, mem.as_mut_ptr()) };
        assert_eq!(mem[4], 1);
        assert_eq!(mem[12], 1);
        assert_eq!(mem[0], 1);
        // The packed copy takes raw bytes; unpacking through the original checks them.
        assert!(arr.packed().is_contiguous());
        assert_eq!(arr.packed().signature(), arr.signature());
    }

    #[test]
    fn strided_pack_unpack() {
        // Two i32 fields at offsets 0 and 8 in a 12-byte extent.
        let i = i32t();
        let d = TypeMap::structure(12, &[(0, i.clone()), (8, i)]);
        assert!(!d.is_contiguous());
        let src: [i32; 6] = [1, -1, 2, 3, -1, 4];
        let mut packed = Vec::new();
        // SAFETY: src holds two 12-byte elements.
        unsafe { d.pack(src.as_ptr() as *const u8, 2, &mut packed) };
        assert_eq!(packed.len(), 16);
        let mut dst = [0i32; 6];
        // SAFETY: dst holds two 12-byte elements.
        unsafe { d.unpack(&packed, dst.as_mut_ptr() as *mut u8) };
        assert_eq!(dst, [1, 0, 2, 3, 0, 4]);
    }
}
