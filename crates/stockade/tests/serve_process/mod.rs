//! Reading the address a `stockade serve` child announces.

use std::io::{BufRead, BufReader};
use std::process::Child;

/// Reads the child's first line (`stockade listening on http://ADDR (...)`)
/// from its piped stdout and returns the base URL.
pub fn announced_url(child: &mut Child) -> String {
    let mut stdout = BufReader::new(child.stdout.take().expect("the child's stdout is piped"));
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    // Keep reading what else it announces: a closed pipe would kill it.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    line.split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_owned()
}
