//! Placeholder: this module's content has not landed yet.
