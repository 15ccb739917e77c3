//! The library's modules form layers, and every `crate::` path in code points down:
//! wire-level types and the request table at the bottom, then the collective executor
//! and the links, the configuration, the engine, and the rsmpi-shaped facade on top (in
//! layers of its own) — so no two modules depend on each other.
//! (Doc comments may link anywhere; only code counts.)

use std::collections::BTreeSet;
use std::path::Path;

/// Layer of each module of `crates/core/src` (a module not listed is on top). The
/// rsmpi-shaped facade is layered too: the thread-local engine and statuses, requests,
/// communicators, their operations, and initialization on top.
const LAYERS: &[(&str, u32)] = &[
    ("error", 0),
    ("datatype", 0),
    // The timeline recorder: a ring and a clock, used from every layer above.
    ("trace", 0),
    ("requests", 1),
    ("link", 1),
    ("log", 1),
    ("coll", 2),
    ("config", 3),
    ("engine", 4),
    ("runtime", 5),
    ("status", 5),
    ("request", 6),
    ("topology", 7),
    ("point_to_point", 8),
    // Collectives with user operations and varcount blocks move their data with
    // point-to-point messages.
    ("collective", 9),
    ("environment", 10),
    ("capi_support", 10),
];
const FACADE: u32 = 11;

fn layer(m: &str) -> u32 {
    LAYERS
        .iter()
        .find(|(n, _)| *n == m)
        .map_or(FACADE, |(_, l)| *l)
}

/// Every `crate::name` a Rust file's code (not its comments) names.
fn deps_of(path: &Path, out: &mut BTreeSet<String>) {
    if path.is_dir() {
        for e in std::fs::read_dir(path).expect("read_dir") {
            deps_of(&e.expect("entry").path(), out);
        }
        return;
    }
    if path.extension().is_none_or(|e| e != "rs") {
        return;
    }
    let text = std::fs::read_to_string(path).expect("read source");
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if name.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
                out.insert(name);
            }
        }
    }
}

#[test]
fn module_dependencies_point_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/src");
    let mut violations = Vec::new();
    for (m, l) in LAYERS {
        let mut deps = BTreeSet::new();
        for p in [src.join(format!("{m}.rs")), src.join(m)] {
            if p.exists() {
                deps_of(&p, &mut deps);
            }
        }
        for d in deps.iter().filter(|d| d.as_str() != *m) {
            if layer(d) >= *l {
                violations.push(format!(
                    "{m} (layer {l}) uses crate::{d} (layer {})",
                    layer(d)
                ));
            }
        }
    }
    assert!(violations.is_empty(), "{violations:#?}");
}
