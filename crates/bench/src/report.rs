//! OSU-shaped output: a title line, a column header, then `size value` rows.
//!
//! Column layout follows the OSU micro-benchmarks: the size left-aligned in 10
//! characters, the value right-aligned in 18 with two decimals.

/// Prints the title and column header of a test.
pub fn header(title: &str, column: &str) {
    println!("# OSU-style phalanx {title} Test");
    println!("{:<10}{:>18}", "# Size", column);
}

/// Prints the title and a header whose first column is not `# Size` (`# Words`).
pub fn header_with(title: &str, first: &str, column: &str) {
    println!("# OSU-style phalanx {title} Test");
    println!("{:<10}{:>18}", first, column);
}

/// Prints one result row.
pub fn row(size: usize, value: f64) {
    println!("{size:<10}{value:>18.2}");
}

/// Prints the title, one `# ` comment line and a header of several value columns
/// (osu_mbw_mr: `# [ pairs: n ] [ window size: w ]`, then `# Size  MB/s  Messages/s`).
pub fn header_columns(title: &str, comment: &str, columns: &[&str]) {
    println!("# OSU-style phalanx {title} Test");
    println!("# {comment}");
    print!("{:<10}", "# Size");
    for column in columns {
        print!("{column:>18}");
    }
    println!();
}

/// Prints one result row of several values.
pub fn row_values(size: usize, values: &[f64]) {
    print!("{size:<10}");
    for value in values {
        print!("{value:>18.2}");
    }
    println!();
}

/// Prints a one-value test (osu_barrier): title, `# column`, then the value alone.
pub fn single(title: &str, column: &str, value: f64) {
    println!("# OSU-style phalanx {title} Test");
    println!("# {column}");
    println!("{:>18.2}", value);
}
