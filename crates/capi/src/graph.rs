//! Graph and distributed-graph topologies: `MPI_Graph_create`, `MPI_Graph_get`,
//! `MPI_Graphdims_get`, `MPI_Graph_neighbors(_count)`, `MPI_Graph_map`,
//! `MPI_Dist_graph_create_adjacent`, `MPI_Dist_graph_create`,
//! `MPI_Dist_graph_neighbors(_count)`; the neighbour lists the neighbour collectives
//! ([`crate::neighbor`]) use.
//!
//! Contract: a communicator made here carries its graph in this module's table (kept
//! by `MPI_Comm_dup`, dropped by `MPI_Comm_free`); the graph queries on any other
//! communicator fail with `MPI_ERR_TOPOLOGY`. Ranks are never reordered (`reorder` is
//! accepted; MPI allows keeping them): `MPI_Graph_create` keeps the first `nnodes`
//! members (the others get `MPI_COMM_NULL`), the distributed graphs keep every member.
//! Self-loops and repeated edges are allowed (MPI-2.2). Arguments are checked locally
//! (`MPI_ERR_ARG` for counts, `MPI_ERR_RANK` for a neighbour outside the communicator,
//! `MPI_ERR_TOPOLOGY` for an `index` that decreases or edges that do not add up);
//! `MPI_Dist_graph_create_adjacent` also checks collectively that every member's edges
//! towards every other agree with that member's incoming ones (an all-to-all of edge
//! counts), so an inconsistent graph is an error naming both ranks rather than a
//! neighbour collective that never completes. `MPI_Dist_graph_create` gathers every
//! member's edges (an all-gather of `3 × edges` ints) and lists each rank's neighbours
//! in (contributing rank, position) order. Weights are kept as given; `MPI_UNWEIGHTED`
//! must be on both sides (on every member, for `MPI_Dist_graph_create`) or on none — a
//! side without edges has no say.

use crate::consts::*;
use crate::state;
use crate::{count, err, export, guard, out, typed, CResult};
use phalanx::capi_support::Shared;
use phalanx::datatype::PartitionMut;
use phalanx::topology::{Color, Communicator, SimpleCommunicator};
use phalanx::traits::CommunicatorCollectives;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::rc::Rc;

/// `MPI_UNWEIGHTED`.
const UNWEIGHTED: *const c_int = 10 as *const c_int;
/// `MPI_WEIGHTS_EMPTY`.
const WEIGHTS_EMPTY: *const c_int = 11 as *const c_int;

/// A communicator's graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topo {
    /// `MPI_Graph_create`: node `i`'s neighbours are `edges[index[i-1]..index[i]]`.
    Graph {
        /// Cumulative degrees.
        index: Vec<c_int>,
        /// Neighbours of every node, node after node.
        edges: Vec<c_int>,
    },
    /// A distributed graph: this rank's own edges only.
    Dist {
        /// Ranks with an edge to this one.
        sources: Vec<c_int>,
        /// Their weights (`None`: unweighted).
        sweights: Option<Vec<c_int>>,
        /// Ranks this one has an edge to.
        dests: Vec<c_int>,
        /// Their weights.
        dweights: Option<Vec<c_int>>,
    },
}

impl Topo {
    /// The neighbours of graph node `r` (the caller checked `r`).
    fn graph_neighbors(index: &[c_int], edges: &[c_int], r: usize) -> Vec<c_int> {
        let lo = if r == 0 { 0 } else { index[r - 1] as usize };
        edges[lo..index[r] as usize].to_vec()
    }

    /// (sources, destinations) of rank `me`, in MPI's neighbour order.
    pub fn neighbors(&self, me: c_int) -> (Vec<c_int>, Vec<c_int>) {
        match self {
            Topo::Graph { index, edges } => {
                let n = Topo::graph_neighbors(index, edges, me as usize);
                (n.clone(), n)
            }
            Topo::Dist { sources, dests, .. } => (sources.clone(), dests.clone()),
        }
    }
}

