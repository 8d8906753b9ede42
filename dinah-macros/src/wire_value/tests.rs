//! Expansion checks: misuse is refused with a message at the right place,
//! and the generated code has the expected shape.

use syn::{DeriveInput, parse_quote};

use super::expand;

fn error_of(input: &DeriveInput) -> String {
    match expand(input) {
        Ok(tokens) => panic!("expected an error, got {tokens}"),
        Err(error) => error.to_string(),
    }
}

/// An enum with `count` unit variants `V0`, `V1`, ...
fn enum_with(count: usize) -> DeriveInput {
    let variants = (0..count).map(|i| quote::format_ident!("V{i}"));
    parse_quote!(enum Big { #(#variants),* })
}

#[test]
fn unions_and_empty_enums_are_refused() {
    let union: DeriveInput = parse_quote!(
        union Bits {
            a: u32,
            b: f32,
        }
    );
    assert!(error_of(&union).contains("not unions"));
    let empty: DeriveInput = parse_quote!(
        enum Never {}
    );
    assert!(error_of(&empty).contains("at least one variant"));
}

#[test]
fn at_most_256_variants() {
    assert!(expand(&enum_with(256)).is_ok());
    assert!(error_of(&enum_with(257)).contains("at most 256 variants"));
}

#[test]
fn all_256_tags_taken_leaves_no_fallback_arm() {
    let full = expand(&enum_with(256)).unwrap().to_string();
    assert!(!full.contains("InvalidTag"));
    let partial = expand(&enum_with(255)).unwrap().to_string();
    assert!(partial.contains("InvalidTag"));
}

#[test]
fn lifetimes_and_misplaced_attributes_are_refused() {
    let borrowed: DeriveInput = parse_quote!(
        struct View<'a> {
            bytes: &'a [u8],
        }
    );
    assert!(error_of(&borrowed).contains("lifetime parameters"));
    let on_field: DeriveInput = parse_quote!(
        struct P {
            #[wire(name = "x")]
            x: u8,
        }
    );
    assert!(error_of(&on_field).contains("not supported on fields"));
    let on_variant: DeriveInput = parse_quote!(
        enum E {
            #[wire(name = "x")]
            A,
        }
    );
    assert!(error_of(&on_variant).contains("not supported on variants"));
}

#[test]
fn generated_code_is_qualified_and_bounded() {
    let input: DeriveInput = parse_quote!(
        #[wire(crate = "::dinah::std", name = "app.Pair/1")]
        struct Pair<T>
        where
            T: Clone,
        {
            left: T,
            right: T,
        }
    );
    let code = expand(&input).unwrap().to_string();
    assert!(code.contains("# [automatically_derived]"), "{code}");
    assert!(code.contains("T : :: dinah :: std :: WireValue"), "{code}");
    assert!(code.contains("where T : Clone"), "{code}");
    assert!(code.contains("\"app.Pair/1\""), "{code}");
    assert!(code.contains(":: core :: result :: Result"), "{code}");
}

#[test]
fn a_unit_struct_ignores_its_writer_and_reader() {
    let input: DeriveInput = parse_quote!(
        struct Ping;
    );
    let code = expand(&input).unwrap().to_string();
    assert!(code.contains("encode (& self , _ :"), "{code}");
    assert!(code.contains("decode (_ :"), "{code}");
}
