//! The codec of an enum: a one-byte tag segment (the variant's position in
//! declaration order), then the variant's fields.

use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::quote;
use syn::ext::IdentExt;
use syn::{DataEnum, Path};

use super::Body;
use super::fields::{self, Encode, Locals};
use crate::attrs::reject_wire_attrs;

/// The most variants a one-byte tag can tell apart.
const MAX_VARIANTS: usize = 256;

/// The schema, `encode` and `decode` bodies of the enum `ident` named
/// `name` in its schema.
pub(super) fn body(
    ident: &Ident,
    data: &DataEnum,
    name: &str,
    krate: &Path,
    locals: &Locals,
) -> syn::Result<Body> {
    check(ident, data)?;
    let mut schemas = Vec::new();
    let mut encode_arms = Vec::new();
    let mut encode_owned_arms = Vec::new();
    let mut decode_arms = Vec::new();
    for (position, variant) in data.variants.iter().enumerate() {
        let tag = Literal::u8_suffixed(tag(position));
        let variant_ident = &variant.ident;
        let path = quote!(Self::#variant_ident);
        let variant_name = variant_ident.unraw().to_string();
        let field_schemas = fields::schema_list(&variant.fields, krate);
        schemas.push(quote!((#variant_name, #field_schemas)));

        let (pattern, values) = fields::pattern(&path, &variant.fields);
        let out = &locals.out;
        let encode_fields =
            fields::encode_each(&variant.fields, &values, Encode::Borrowed, krate, locals);
        encode_arms.push(quote! {
            #pattern => {
                #krate::SegmentWriter::push(#out, &[#tag]);
                #encode_fields
            }
        });
        let encode_fields =
            fields::encode_each(&variant.fields, &values, Encode::Owned, krate, locals);
        encode_owned_arms.push(quote! {
            #pattern => {
                #krate::SegmentWriter::push(#out, &[#tag]);
                #encode_fields
            }
        });
        let value = fields::construct(&path, &variant.fields, krate, locals);
        decode_arms.push(quote!(#tag => ::core::result::Result::Ok(#value),));
    }
    Ok(Body {
        schema: quote!(#krate::__derive::enum_schema(#name, &[#(#schemas),*])),
        encode: quote! {
            match self {
                #(#encode_arms)*
            }
            ::core::result::Result::Ok(())
        },
        encode_owned: quote! {
            match self {
                #(#encode_owned_arms)*
            }
            ::core::result::Result::Ok(())
        },
        decode: decode(&decode_arms, krate, locals),
        uses_segments: true,
    })
}

/// Fails for an enum without variants (no value to encode) or with more
/// than a one-byte tag can number, and for helper attributes on variants
/// or their fields.
fn check(ident: &Ident, data: &DataEnum) -> syn::Result<()> {
    if data.variants.is_empty() {
        return Err(syn::Error::new_spanned(
            ident,
            "`#[derive(WireValue)]` needs at least one variant: an enum without variants has no value to encode",
        ));
    }
    if let Some(extra) = data.variants.iter().nth(MAX_VARIANTS) {
        return Err(syn::Error::new_spanned(
            &extra.ident,
            format!(
                "`#[derive(WireValue)]` supports at most {MAX_VARIANTS} variants (the tag is one byte); this enum has {}",
                data.variants.len()
            ),
        ));
    }
    for variant in &data.variants {
        reject_wire_attrs(&variant.attrs, "variants")?;
        fields::check(&variant.fields)?;
    }
    Ok(())
}

/// The tag of the variant at `position`, which `check` bounded.
fn tag(position: usize) -> u8 {
    u8::try_from(position).unwrap_or(u8::MAX)
}

/// Reads the tag and dispatches to the variant's arm; an unknown tag is
/// `CodecError::InvalidTag`. With all 256 tags taken there is no unknown
/// tag, so no fallback arm (it would be unreachable).
fn decode(arms: &[TokenStream], krate: &Path, locals: &Locals) -> TokenStream {
    let input = &locals.input;
    let tag = Ident::new("tag", Span::mixed_site());
    let read = quote! {
        let [#tag] = #krate::SegmentReader::next_array::<1>(#input)?;
    };
    if arms.len() == MAX_VARIANTS {
        return quote! {
            #read
            match #tag {
                #(#arms)*
            }
        };
    }
    let index = Ident::new("index", Span::mixed_site());
    let value = Ident::new("value", Span::mixed_site());
    quote! {
        let #index = #krate::SegmentReader::position(#input);
        #read
        match #tag {
            #(#arms)*
            #value => ::core::result::Result::Err(#krate::CodecError::InvalidTag {
                index: #index,
                value: #value,
            }),
        }
    }
}