/// The graph of each communicator handle that has one.
static TOPOS: Shared<RefCell<HashMap<usize, Rc<Topo>>>> =
    Shared::new(|| RefCell::new(HashMap::new()));

/// The graph of communicator `h`, if it has one.
pub fn topo_of(h: Handle) -> Option<Rc<Topo>> {
    TOPOS.with(|t| t.borrow().get(&(h as usize)).cloned())
}

/// Gives `new` (a duplicate of `old`) `old`'s graph, if any (`MPI_Comm_dup`).
pub fn copy(old: Handle, new: Handle) {
    if let Some(t) = topo_of(old) {
        TOPOS.with(|m| m.borrow_mut().insert(new as usize, t));
    }
}

/// Forgets the graph of a freed communicator (`MPI_Comm_free`).
pub fn forget(h: Handle) {
    TOPOS.with(|m| m.borrow_mut().remove(&(h as usize)));
}

/// A new handle for `c` with graph `t`, inheriting `parent`'s error handler.
fn add(c: SimpleCommunicator, t: Topo, parent: Handle) -> Handle {
    let h = state::add_comm(c, state::errhandler(parent));
    TOPOS.with(|m| m.borrow_mut().insert(h as usize, Rc::new(t)));
    h
}

/// The graph of `h` (`MPI_ERR_TOPOLOGY` if it has none or the wrong kind).
fn graph(h: Handle) -> CResult<(Vec<c_int>, Vec<c_int>)> {
    state::comm(h)?;
    match topo_of(h).as_deref() {
        Some(Topo::Graph { index, edges }) => Ok((index.clone(), edges.clone())),
        _ => Err(err(
            MPI_ERR_TOPOLOGY,
            "not a graph communicator (MPI_Graph_create)",
        )),
    }
}

/// The distributed graph of `h`.
fn dist(h: Handle) -> CResult<Rc<Topo>> {
    state::comm(h)?;
    match topo_of(h) {
        Some(t) if matches!(*t, Topo::Dist { .. }) => Ok(t),
        _ => Err(err(
            MPI_ERR_TOPOLOGY,
            "not a distributed graph communicator (MPI_Dist_graph_create*)",
        )),
    }
}

/// `MPI_COMM_NULL` into a non-null output handle before anything can fail.
fn null_first(h: *mut Handle) -> CResult {
    if h.is_null() {
        return Err(err(MPI_ERR_ARG, "null output communicator"));
    }
    // SAFETY: a non-null output handle is writable (MPI contract).
    unsafe { h.write(COMM_NULL as Handle) };
    Ok(())
}

/// `n` ints of the array `what` at `p` (`MPI_ERR_ARG` if null with `n > 0`).
///
/// # Safety
/// `p` points to `n` readable ints.
unsafe fn ints<'a>(p: *const c_void, n: usize, what: &str) -> CResult<&'a [c_int]> {
    // SAFETY: caller.
    unsafe { typed::<c_int>(p, n) }.map_err(|_| {
        err(
            MPI_ERR_ARG,
            format!("{what}: null or misaligned array of {n} ints"),
        )
    })
}

/// `MPI_Graph_create`'s arguments, checked against a communicator of `size`.
///
/// # Safety
/// `index` holds `nnodes` ints and `edges` `index[nnodes-1]` ints (MPI contract).
unsafe fn graph_args(
    nnodes: c_int,
    index: *const c_void,
    edges: *const c_void,
    size: c_int,
) -> CResult<(Vec<c_int>, Vec<c_int>)> {
    if nnodes < 0 || nnodes > size {
        return Err(err(
            MPI_ERR_ARG,
            format!("a graph of {nnodes} nodes on a communicator of {size}"),
        ));
    }
    // SAFETY: caller.
    let ix = unsafe { ints(index, nnodes as usize, "index")? };
    let mut prev = 0;
    for (i, &x) in ix.iter().enumerate() {
        if x < prev {
            return Err(err(
                MPI_ERR_TOPOLOGY,
                format!(
                    "index[{i}] = {x} is below index[{}] = {prev}: index must not decrease",
                    i.max(1) - 1
                ),
            ));
        }
        prev = x;
    }
    let m = ix.last().copied().unwrap_or(0) as usize;
    // SAFETY: caller.
    let es = unsafe { ints(edges, m, "edges")? };
    if let Some((i, &e)) = es.iter().enumerate().find(|(_, &e)| e < 0 || e >= nnodes) {
        return Err(err(
            MPI_ERR_TOPOLOGY,
            format!("edges[{i}] = {e} is not a node of the {nnodes}-node graph"),
        ));
    }
    Ok((ix.to_vec(), es.to_vec()))
}

