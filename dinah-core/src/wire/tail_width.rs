//! The element width of a frame's large segments: how a receiver may keep
//! them without copying them again.

/// How wide the numbers packed in a frame's large segments are: 1, 2, 4,
/// 8 or 16 bytes (header byte 7, as the base-2 logarithm).
///
/// A sender that packs vectors of numbers into large segments (a
/// `Vec<f64>`: eight) says so, and a receiver that keeps a segment in an
/// allocation of its own allocates it for numbers of that width, so the
/// decoded vector can take the allocation over instead of copying it. One
/// width is said per frame: a sender whose large segments pack numbers of
/// different widths says the last segment's if it is one of them (else
/// bytes), and a vector decoded from a segment kept in another width is
/// copied once. It is a hint about memory, not
/// about meaning: the bytes are the same whatever the width, and a
/// receiver may ignore it. Only requests and results with at least one
/// segment carry a width other than [`One`](Self::One).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TailWidth {
    /// Bytes, or nothing said (every frame but a request's or result's
    /// whose large segments pack wider numbers).
    #[default]
    One,
    /// Two-byte numbers (`u16`, `i16`).
    Two,
    /// Four-byte numbers (`u32`, `i32`, `f32`).
    Four,
    /// Eight-byte numbers (`u64`, `i64`, `f64`).
    Eight,
    /// Sixteen-byte numbers (`u128`, `i128`).
    Sixteen,
}

impl TailWidth {
    /// Every width, narrowest first.
    pub const ALL: [Self; 5] = [Self::One, Self::Two, Self::Four, Self::Eight, Self::Sixteen];

    /// Bytes per number.
    pub const fn bytes(self) -> usize {
        1 << self.log2()
    }

    /// The base-2 logarithm of [`bytes`](Self::bytes), 0 to 4: the wire
    /// form.
    pub const fn log2(self) -> u8 {
        match self {
            Self::One => 0,
            Self::Two => 1,
            Self::Four => 2,
            Self::Eight => 3,
            Self::Sixteen => 4,
        }
    }

    /// The width whose wire form is `log2`, if any.
    pub const fn from_log2(log2: u8) -> Option<Self> {
        match log2 {
            0 => Some(Self::One),
            1 => Some(Self::Two),
            2 => Some(Self::Four),
            3 => Some(Self::Eight),
            4 => Some(Self::Sixteen),
            _ => None,
        }
    }

    /// The width a receiver keeps a segment of `len` bytes in when
    /// its sender said `self`: `self` if `len` is a whole number of its
    /// numbers and this machine is little-endian (where a number's memory
    /// is its wire bytes), [`One`](Self::One) otherwise.
    pub const fn for_len(self, len: usize) -> Self {
        if cfg!(target_endian = "little") && len % self.bytes() == 0 {
            self
        } else {
            Self::One
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_round_trip_through_their_wire_form() {
        for width in TailWidth::ALL {
            assert_eq!(TailWidth::from_log2(width.log2()), Some(width));
            assert_eq!(width.bytes(), 1 << width.log2());
        }
        for log2 in 5..=u8::MAX {
            assert_eq!(TailWidth::from_log2(log2), None);
        }
    }

    #[test]
    fn a_partial_number_keeps_bytes() {
        assert_eq!(TailWidth::Eight.for_len(12), TailWidth::One);
        assert_eq!(TailWidth::One.for_len(7), TailWidth::One);
        let kept = TailWidth::Four.for_len(12);
        if cfg!(target_endian = "little") {
            assert_eq!(kept, TailWidth::Four);
        } else {
            assert_eq!(kept, TailWidth::One);
        }
    }
}
