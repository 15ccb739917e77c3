//! Forwarding of the ranks' stdout/stderr to the launcher's.
//!
//! Contract: one thread per pipe reads whole lines (at most [`MAX_LINE`] bytes; a longer line
//! is split, and a final unterminated line gets a newline) and writes each line, with its
//! optional `[rank] ` tag, in one write under the destination's lock, so lines of different
//! ranks never interleave. Write errors (a closed launcher stdout) are ignored but the pipe
//! keeps being drained so ranks never block on it. Each thread sends `()` on `done` when its
//! pipe reaches EOF.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::sync::mpsc::Sender;

/// Longest forwarded line; longer output is split into lines of this size.
pub const MAX_LINE: u64 = 64 * 1024;

/// Which launcher stream a pipe forwards to.
#[derive(Clone, Copy, Debug)]
pub enum Dest {
    /// The launcher's stdout.
    Stdout,
    /// The launcher's stderr.
    Stderr,
}

/// Starts a thread forwarding `src` to `dest`, prefixing lines with `[rank] ` if `tag`.
pub fn forward(
    rank: u32,
    src: impl Read + Send + 'static,
    dest: Dest,
    tag: bool,
    done: Sender<()>,
) -> io::Result<()> {
    std::thread::Builder::new()
        .name(format!("phalanx-out-{rank}"))
        .spawn(move || {
            let prefix = if tag {
                format!("[{rank}] ").into_bytes()
            } else {
                Vec::new()
            };
            // Errors are ignored on purpose: see the module contract.
            copy_lines(src, &prefix, MAX_LINE, |line| {
                let _ = match dest {
                    Dest::Stdout => write_line(&mut io::stdout().lock(), line),
                    Dest::Stderr => write_line(&mut io::stderr().lock(), line),
                };
            });
            let _ = done.send(());
        })
        .map(drop)
}

/// Calls `sink` with every line of `src` (prefixed, newline-terminated, at most `max`
/// bytes of content each) until EOF or a read error.
pub(crate) fn copy_lines(src: impl Read, prefix: &[u8], max: u64, mut sink: impl FnMut(&[u8])) {
    let mut reader = BufReader::with_capacity(64 * 1024, src);
    let mut line = Vec::with_capacity(1024);
    loop {
        line.clear();
        line.extend_from_slice(prefix);
        match (&mut reader).take(max).read_until(b'\n', &mut line) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
        if line.last() != Some(&b'\n') {
            line.push(b'\n');
        }
        sink(&line);
    }
}

fn write_line(w: &mut impl Write, line: &[u8]) -> io::Result<()> {
    w.write_all(line)?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_and_terminates() {
        let mut lines = Vec::new();
        copy_lines(&b"a\nbbb\n\ncc"[..], b"[0] ", 2, |l| {
            lines.push(String::from_utf8(l.to_vec()).unwrap())
        });
        assert_eq!(
            lines,
            ["[0] a\n", "[0] bb\n", "[0] b\n", "[0] \n", "[0] cc\n"]
        );
    }
}
