//! Placeholder: this benchmark has not landed yet.
fn main() {}
