//! Code for one list of fields (a struct's, or one enum variant's): its
//! schema entries, how to encode it and how to decode it.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Field, Fields, Member, Path};

use crate::attrs::reject_wire_attrs;

/// The idents the generated functions use for their locals. Mixed-site
/// hygiene keeps them apart from the user's names (a field called `out`
/// cannot shadow the writer).
pub(super) struct Locals {
    /// The `&mut SegmentWriter` parameter of `encode`.
    pub(super) out: Ident,
    /// The `&mut SegmentReader` parameter of `decode`.
    pub(super) input: Ident,
}

impl Locals {
    pub(super) fn new() -> Self {
        Self {
            out: Ident::new("out", Span::mixed_site()),
            input: Ident::new("input", Span::mixed_site()),
        }
    }
}

/// Checks the fields carry no helper attribute.
pub(super) fn check(fields: &Fields) -> syn::Result<()> {
    fields
        .iter()
        .try_for_each(|field| reject_wire_attrs(&field.attrs, "fields"))
}

/// `<Type as WireValue>`, spanned at the field's type so that a type
/// without a codec is reported there.
fn codec(field: &Field, krate: &Path) -> TokenStream {
    let ty = &field.ty;
    quote_spanned!(ty.span()=> <#ty as #krate::WireValue>)
}

/// The field's name in the schema: its identifier (without `r#`), or its
/// position for a tuple field.
fn schema_name(index: usize, field: &Field) -> String {
    match &field.ident {
        Some(ident) => ident.unraw().to_string(),
        None => index.to_string(),
    }
}

/// `&[("name", <T as WireValue>::SCHEMA_ID), ...]` in declaration order.
pub(super) fn schema_list(fields: &Fields, krate: &Path) -> TokenStream {
    let entries = fields.iter().enumerate().map(|(index, field)| {
        let name = schema_name(index, field);
        let codec = codec(field, krate);
        quote!((#name, #codec::SCHEMA_ID))
    });
    quote!(&[#(#entries),*])
}

/// How a field is encoded: from a reference, or consuming it.
#[derive(Clone, Copy)]
pub(super) enum Encode {
    /// `WireValue::encode`, each value a reference to the field.
    Borrowed,
    /// `WireValue::encode_owned`, each value the field itself.
    Owned,
}

/// Statements encoding each field, in order, from the bindings `values`.
pub(super) fn encode_each(
    fields: &Fields,
    values: &[TokenStream],
    how: Encode,
    krate: &Path,
    locals: &Locals,
) -> TokenStream {
    let out = &locals.out;
    let calls = fields.iter().zip(values).map(|(field, value)| {
        let codec = codec(field, krate);
        match how {
            Encode::Borrowed => quote!(#codec::encode(#value, #out)?;),
            Encode::Owned => quote!(#codec::encode_owned(#value, #out)?;),
        }
    });
    quote!(#(#calls)*)
}

/// `path { a: decode?, ... }`, `path(decode?, ...)` or `path`: the value
/// built from the next segments, its fields decoded in declaration order.
pub(super) fn construct(
    path: &TokenStream,
    fields: &Fields,
    krate: &Path,
    locals: &Locals,
) -> TokenStream {
    let input = &locals.input;
    let decoded = fields.iter().map(|field| {
        let codec = codec(field, krate);
        quote!(#codec::decode(#input)?)
    });
    match fields {
        Fields::Named(_) => {
            let names = fields.iter().map(|field| &field.ident);
            quote!(#path { #(#names: #decoded),* })
        }
        Fields::Unnamed(_) => quote!(#path(#(#decoded),*)),
        Fields::Unit => quote!(#path),
    }
}

/// The members `self.<member>` of a struct's fields.
pub(super) fn members(fields: &Fields) -> Vec<Member> {
    fields.members().collect()
}

/// A pattern matching `path` that binds each field to a fresh local, and
/// those locals in order.
pub(super) fn pattern(path: &TokenStream, fields: &Fields) -> (TokenStream, Vec<TokenStream>) {
    let bindings: Vec<Ident> = (0..fields.len())
        .map(|index| {
            let mut binding = format_ident!("field_{index}");
            binding.set_span(Span::mixed_site());
            binding
        })
        .collect();
    let pattern = match fields {
        Fields::Named(_) => {
            let names = fields.iter().map(|field| &field.ident);
            quote!(#path { #(#names: #bindings),* })
        }
        Fields::Unnamed(_) => quote!(#path(#(#bindings),*)),
        Fields::Unit => quote!(#path),
    };
    let values = bindings.iter().map(|binding| quote!(#binding)).collect();
    (pattern, values)
}
