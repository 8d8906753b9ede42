//! The path to `dinah_std` that generated code names.
//!
//! A user may depend on `dinah-std` directly (possibly renamed) or only on
//! the facade `dinah`, which re-exports it as `dinah::std`. The derive
//! reads the user's `Cargo.toml` (through `proc-macro-crate`) to choose;
//! an explicit `crate = "..."` attribute wins over both.

use proc_macro_crate::{FoundCrate, crate_name};
use proc_macro2::Ident;
use syn::{Path, parse_quote};

/// The path to use: `explicit` if given, else the one the user's manifest
/// implies.
pub(crate) fn dinah_std(explicit: Option<Path>) -> Path {
    explicit.unwrap_or_else(|| {
        choose(
            crate_name("dinah-std").ok().as_ref(),
            crate_name("dinah").ok().as_ref(),
        )
    })
}

/// The path for a crate that has `std` (`dinah-std`) and `facade`
/// (`dinah`) as found in its manifest.
///
/// `dinah-std` is preferred when both are present (the facade's own tests
/// depend on both). Inside `dinah-std` itself (`Itself`) the path is still
/// `::dinah_std`: its `lib.rs` declares `extern crate self as dinah_std`,
/// and its integration tests and doctests see it under that name. With
/// neither (an unusual manifest, or no `CARGO_MANIFEST_DIR`),
/// `::dinah_std` is the best guess.
fn choose(std: Option<&FoundCrate>, facade: Option<&FoundCrate>) -> Path {
    match (std, facade) {
        (Some(FoundCrate::Name(name)), _) => match ident(name) {
            Some(name) => parse_quote!(::#name),
            None => parse_quote!(::dinah_std),
        },
        (None, Some(FoundCrate::Name(name))) => match ident(name) {
            Some(name) => parse_quote!(::#name::std),
            None => parse_quote!(::dinah::std),
        },
        (None, Some(FoundCrate::Itself)) => parse_quote!(::dinah::std),
        (Some(FoundCrate::Itself), _) | (None, None) => parse_quote!(::dinah_std),
    }
}

/// `name` as an identifier; `None` if it is not one (a malformed manifest
/// must give a compile error, not a panic in the macro).
fn ident(name: &str) -> Option<Ident> {
    syn::parse_str(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::ToTokens;

    fn shown(path: &Path) -> String {
        path.to_token_stream().to_string().replace(' ', "")
    }

    #[test]
    fn prefers_dinah_std_then_the_facade() {
        let named = |name: &str| FoundCrate::Name(name.to_owned());
        let std = named("dinah_std");
        let renamed = named("wire");
        let facade = named("dinah");
        let facade_renamed = named("dn");
        assert_eq!(shown(&choose(Some(&std), Some(&facade))), "::dinah_std");
        assert_eq!(shown(&choose(Some(&renamed), None)), "::wire");
        assert_eq!(shown(&choose(None, Some(&facade))), "::dinah::std");
        assert_eq!(shown(&choose(None, Some(&facade_renamed))), "::dn::std");
        assert_eq!(
            shown(&choose(Some(&FoundCrate::Itself), None)),
            "::dinah_std"
        );
        assert_eq!(
            shown(&choose(None, Some(&FoundCrate::Itself))),
            "::dinah::std"
        );
        assert_eq!(shown(&choose(None, None)), "::dinah_std");
    }

    #[test]
    fn an_explicit_path_wins() {
        let path: Path = parse_quote!(crate::reexported);
        assert_eq!(shown(&dinah_std(Some(path))), "crate::reexported");
    }

    #[test]
    fn a_malformed_name_falls_back() {
        let bad = FoundCrate::Name("not an ident".to_owned());
        assert_eq!(shown(&choose(Some(&bad), None)), "::dinah_std");
        assert_eq!(shown(&choose(None, Some(&bad))), "::dinah::std");
    }
}
