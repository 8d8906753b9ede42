//! The `dinah` facade re-exports each workspace crate under one name.

#[test]
fn core_is_reexported() {
    let id: dinah::core::TaskId = dinah_core::TaskId::new(7).expect("non-zero");
    assert_eq!(id.get(), 7);
}

#[test]
fn std_is_reexported() {
    // The module path must resolve; its items land in later work.
    use dinah::std as _;
}

#[cfg(feature = "tcp")]
#[test]
fn tcp_is_reexported() {
    use dinah::tcp as _;
}
