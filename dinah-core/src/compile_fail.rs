//! Placeholder: compile-fail doctests land with the core primitives.
