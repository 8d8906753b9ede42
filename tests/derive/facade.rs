//! The derives through the facade `dinah::std`, under strict lints.

use dinah::std::{Action, WireValue};

use super::round_trip;

/// Generated code under strict lints: none of them may fire.
pub mod strict {
    #![deny(missing_docs, warnings, clippy::all, clippy::pedantic)]

    use dinah::std::{Action, WireValue};

    /// A point, its own action: the facade's re-export, default path.
    #[derive(WireValue, Action, Debug, Clone, PartialEq, Eq)]
    #[action(output = i64)]
    pub struct Point {
        /// Across.
        pub x: i64,
        /// Down.
        pub y: i64,
    }

    /// A shape, with every kind of variant; the facade's path named
    /// explicitly, as a crate depending only on `dinah` resolves it.
    #[derive(WireValue, Action, Debug, Clone, PartialEq, Eq)]
    #[wire(crate = "::dinah::std", name = "test.derive.Shape/1")]
    #[action(output = Point, name = "test.derive.Shape/1")]
    pub enum Shape {
        /// Nothing.
        Empty,
        /// A dot.
        Dot(Point),
        /// A box.
        Rect {
            /// One corner.
            from: Point,
            /// The other.
            to: Point,
        },
    }
}

#[test]
fn the_facade_path_works() {
    use strict::{Point, Shape};
    let origin = Point { x: 0, y: -1 };
    round_trip(&origin);
    round_trip(&Shape::Empty);
    round_trip(&Shape::Dot(origin.clone()));
    round_trip(&Shape::Rect {
        from: origin,
        to: Point { x: 4, y: 4 },
    });
    assert_eq!(Shape::ID, dinah::std::action_id("test.derive.Shape/1"));
    assert_eq!(Point::ID, dinah::std::action_id("Point"));
    assert_eq!(
        <<Shape as Action>::Output as WireValue>::SCHEMA_ID,
        Point::SCHEMA_ID
    );
}