export!(MPI_Graph_create, PMPI_Graph_create,
        (comm_old: Handle, nnodes: c_int, index: *const c_void, edges: *const c_void,
         reorder: c_int, comm_graph: *mut Handle) -> c_int {
    guard("MPI_Graph_create", comm_old, || {
        let _ = reorder;
        null_first(comm_graph)?;
        let c = state::comm(comm_old)?;
        // SAFETY: nnodes ints in index, index[nnodes-1] in edges (MPI contract).
        let (ix, es) = unsafe { graph_args(nnodes, index, edges, c.size())? };
        let color = if c.rank() < nnodes { Color::with_value(0) } else { Color::undefined() };
        let h = match c.split_by_color_with_key(color, c.rank()) {
            Some(g) => add(g, Topo::Graph { index: ix, edges: es }, comm_old),
            None => COMM_NULL as Handle,
        };
        // SAFETY: writable handle (MPI contract).
        unsafe { out(comm_graph, h) }
    })
});

export!(MPI_Graphdims_get, PMPI_Graphdims_get,
        (comm: Handle, nnodes: *mut c_int, nedges: *mut c_int) -> c_int {
    guard("MPI_Graphdims_get", comm, || {
        let (ix, es) = graph(comm)?;
        // SAFETY: two writable ints (MPI contract).
        unsafe {
            out(nnodes, ix.len() as c_int)?;
            out(nedges, es.len() as c_int)
        }
    })
});

export!(MPI_Graph_get, PMPI_Graph_get,
        (comm: Handle, maxindex: c_int, maxedges: c_int, index: *mut c_int,
         edges: *mut c_int) -> c_int {
    guard("MPI_Graph_get", comm, || {
        let (ix, es) = graph(comm)?;
        for (i, &x) in ix.iter().take(count(maxindex)?).enumerate() {
            // SAFETY: maxindex writable ints (MPI contract).
            unsafe { out(index.add(i), x)? };
        }
        for (i, &x) in es.iter().take(count(maxedges)?).enumerate() {
            // SAFETY: maxedges writable ints (MPI contract).
            unsafe { out(edges.add(i), x)? };
        }
        Ok(())
    })
});

/// Graph node `rank` of `comm`, checked.
fn node(comm: Handle, rank: c_int) -> CResult<Vec<c_int>> {
    let (ix, es) = graph(comm)?;
    if rank < 0 || rank as usize >= ix.len() {
        return Err(err(
            MPI_ERR_RANK,
            format!("rank {rank} of a {}-node graph", ix.len()),
        ));
    }
    Ok(Topo::graph_neighbors(&ix, &es, rank as usize))
}

export!(MPI_Graph_neighbors_count, PMPI_Graph_neighbors_count,
        (comm: Handle, rank: c_int, nneighbors: *mut c_int) -> c_int {
    guard("MPI_Graph_neighbors_count", comm, || {
        let n = node(comm, rank)?.len();
        // SAFETY: writable int (MPI contract).
        unsafe { out(nneighbors, n as c_int) }
    })
});

export!(MPI_Graph_neighbors, PMPI_Graph_neighbors,
        (comm: Handle, rank: c_int, maxneighbors: c_int, neighbors: *mut c_int) -> c_int {
    guard("MPI_Graph_neighbors", comm, || {
        let ns = node(comm, rank)?;
        for (i, &x) in ns.iter().take(count(maxneighbors)?).enumerate() {
            // SAFETY: maxneighbors writable ints (MPI contract).
            unsafe { out(neighbors.add(i), x)? };
        }
        Ok(())
    })
});

