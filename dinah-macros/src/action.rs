//! `#[derive(Action)]`: the action's ID (from its name) and output type.

use proc_macro2::TokenStream;
use quote::quote;
use syn::ext::IdentExt;
use syn::{DeriveInput, GenericParam};

use crate::attrs::{action_attrs, wire_attrs};
use crate::crate_path;

/// Expands `#[derive(Action)]` on `input`.
pub(crate) fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    let attrs = action_attrs(&input.attrs)?;
    let Some(output) = attrs.output else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "`#[derive(Action)]` needs the action's output type: add `#[action(output = Type)]`",
        ));
    };
    if let Some(param) = input
        .generics
        .params
        .iter()
        .find(|param| !matches!(param, GenericParam::Lifetime(_)))
    {
        return Err(syn::Error::new_spanned(
            param,
            "`#[derive(Action)]` does not support type or const parameters: the ID comes from the name alone, so every instantiation would share it; implement `Action` by hand",
        ));
    }
    // `#[wire(crate = ...)]` also serves the action derive, so one override
    // covers both; a malformed `wire` attribute is reported by the
    // `WireValue` derive, not twice.
    let explicit = attrs
        .krate
        .or_else(|| wire_attrs(&input.attrs).ok().and_then(|wire| wire.krate));
    let krate = crate_path::dinah_std(explicit);
    let name = attrs
        .name
        .map_or_else(|| input.ident.unraw().to_string(), |name| name.value());
    let ident = &input.ident;
    let (impl_generics, type_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        #[automatically_derived]
        impl #impl_generics #krate::Action for #ident #type_generics #where_clause {
            const ID: ::core::primitive::u128 = #krate::action_id(#name);
            type Output = #output;
        }
    })
}

#[cfg(test)]
mod tests {
    use syn::parse_quote;

    use super::*;

    fn error_of(input: &DeriveInput) -> String {
        match expand(input) {
            Ok(tokens) => panic!("expected an error, got {tokens}"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn output_is_required() {
        let input: DeriveInput = parse_quote!(
            #[action(name = "app.A/1")]
            struct A;
        );
        assert!(error_of(&input).contains("#[action(output = Type)]"));
    }

    #[test]
    fn generic_actions_are_refused() {
        let input: DeriveInput = parse_quote!(
            #[action(output = u8)]
            struct A<T>(T);
        );
        assert!(error_of(&input).contains("type or const parameters"));
    }

    #[test]
    fn the_id_comes_from_the_name() {
        let input: DeriveInput = parse_quote!(
            #[wire(crate = "::dinah::std")]
            #[action(output = Vec<u8>, name = "app.Fetch/2")]
            struct Fetch;
        );
        let code = expand(&input).unwrap().to_string();
        assert!(
            code.contains(":: dinah :: std :: action_id (\"app.Fetch/2\")"),
            "{code}"
        );
        assert!(code.contains("type Output = Vec < u8 >"), "{code}");

        let unnamed: DeriveInput = parse_quote!(
            #[action(output = ())]
            struct r#Ping;
        );
        let code = expand(&unnamed).unwrap().to_string();
        assert!(code.contains("action_id (\"Ping\")"), "{code}");
    }
}
