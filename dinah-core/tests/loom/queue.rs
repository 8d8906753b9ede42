//! Placeholder: these checks have not landed yet.
