//! How a value read from outside is quoted in an error message.
//!
//! Contract: [`shown`] quotes a value (Rust string escaping) and cuts it to
//! [`MAX_SHOWN`] bytes at a character boundary, saying how long it was when cut, so an
//! error about a megabyte of garbage is one line. Every crate that bounds outside input
//! (configuration, environment, command-line values) quotes through it.

/// How much of a bad value an error message quotes.
pub const MAX_SHOWN: usize = 64;

/// `v` quoted, cut to [`MAX_SHOWN`] bytes (at a character boundary) and marked when cut.
pub fn shown(v: &str) -> String {
    if v.len() <= MAX_SHOWN {
        return format!("{v:?}");
    }
    let mut end = MAX_SHOWN;
    while !v.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}… ({} bytes)", &v[..end], v.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_are_cut_at_a_character_boundary() {
        assert_eq!(shown("ab"), "\"ab\"");
        let long = "é".repeat(100);
        let s = shown(&long);
        assert_eq!(s, format!("{:?}… (200 bytes)", "é".repeat(32)));
    }
}
