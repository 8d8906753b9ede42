//! Compile-fail checks: misuse of the derives is refused at compile time.
//!
//! Each `compile_fail` block is paired with a block that compiles: the same
//! code with only the offending part fixed, so the failure is known to come
//! from that part (doctests deny warnings, which would otherwise make any
//! sloppy block "fail").
//!
//! # `#[derive(Action)]` needs an output type
//!
//! ```compile_fail
//! use dinah_std::{Action, WireValue};
//!
//! #[derive(WireValue, Action)]
//! #[action(name = "doc.Ping/1")]
//! struct Ping;
//! ```
//!
//! ```
//! use dinah_std::{Action, WireValue};
//!
//! #[derive(WireValue, Action)]
//! #[action(name = "doc.Ping/1", output = ())]
//! struct Ping;
//! # let _ = Ping;
//! ```
//!
//! # A union has no derived codec
//!
//! ```compile_fail
//! use dinah_std::WireValue;
//!
//! #[derive(WireValue)]
//! union Bits {
//!     int: u32,
//!     float: f32,
//! }
//! ```
//!
//! ```
//! use dinah_std::WireValue;
//!
//! #[derive(WireValue)]
//! struct Bits {
//!     int: u32,
//!     float: f32,
//! }
//! # let _ = Bits { int: 0, float: 0.0 }.int;
//! # let _ = Bits { int: 0, float: 0.0 }.float;
//! ```
//!
//! # An enum needs a variant
//!
//! ```compile_fail
//! use dinah_std::WireValue;
//!
//! #[derive(WireValue)]
//! enum Never {}
//! ```
//!
//! ```
//! use dinah_std::WireValue;
//!
//! #[derive(WireValue)]
//! enum Once {
//!     Only,
//! }
//! # let _ = Once::Only;
//! ```
//!
//! # Unknown attribute keys are errors, not ignored
//!
//! ```compile_fail
//! use dinah_std::WireValue;
//!
//! #[derive(WireValue)]
//! #[wire(nmae = "doc.Point/1")]
//! struct Point(u8, u8);
//! ```
//!
//! ```
//! use dinah_std::WireValue;
//!
//! #[derive(WireValue)]
//! #[wire(name = "doc.Point/1")]
//! struct Point(u8, u8);
//! # let _ = Point(0, 0);
//! ```
//!
//! ```compile_fail
//! use dinah_std::{Action, WireValue};
//!
//! #[derive(WireValue, Action)]
//! #[action(output = u8, domain = 2)]
//! struct Ping;
//! ```
//!
//! ```
//! use dinah_std::{Action, WireValue};
//!
//! #[derive(WireValue, Action)]
//! #[action(output = u8)]
//! struct Ping;
//! # let _ = Ping;
//! ```
//!
//! # Every field needs a codec
//!
//! ```compile_fail,E0277
//! use dinah_std::WireValue;
//!
//! #[derive(WireValue)]
//! struct Timed {
//!     at: std::time::Instant,
//! }
//! ```
//!
//! ```
//! use dinah_std::WireValue;
//!
//! #[derive(WireValue)]
//! struct Timed {
//!     at_nanos: u64,
//! }
//! # let _ = Timed { at_nanos: 0 }.at_nanos;
//! ```
//!
//! # A derived action is not generic
//!
//! ```compile_fail
//! use dinah_std::{Action, WireValue};
//!
//! #[derive(WireValue, Action)]
//! #[action(output = u64)]
//! struct Wrap<T>(T);
//! ```
//!
//! ```
//! use dinah_std::{Action, WireValue};
//!
//! #[derive(WireValue, Action)]
//! #[action(output = u64)]
//! struct Wrap(u64);
//! # let _ = Wrap(0);
//! ```
//!
//! # `#[wire(serde)]` needs a serde type
//!
//! ```compile_fail
//! use dinah_std::WireValue;
//!
//! #[derive(WireValue)]
//! #[wire(serde, name = "doc.Settings/1")]
//! struct Settings {
//!     depth: u8,
//! }
//! ```
//!
//! ```
//! use dinah_std::WireValue;
//!
//! #[derive(WireValue, serde::Serialize, serde::Deserialize)]
//! #[wire(serde, name = "doc.Settings/1")]
//! struct Settings {
//!     depth: u8,
//! }
//! # let _ = Settings { depth: 0 }.depth;
//! ```