export!(MPI_Graph_map, PMPI_Graph_map,
        (comm: Handle, nnodes: c_int, index: *const c_void, edges: *const c_void,
         newrank: *mut c_int) -> c_int {
    guard("MPI_Graph_map", comm, || {
        let c = state::comm(comm)?;
        // SAFETY: as MPI_Graph_create.
        unsafe { graph_args(nnodes, index, edges, c.size())? };
        let r = if c.rank() < nnodes { c.rank() } else { MPI_UNDEFINED };
        // SAFETY: writable int (MPI contract).
        unsafe { out(newrank, r) }
    })
});

/// Ranks of one side of a distributed graph: `n` ints, each a rank of a communicator of
/// `size`.
///
/// # Safety
/// `p` holds `n` ints.
unsafe fn ranks(p: *const c_void, n: c_int, size: c_int, what: &str) -> CResult<Vec<c_int>> {
    let n = count(n).map_err(|_| err(MPI_ERR_ARG, format!("{what}: negative degree {n}")))?;
    // SAFETY: caller.
    let rs = unsafe { ints(p, n, what)? };
    if let Some(&r) = rs.iter().find(|&&r| r < 0 || r >= size) {
        return Err(err(
            MPI_ERR_RANK,
            format!("{what}: rank {r} is not in the communicator of {size}"),
        ));
    }
    Ok(rs.to_vec())
}

/// The weights of one side: `None` for `MPI_UNWEIGHTED`, else `n` non-negative ints
/// (`MPI_WEIGHTS_EMPTY` or anything when `n` is 0).
///
/// # Safety
/// `p` is `MPI_UNWEIGHTED`, `MPI_WEIGHTS_EMPTY`, or holds `n` ints.
unsafe fn weights(p: *const c_int, n: usize, what: &str) -> CResult<Option<Vec<c_int>>> {
    if std::ptr::eq(p, UNWEIGHTED) {
        return Ok(None);
    }
    if n == 0 {
        return Ok(Some(Vec::new()));
    }
    if std::ptr::eq(p, WEIGHTS_EMPTY) {
        return Err(err(
            MPI_ERR_ARG,
            format!("{what}: MPI_WEIGHTS_EMPTY for {n} edges"),
        ));
    }
    // SAFETY: caller.
    let ws = unsafe { ints(p.cast(), n, what)? };
    if let Some(&w) = ws.iter().find(|&&w| w < 0) {
        return Err(err(MPI_ERR_ARG, format!("{what}: negative weight {w}")));
    }
    Ok(Some(ws.to_vec()))
}

/// One side's weights (`None`: unweighted).
type Weights = Option<Vec<c_int>>;

/// Both sides weighted or both `MPI_UNWEIGHTED` (a side without edges goes with the
/// other); returns the two sides, both `None` when unweighted.
fn same_weighting(a: Weights, na: usize, b: Weights, nb: usize) -> CResult<(Weights, Weights)> {
    let weighted = match (na, nb) {
        (0, 0) => a.is_some() && b.is_some(),
        (0, _) => b.is_some(),
        (_, 0) => a.is_some(),
        _ if a.is_some() == b.is_some() => a.is_some(),
        _ => {
            return Err(err(
                MPI_ERR_ARG,
                "MPI_UNWEIGHTED on one side of the graph only (it must be on both or neither)",
            ))
        }
    };
    let side = |w: Weights| weighted.then(|| w.unwrap_or_default());
    Ok((side(a), side(b)))
}

