//! Pairs of types that differ in one respect each (`same` matches `base`
//! in everything): any change of layout or name changes the schema ID.

use dinah_std::WireValue;

macro_rules! variant {
    ($module:ident, $item:item) => {
        pub(super) mod $module {
            use dinah_std::WireValue;
            #[derive(WireValue)]
            $item
        }
    };
}

variant!(
    base,
    pub(crate) struct P {
        x: u32,
        y: u32,
    }
);
variant!(
    same,
    pub(crate) struct P {
        x: u32,
        y: u32,
    }
);
variant!(
    renamed,
    pub(crate) struct P {
        x: u32,
        z: u32,
    }
);
variant!(
    retyped,
    pub(crate) struct P {
        x: u32,
        y: u64,
    }
);
variant!(
    reordered,
    pub(crate) struct P {
        y: u32,
        x: u32,
    }
);
variant!(
    retitled,
    pub(crate) struct Q {
        x: u32,
        y: u32,
    }
);
variant!(
    named,
    #[wire(name = "app.P/1")]
    pub(crate) struct P {}
);
variant!(
    renumbered,
    #[wire(name = "app.P/2")]
    pub(crate) struct P {}
);
variant!(
    enum_base,
    pub(crate) enum E {
        A(u8),
        B,
    }
);
variant!(
    enum_variant_renamed,
    pub(crate) enum E {
        A(u8),
        C,
    }
);
variant!(
    enum_reordered,
    pub(crate) enum E {
        B,
        A(u8),
    }
);
variant!(
    enum_field_moved,
    pub(crate) enum E {
        A,
        B(u8),
    }
);

#[test]
fn any_layout_change_changes_the_schema_id() {
    let base = base::P::SCHEMA_ID;
    assert_eq!(base, same::P::SCHEMA_ID);
    for (what, other) in [
        ("a field renamed", renamed::P::SCHEMA_ID),
        ("a field retyped", retyped::P::SCHEMA_ID),
        ("fields reordered", reordered::P::SCHEMA_ID),
        ("the type renamed", retitled::Q::SCHEMA_ID),
    ] {
        assert_ne!(base, other, "{what}");
    }
    assert_ne!(named::P::SCHEMA_ID, renumbered::P::SCHEMA_ID);
    let base = enum_base::E::SCHEMA_ID;
    for (what, other) in [
        ("a variant renamed", enum_variant_renamed::E::SCHEMA_ID),
        ("variants reordered", enum_reordered::E::SCHEMA_ID),
        (
            "a field moved between variants",
            enum_field_moved::E::SCHEMA_ID,
        ),
    ] {
        assert_ne!(base, other, "{what}");
    }
}
