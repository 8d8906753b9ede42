//! `#[derive(WireValue)]`: the impl around the struct or enum codec.

mod enums;
mod fields;

use proc_macro2::TokenStream;
use quote::quote;
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, Generics, Path, parse_quote, parse_quote_spanned};

use crate::attrs::wire_attrs;
use crate::crate_path;
use fields::{Encode, Locals};

/// The parts of a `WireValue` impl that depend on the type's shape.
struct Body {
    /// The `SCHEMA_ID` expression (a const expression).
    schema: TokenStream,
    /// The body of `encode`.
    encode: TokenStream,
    /// The body of `encode_owned`: as `encode`, moving each field.
    encode_owned: TokenStream,
    /// The body of `decode`.
    decode: TokenStream,
    /// Whether the bodies use the writer and reader at all: a struct
    /// without fields does not (no tag, no field), and names them `_`.
    uses_segments: bool,
}

/// Expands `#[derive(WireValue)]` on `input`.
pub(crate) fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    let attrs = wire_attrs(&input.attrs)?;
    reject_lifetimes(&input.generics)?;
    let krate = crate_path::dinah_std(attrs.krate);
    let name = attrs
        .name
        .map_or_else(|| input.ident.unraw().to_string(), |name| name.value());
    let locals = Locals::new();
    if let Some(serde) = &attrs.serde {
        return Ok(serde_impl(input, serde, &name, &krate));
    }
    let body = match &input.data {
        Data::Struct(data) => struct_body(&data.fields, &name, &krate, &locals)?,
        Data::Enum(data) => enums::body(&input.ident, data, &name, &krate, &locals)?,
        Data::Union(data) => {
            return Err(syn::Error::new_spanned(
                data.union_token,
                "`#[derive(WireValue)]` supports structs and enums, not unions (which field holds the value is not known)",
            ));
        }
    };
    let generics = bounded(&input.generics, &krate);
    let (impl_generics, type_generics, where_clause) = generics.split_for_impl();
    let ident = &input.ident;
    let Body {
        schema,
        encode,
        encode_owned,
        decode,
        uses_segments,
    } = body;
    let (out, input_param) = if uses_segments {
        let Locals { out, input } = locals;
        (quote!(#out), quote!(#input))
    } else {
        (quote!(_), quote!(_))
    };
    // Without `by_ref`, the fields are moved out of the consumed value
    // (see `Body::encode_owned`); with it, the trait's default encodes
    // from a reference.
    let encode_owned = match attrs.by_ref {
        Some(_) => quote!(),
        None => quote! {
            #[inline]
            fn encode_owned(
                self,
                #out: &mut #krate::SegmentWriter,
            ) -> ::core::result::Result<(), #krate::CodecError> {
                #encode_owned
            }
        },
    };
    Ok(quote! {
        #[automatically_derived]
        impl #impl_generics #krate::WireValue for #ident #type_generics #where_clause {
            const SCHEMA_ID: ::core::primitive::u64 = #schema;

            #[inline]
            fn encode(
                &self,
                #out: &mut #krate::SegmentWriter,
            ) -> ::core::result::Result<(), #krate::CodecError> {
                #encode
            }

            #encode_owned

            #[inline]
            fn decode(
                #input_param: &mut #krate::SegmentReader<'_>,
            ) -> ::core::result::Result<Self, #krate::CodecError> {
                #decode
            }
        }
    })
}

/// `#[wire(serde)]`: the whole value as one segment through serde. The
/// type's own serde bounds decide what it needs, so the impl asks for
/// `Self: SerdeValue` instead of bounding the type parameters, and the
/// error for a type that is not serde (or a build without dinah-std's
/// `serde` feature) names both.
fn serde_impl(input: &DeriveInput, serde: &Path, name: &str, krate: &Path) -> TokenStream {
    let ident = &input.ident;
    let mut generics = input.generics.clone();
    // A `WireValue` is `Send + 'static`.
    for param in generics.type_params_mut() {
        param.bounds.push(parse_quote!(::core::marker::Send));
        param.bounds.push(parse_quote!('static));
    }
    generics
        .make_where_clause()
        .predicates
        .push(parse_quote_spanned!(serde.span()=> Self: #krate::__derive::SerdeValue));
    let (impl_generics, type_generics, where_clause) = generics.split_for_impl();
    quote! {
        #[automatically_derived]
        impl #impl_generics #krate::WireValue for #ident #type_generics #where_clause {
            const SCHEMA_ID: ::core::primitive::u64 = #krate::__derive::serde_schema(#name);

            #[inline]
            fn encode(
                &self,
                out: &mut #krate::SegmentWriter,
            ) -> ::core::result::Result<(), #krate::CodecError> {
                #krate::__derive::serde_encode(self, out)
            }

            #[inline]
            fn decode(
                input: &mut #krate::SegmentReader<'_>,
            ) -> ::core::result::Result<Self, #krate::CodecError> {
                #krate::__derive::serde_decode(input)
            }
        }
    }
}

/// A struct: its fields in declaration order, like a tuple of them.
fn struct_body(fields: &Fields, name: &str, krate: &Path, locals: &Locals) -> syn::Result<Body> {
    fields::check(fields)?;
    let field_schemas = fields::schema_list(fields, krate);
    let values: Vec<TokenStream> = fields::members(fields)
        .iter()
        .map(|member| quote!(&self.#member))
        .collect();
    let encode_fields = fields::encode_each(fields, &values, Encode::Borrowed, krate, locals);
    // Moved out field by field: a large buffer a field owns can then
    // travel without a copy.
    let (pattern, owned) = fields::pattern(&quote!(Self), fields);
    let encode_owned_fields = fields::encode_each(fields, &owned, Encode::Owned, krate, locals);
    let value = fields::construct(&quote!(Self), fields, krate, locals);
    Ok(Body {
        schema: quote!(#krate::__derive::struct_schema(#name, #field_schemas)),
        encode: quote! {
            #encode_fields
            ::core::result::Result::Ok(())
        },
        encode_owned: quote! {
            let #pattern = self;
            #encode_owned_fields
            ::core::result::Result::Ok(())
        },
        decode: quote!(::core::result::Result::Ok(#value)),
        uses_segments: !fields.is_empty(),
    })
}

/// Fails on a lifetime parameter: a `WireValue` is `'static` (decoding
/// builds an owned value from the segments).
fn reject_lifetimes(generics: &Generics) -> syn::Result<()> {
    match generics.lifetimes().next() {
        Some(lifetime) => Err(syn::Error::new_spanned(
            lifetime,
            "`#[derive(WireValue)]` does not support lifetime parameters: a WireValue owns its data",
        )),
        None => Ok(()),
    }
}

/// `generics` with a `WireValue` bound on each type parameter (the
/// user's `where` clause is kept as written).
fn bounded(generics: &Generics, krate: &Path) -> Generics {
    let mut generics = generics.clone();
    for param in generics.type_params_mut() {
        param.bounds.push(parse_quote!(#krate::WireValue));
    }
    generics
}

#[cfg(test)]
mod tests;
