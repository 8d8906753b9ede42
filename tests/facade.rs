//! The `dinah` facade re-exports each workspace crate under one name.

#[test]
fn core_is_reexported() {
    assert_eq!(dinah::core::CRATE_NAME, dinah_core::CRATE_NAME);
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