/// Collective check that `c`'s members agree on the edges between each pair: member
/// i's edges to j (from `dests`) against j's edges from i (from `sources`).
fn agree(c: &SimpleCommunicator, sources: &[c_int], dests: &[c_int]) -> CResult {
    let p = c.size() as usize;
    let mut out_to = vec![0 as c_int; p];
    for &d in dests {
        out_to[d as usize] += 1;
    }
    let mut in_from = vec![0 as c_int; p];
    c.all_to_all_into(&out_to[..], &mut in_from[..]);
    let mut mine = vec![0 as c_int; p];
    for &s in sources {
        mine[s as usize] += 1;
    }
    if let Some(i) = (0..p).find(|&i| mine[i] != in_from[i]) {
        return Err(err(
            MPI_ERR_TOPOLOGY,
            format!(
                "inconsistent graph: rank {i} lists {} edge(s) to rank {}, which lists {} from it",
                in_from[i],
                c.rank(),
                mine[i]
            ),
        ));
    }
    Ok(())
}

export!(MPI_Dist_graph_create_adjacent, PMPI_Dist_graph_create_adjacent,
        (comm_old: Handle, indegree: c_int, sources: *const c_void, sourceweights: *const c_int,
         outdegree: c_int, destinations: *const c_void, destweights: *const c_int,
         info: Handle, reorder: c_int, comm_dist_graph: *mut Handle) -> c_int {
    guard("MPI_Dist_graph_create_adjacent", comm_old, || {
        let _ = (info, reorder);
        null_first(comm_dist_graph)?;
        let c = state::comm(comm_old)?;
        let p = c.size();
        // SAFETY: the degrees' ints in each array, or the weight constants (MPI contract).
        let (s, sw, d, dw) = unsafe {
            let s = ranks(sources, indegree, p, "sources")?;
            let sw = weights(sourceweights, s.len(), "sourceweights")?;
            let d = ranks(destinations, outdegree, p, "destinations")?;
            let dw = weights(destweights, d.len(), "destweights")?;
            (s, sw, d, dw)
        };
        let (sw, dw) = same_weighting(sw, s.len(), dw, d.len())?;
        // Derived before the check, so that every member's next derivation stays in step
        // even where the check fails on some members only.
        let dup = c.duplicate();
        agree(&c, &s, &d)?;
        let t = Topo::Dist { sources: s, sweights: sw, dests: d, dweights: dw };
        let h = add(dup, t, comm_old);
        // SAFETY: writable handle (MPI contract).
        unsafe { out(comm_dist_graph, h) }
    })
});

