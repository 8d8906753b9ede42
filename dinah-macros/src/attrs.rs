//! Parsing the `#[wire(...)]` and `#[action(...)]` helper attributes.

use syn::meta::ParseNestedMeta;
use syn::{Attribute, LitStr, Path, Type};

/// What `#[wire(...)]` on a type says.
#[derive(Default)]
pub(crate) struct WireAttrs {
    /// `name = "..."`: the name the schema ID digests.
    pub(crate) name: Option<LitStr>,
    /// `crate = "..."`: the path to `dinah_std`.
    pub(crate) krate: Option<Path>,
    /// `serde`: the value travels through serde as one segment.
    pub(crate) serde: Option<Path>,
    /// `by_ref`: the value is encoded from a reference even when it is
    /// consumed (its fields are not moved out: a type with `Drop`).
    pub(crate) by_ref: Option<Path>,
}

/// What `#[action(...)]` on a type says.
#[derive(Default)]
pub(crate) struct ActionAttrs {
    /// `output = Type`: the action's output.
    pub(crate) output: Option<Type>,
    /// `name = "..."`: the name the action ID digests.
    pub(crate) name: Option<LitStr>,
    /// `crate = "..."`: the path to `dinah_std`.
    pub(crate) krate: Option<Path>,
}

/// Reads every `#[wire(...)]` among `attrs`.
pub(crate) fn wire_attrs(attrs: &[Attribute]) -> syn::Result<WireAttrs> {
    let mut found = WireAttrs::default();
    for attr in attrs.iter().filter(|attr| attr.path().is_ident("wire")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("name") {
                set_once(&mut found.name, name_value(&meta)?, &meta)
            } else if meta.path.is_ident("crate") {
                set_once(&mut found.krate, crate_value(&meta)?, &meta)
            } else if meta.path.is_ident("serde") {
                set_once(&mut found.serde, meta.path.clone(), &meta)
            } else if meta.path.is_ident("by_ref") {
                set_once(&mut found.by_ref, meta.path.clone(), &meta)
            } else {
                Err(meta.error(
                    "unknown `wire` attribute key; expected `name`, `crate`, `serde` or `by_ref`",
                ))
            }
        })?;
    }
    Ok(found)
}

/// Reads every `#[action(...)]` among `attrs`.
pub(crate) fn action_attrs(attrs: &[Attribute]) -> syn::Result<ActionAttrs> {
    let mut found = ActionAttrs::default();
    for attr in attrs.iter().filter(|attr| attr.path().is_ident("action")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("output") {
                let output: Type = meta.value()?.parse()?;
                set_once(&mut found.output, output, &meta)
            } else if meta.path.is_ident("name") {
                set_once(&mut found.name, name_value(&meta)?, &meta)
            } else if meta.path.is_ident("crate") {
                set_once(&mut found.krate, crate_value(&meta)?, &meta)
            } else {
                Err(meta
                    .error("unknown `action` attribute key; expected `output`, `name` or `crate`"))
            }
        })?;
    }
    Ok(found)
}

/// Fails if any of `attrs` is a `#[wire(...)]`: fields and variants take
/// none (an ignored attribute would look like it did something).
pub(crate) fn reject_wire_attrs(attrs: &[Attribute], place: &str) -> syn::Result<()> {
    match attrs.iter().find(|attr| attr.path().is_ident("wire")) {
        Some(attr) => Err(syn::Error::new_spanned(
            attr,
            format!("`#[wire(...)]` is not supported on {place}; put it on the type"),
        )),
        None => Ok(()),
    }
}

/// Stores `value` in `slot`, failing if the key was given before.
fn set_once<T>(slot: &mut Option<T>, value: T, meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if slot.is_some() {
        return Err(meta.error("duplicate attribute key"));
    }
    *slot = Some(value);
    Ok(())
}

/// A `= "name"` value, which must not be empty.
fn name_value(meta: &ParseNestedMeta<'_>) -> syn::Result<LitStr> {
    let name: LitStr = meta.value()?.parse()?;
    if name.value().is_empty() {
        return Err(syn::Error::new_spanned(&name, "the name must not be empty"));
    }
    Ok(name)
}

/// A `= "path"` value naming the `dinah_std` crate, such as
/// `"::dinah::std"`.
fn crate_value(meta: &ParseNestedMeta<'_>) -> syn::Result<Path> {
    let path: LitStr = meta.value()?.parse()?;
    path.parse_with(Path::parse_mod_style)
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    #[test]
    fn wire_keys_are_read_and_checked() {
        let attrs: Vec<Attribute> = vec![
            parse_quote!(#[wire(name = "app.P/1")]),
            parse_quote!(#[wire(crate = "::dinah::std")]),
            parse_quote!(#[doc = "other attributes are left alone"]),
        ];
        let found = wire_attrs(&attrs).unwrap();
        assert_eq!(found.name.unwrap().value(), "app.P/1");
        assert!(found.krate.is_some());

        let typo: Vec<Attribute> = vec![parse_quote!(#[wire(nmae = "x")])];
        let error = wire_attrs(&typo).err().unwrap();
        assert!(error.to_string().contains("unknown `wire` attribute key"));

        let twice: Vec<Attribute> = vec![
            parse_quote!(#[wire(name = "a")]),
            parse_quote!(#[wire(name = "b")]),
        ];
        let error = wire_attrs(&twice).err().unwrap();
        assert!(error.to_string().contains("duplicate"));

        let serde: Vec<Attribute> = vec![parse_quote!(#[wire(serde, name = "app.S/1")])];
        assert!(wire_attrs(&serde).unwrap().serde.is_some());
        assert!(wire_attrs(&attrs).unwrap().serde.is_none());

        let by_ref: Vec<Attribute> = vec![parse_quote!(#[wire(by_ref)])];
        assert!(wire_attrs(&by_ref).unwrap().by_ref.is_some());
        assert!(wire_attrs(&attrs).unwrap().by_ref.is_none());

        let empty: Vec<Attribute> = vec![parse_quote!(#[wire(name = "")])];
        let error = wire_attrs(&empty).err().unwrap();
        assert!(error.to_string().contains("must not be empty"));
    }

    #[test]
    fn action_keys_are_read_and_checked() {
        let attrs: Vec<Attribute> = vec![parse_quote!(
            #[action(output = Vec<u8>, name = "app.A/1", crate = "dinah_std")]
        )];
        let found = action_attrs(&attrs).unwrap();
        assert!(found.output.is_some());
        assert_eq!(found.name.unwrap().value(), "app.A/1");
        assert!(found.krate.is_some());

        let typo: Vec<Attribute> = vec![parse_quote!(#[action(ouput = u8)])];
        let error = action_attrs(&typo).err().unwrap();
        assert!(error.to_string().contains("unknown `action` attribute key"));
    }
}
