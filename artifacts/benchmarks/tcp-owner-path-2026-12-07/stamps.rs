//! Diagnostic timestamps (experiment only).
#![allow(missing_docs)]
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;
const N: usize = 1 << 18;
const T: usize = 8;
#[repr(align(128))]
struct Ring { at: Cell<usize>, v: [AtomicU64; N] }
// Each thread writes only its own ring.
unsafe impl Sync for Ring {}
static RINGS: [Ring; T] = [const { Ring { at: Cell::new(0), v: [const { AtomicU64::new(0) }; N] } }; T];
static NEXT_ID: AtomicU8 = AtomicU8::new(1);
pub static ON: AtomicBool = AtomicBool::new(false);
fn epoch() -> Instant { static E: OnceLock<Instant> = OnceLock::new(); *E.get_or_init(Instant::now) }
thread_local! { static ID: u8 = NEXT_ID.fetch_add(1, Ordering::Relaxed); }
#[inline(never)]
pub fn stamp(kind: u8) {
    if !ON.load(Ordering::Relaxed) { return; }
    let ns = epoch().elapsed().as_nanos() as u64;
    let id = ID.with(|id| *id);
    let ring = &RINGS[usize::from(id) % T];
    let i = ring.at.get();
    if i < N { ring.v[i].store((u64::from(kind) << 56) | (u64::from(id) << 48) | ns, Ordering::Relaxed); ring.at.set(i + 1); }
}
pub fn dump(path: &str) {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for ring in &RINGS {
        for r in ring.v.iter().take(ring.at.get().min(N)) { let v = r.load(Ordering::Relaxed); writeln!(f, "{} {} {}", v >> 56, (v >> 48) & 0xff, v & ((1 << 48) - 1)).unwrap(); }
    }
}
