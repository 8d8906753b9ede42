//! Derive macros for dinah's typed actions.
//!
//! Use them through `dinah_std` (or the facade's `dinah::std`), which
//! re-exports them beside the traits of the same names:
//! `use dinah_std::{Action, WireValue};` brings in both the traits and the
//! derives. `docs/actions.md` in the repository states the encoding and the
//! schema-ID rule.
#![deny(missing_docs)]
#![doc(test(attr(deny(warnings))))]

mod action;
mod attrs;
#[cfg(doctest)]
mod compile_fail;
mod crate_path;
mod wire_value;

use proc_macro::TokenStream;
use syn::{DeriveInput, parse_macro_input};

/// Derives `WireValue` for a struct or an enum whose fields are all
/// `WireValue`s.
///
/// - A struct (named, tuple or unit) encodes as its fields' segments in
///   declaration order, exactly like a tuple of the fields.
/// - An enum encodes as a one-byte tag segment holding the variant's
///   position in declaration order (explicit discriminants are ignored),
///   then that variant's fields. Decoding an unknown tag fails with
///   `CodecError::InvalidTag`. An enum has 1 to 256 variants.
/// - `SCHEMA_ID` is computed at compile time from the type's name and its
///   field layout (each field's name, its type's `SCHEMA_ID` and its
///   position; each variant's name and position), so two builds that
///   disagree on any of them fail the handshake.
/// - Each type parameter gets a `WireValue` bound; the type's own `where`
///   clause is kept. Lifetime parameters are refused (a `WireValue` is
///   `'static`).
///
/// Attributes, all optional, in `#[wire(...)]` on the type:
///
/// - `name = "app.Point/1"`: the name the schema digests (default: the
///   type's identifier). Give a versioned name to keep the ID stable
///   across renames of the Rust type.
/// - `crate = "path"`: the path to `dinah_std` in the generated code
///   (default: found from the crate's `Cargo.toml`: `::dinah_std` if it
///   depends on `dinah-std`, else `::dinah::std` if it depends on
///   `dinah`).
/// - `serde`: encode the whole value through serde instead, as one
///   segment in postcard's format, for a type that implements `Serialize`
///   and `Deserialize` (needs dinah-std's `serde` feature). Its schema ID
///   digests the name only, as serde describes no layout at compile time.
///
/// ```
/// use dinah_std::{CodecError, SegmentReader, SegmentWriter, WireValue};
///
/// /// A point on the grid.
/// #[derive(WireValue, Debug, PartialEq)]
/// #[wire(name = "app.Point/1")]
/// struct Point {
///     x: i64,
///     y: i64,
/// }
///
/// /// A shape, one variant at a time.
/// #[derive(WireValue, Debug, PartialEq)]
/// enum Shape {
///     Empty,
///     Circle { centre: Point, radius: u32 },
///     Polygon(Vec<u8>),
/// }
///
/// let shape = Shape::Circle { centre: Point { x: 1, y: -2 }, radius: 3 };
/// let mut out = SegmentWriter::new();
/// shape.encode(&mut out)?;
/// // A tag, then the point's two fields, then the radius.
/// assert_eq!(out.len(), 4);
/// assert_eq!(out.segments().next(), Some(&[1u8][..]));
///
/// let mut input = SegmentReader::from_writer(&out);
/// assert_eq!(Shape::decode(&mut input)?, shape);
/// input.finish()?;
/// assert_ne!(Point::SCHEMA_ID, Shape::SCHEMA_ID);
/// # Ok::<(), CodecError>(())
/// ```
#[proc_macro_derive(WireValue, attributes(wire))]
pub fn derive_wire_value(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    wire_value::expand(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Derives `Action` for a type that is also a `WireValue` (usually derived
/// too).
///
/// `ID` is `action_id(name)`: the 128-bit FNV-1a digest of the action's
/// name, the same value `dinah_std::action_id` gives when an `Action` is
/// written by hand.
///
/// Attributes, in `#[action(...)]` on the type:
///
/// - `output = Type` (required): what running the action returns, a
///   `WireValue`.
/// - `name = "app.CountHits/1"`: the name the ID digests (default: the
///   type's identifier). Give a versioned name so that renaming the Rust
///   type keeps the ID, and bump the version when the meaning changes.
/// - `crate = "path"`: as for `WireValue` (default: found from
///   `Cargo.toml`, or taken from a `#[wire(crate = ...)]` on the type).
///
/// The ID comes from the name alone, so a generic type would give every
/// instantiation the same ID: type and const parameters are refused
/// (implement `Action` by hand for each instantiation instead).
///
/// ```
/// use dinah_std::{Action, WireValue, action_id};
///
/// /// Counts the hits of `word` in the target rank's shard.
/// #[derive(WireValue, Action)]
/// #[action(name = "app.CountHits/1", output = u64)]
/// struct CountHits {
///     word: String,
/// }
///
/// assert_eq!(CountHits::ID, action_id("app.CountHits/1"));
/// assert_eq!(
///     <<CountHits as Action>::Output as WireValue>::SCHEMA_ID,
///     u64::SCHEMA_ID
/// );
/// # let _ = CountHits { word: String::new() }.word;
/// ```
#[proc_macro_derive(Action, attributes(action))]
pub fn derive_action(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    action::expand(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
