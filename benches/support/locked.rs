//! Counting the locked instructions a callgrind run executed.
//!
//! A locked instruction (an atomic read-modify-write: `lock`-prefixed, or
//! `xchg` with memory) costs more than its count suggests: it waits for the
//! core's earlier stores to reach the cache, and it moves the cache line
//! to this core. Callgrind counts instructions per address
//! (`--dump-instr=yes`); `objdump` says which addresses hold locked
//! instructions; the sum over those addresses is the run's count.

use std::collections::{HashMap, HashSet};
use std::process::Command;

/// The addresses of the locked instructions in `object`, as callgrind
/// reports addresses (offsets in the file for shared objects and PIE
/// executables, which is what `objdump -d` prints).
#[expect(
    clippy::disallowed_methods,
    reason = "objdump is the bench's helper; the xtask helper is not a dependency of benches"
)]
///
/// An object `objdump` cannot read (a name callgrind made up, a file gone
/// since) has none; `objdump` missing is an error.
fn locked_addresses(object: &str) -> Result<HashSet<u64>, String> {
    let output = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", object])
        .output()
        .map_err(|e| format!("cannot run objdump (is binutils installed?): {e}"))?;
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let (address, instruction) = line.trim_start().split_once(":\t")?;
            let instruction = instruction.trim_start();
            let locked = instruction.starts_with("lock ")
                || (instruction.starts_with("xchg") && instruction.contains('('));
            locked
                .then(|| u64::from_str_radix(address, 16).ok())
                .flatten()
        })
        .collect())
}

/// Parses one position: absolute (`0x...` or decimal), relative (`+N`,
/// `-N`) or the same as before (`*`).
fn position(field: &str, previous: u64) -> Option<u64> {
    let number = |text: &str| match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    };
    match field.as_bytes().first()? {
        b'*' => Some(previous),
        b'+' => Some(previous.wrapping_add(number(&field[1..])?)),
        b'-' => Some(previous.wrapping_sub(number(&field[1..])?)),
        _ => number(field),
    }
}

/// The locked instructions executed in the run whose callgrind output
/// (made with `--dump-instr=yes`) is `profile`.
pub(crate) fn count_locked(profile: &str) -> Result<u64, String> {
    let mut names: HashMap<String, String> = HashMap::new();
    let mut addresses: HashMap<String, HashSet<u64>> = HashMap::new();
    let mut object = String::new();
    let mut address = 0_u64;
    let mut after_call = false;
    let mut locked = 0;
    for line in profile.lines() {
        if let Some(spec) = line
            .strip_prefix("ob=")
            .or_else(|| line.strip_prefix("cob="))
        {
            // `(id) name` defines a compressed name, `(id)` refers to one.
            let (id, name) = spec.split_once(' ').unwrap_or((spec, ""));
            if !name.is_empty() {
                names.insert(id.to_owned(), name.to_owned());
            }
            if line.starts_with("ob=") {
                object = names.get(id).cloned().unwrap_or_default();
            }
            continue;
        }
        if line.starts_with("calls=") {
            // The next cost line is the call's inclusive cost.
            after_call = true;
            continue;
        }
        let Some(first) = line.bytes().next() else {
            continue;
        };
        if !(first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'*')) {
            continue;
        }
        let mut fields = line.split_ascii_whitespace();
        let Some(at) = fields.next().and_then(|field| position(field, address)) else {
            continue;
        };
        address = at;
        if std::mem::take(&mut after_call) {
            continue;
        }
        // Positions are `instr line`; the event is `Ir`.
        let Some(ir) = fields.nth(1).and_then(|field| field.parse::<u64>().ok()) else {
            continue;
        };
        if !addresses.contains_key(&object) {
            addresses.insert(object.clone(), locked_addresses(&object)?);
        }
        if addresses[&object].contains(&address) {
            locked += ir;
        }
    }
    Ok(locked)
}