export!(MPI_Dist_graph_create, PMPI_Dist_graph_create,
        (comm_old: Handle, n: c_int, sources: *const c_void, degrees: *const c_void,
         destinations: *const c_void, weights_: *const c_int, info: Handle, reorder: c_int,
         comm_dist_graph: *mut Handle) -> c_int {
    guard("MPI_Dist_graph_create", comm_old, || {
        let _ = (info, reorder);
        null_first(comm_dist_graph)?;
        let c = state::comm(comm_old)?;
        let p = c.size();
        // SAFETY: n ints in sources and degrees, sum(degrees) in destinations and weights.
        let (triples, weighted) = unsafe {
            let srcs = ranks(sources, n, p, "sources")?;
            let degs = ints(degrees, srcs.len(), "degrees")?;
            if let Some(&k) = degs.iter().find(|&&k| k < 0) {
                return Err(err(MPI_ERR_ARG, format!("degrees: negative degree {k}")));
            }
            let m: usize = degs.iter().map(|&k| k as usize).sum();
            let m_c = c_int::try_from(m)
                .map_err(|_| err(MPI_ERR_ARG, format!("{m} edges: too many")))?;
            let dsts = ranks(destinations, m_c, p, "destinations")?;
            let ws = weights(weights_, m, "weights")?;
            let mut t = Vec::with_capacity(3 * m);
            let mut e = 0;
            for (&s, &k) in srcs.iter().zip(degs) {
                for _ in 0..k {
                    t.extend([s, dsts[e], ws.as_ref().map_or(1, |w| w[e])]);
                    e += 1;
                }
            }
            // 2: no edges here, so no say in whether the graph is weighted.
            (t, if m == 0 { 2 } else { c_int::from(ws.is_some()) })
        };
        // Every member's edges, in rank order (an all-gather of counts, then of edges).
        let mut lens = vec![0 as c_int; p as usize];
        c.all_gather_into(&(triples.len() as c_int), &mut lens[..]);
        let mut flags = vec![0 as c_int; p as usize];
        c.all_gather_into(&weighted, &mut flags[..]);
        let said: Vec<c_int> = flags.into_iter().filter(|&f| f != 2).collect();
        if said.windows(2).any(|w| w[0] != w[1]) {
            return Err(err(
                MPI_ERR_ARG,
                "MPI_UNWEIGHTED on some members only (it must be on all or none)",
            ));
        }
        let weighted = said.first() == Some(&1);
        let mut displs = Vec::with_capacity(lens.len());
        let mut total: c_int = 0;
        for &l in &lens {
            displs.push(total);
            total = total
                .checked_add(l)
                .ok_or_else(|| err(MPI_ERR_ARG, "too many edges in the whole graph"))?;
        }
        let mut all = vec![0 as c_int; total as usize];
        {
            let mut part = PartitionMut::new(&mut all[..], &lens[..], &displs[..]);
            c.all_gather_varcount_into(&triples[..], &mut part);
        }
        let me = c.rank();
        let (mut s, mut sw, mut d, mut dw) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for e in all.chunks_exact(3) {
            if e[1] == me {
                s.push(e[0]);
                sw.push(e[2]);
            }
            if e[0] == me {
                d.push(e[1]);
                dw.push(e[2]);
            }
        }
        let t = Topo::Dist {
            sources: s,
            sweights: weighted.then_some(sw),
            dests: d,
            dweights: weighted.then_some(dw),
        };
        let h = add(c.duplicate(), t, comm_old);
        // SAFETY: writable handle (MPI contract).
        unsafe { out(comm_dist_graph, h) }
    })
});

export!(MPI_Dist_graph_neighbors_count, PMPI_Dist_graph_neighbors_count,
        (comm: Handle, indegree: *mut c_int, outdegree: *mut c_int, weighted: *mut c_int)
        -> c_int {
    guard("MPI_Dist_graph_neighbors_count", comm, || {
        let t = dist(comm)?;
        let Topo::Dist { sources, sweights, dests, .. } = &*t else {
            return Err(err(MPI_ERR_INTERN, "graph kind changed"));
        };
        // SAFETY: three writable ints (MPI contract).
        unsafe {
            out(indegree, sources.len() as c_int)?;
            out(outdegree, dests.len() as c_int)?;
            out(weighted, c_int::from(sweights.is_some()))
        }
    })
});

export!(MPI_Dist_graph_neighbors, PMPI_Dist_graph_neighbors,
        (comm: Handle, maxindegree: c_int, sources: *mut c_int, sourceweights: *mut c_int,
         maxoutdegree: c_int, destinations: *mut c_int, destweights: *mut c_int) -> c_int {
    guard("MPI_Dist_graph_neighbors", comm, || {
        let t = dist(comm)?;
        let Topo::Dist { sources: s, sweights, dests, dweights } = &*t else {
            return Err(err(MPI_ERR_INTERN, "graph kind changed"));
        };
        let put = |ranks: &[c_int], ws: &Option<Vec<c_int>>, max: c_int, rp: *mut c_int,
                   wp: *mut c_int| -> CResult {
            for (i, &r) in ranks.iter().take(count(max)?).enumerate() {
                // SAFETY: max writable ints (MPI contract).
                unsafe { out(rp.add(i), r)? };
                if let Some(w) = ws.as_ref().filter(|_| !std::ptr::eq(wp, UNWEIGHTED)) {
                    // SAFETY: max writable ints for a weighted graph (MPI contract).
                    unsafe { out(wp.add(i), w[i])? };
                }
            }
            Ok(())
        };
        put(s, sweights, maxindegree, sources, sourceweights)?;
        put(dests, dweights, maxoutdegree, destinations, destweights)
    })
});
