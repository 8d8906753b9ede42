//! A segment of a frame held apart: an owned buffer of plain numbers,
//! carried as its little-endian bytes (see [`Tail`]).

use std::fmt;

pub use dinah_core::wire::TailWidth;

/// The elements of a [`Tail`]'s buffer.
#[derive(Clone, PartialEq, Eq)]
enum Words {
    One(Vec<u8>),
    Two(Vec<u16>),
    Four(Vec<u32>),
    Eight(Vec<u64>),
    Sixteen(Vec<u128>),
}

/// A segment of a frame in an allocation of its own, its tail or a middle
/// part (see [`Frame`](super::Frame)): bytes, or numbers of one width
/// whose memory is their little-endian bytes.
///
/// A `Vec<f64>` that a value hands over whole
/// ([`WireValue::encode_owned`](crate::WireValue::encode_owned)) becomes a
/// frame's tail as it is: its allocation is kept, typed as the unsigned
/// integers of its width (`Vec<u64>` for `f64`, `i64` and `u64`), and the
/// transport sends its bytes from there. A tail received into a buffer of
/// that width (the header's [`TailWidth`]) becomes the decoded `Vec<f64>`
/// the same way. Both conversions keep the allocation's size and
/// alignment, so they are casts ([`bytemuck`]), never copies; a
/// conversion between widths copies.
///
/// The bytes of a wider buffer are its memory, which is the wire's
/// little-endian order only on a little-endian machine: on a big-endian
/// one, vectors of numbers are never kept (numbers are converted to bytes
/// and back one by one) and every tail holds bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Tail(Words);

impl Default for Tail {
    fn default() -> Self {
        Self(Words::One(Vec::new()))
    }
}

impl From<Vec<u8>> for Tail {
    #[inline]
    fn from(bytes: Vec<u8>) -> Self {
        Self(Words::One(bytes))
    }
}

/// The numbers whose vectors a [`Tail`] keeps without copying: every
/// primitive integer and float. Sealed: a `Vec` of any of them has the
/// size and alignment of the unsigned integers of its width.
pub trait TailNumber: bytemuck::Pod + sealed::Sealed {
    /// The width of the number.
    const WIDTH: TailWidth;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! tail_number {
    ($($ty:ty => $width:ident),* $(,)?) => {$(
        impl sealed::Sealed for $ty {}
        impl TailNumber for $ty {
            const WIDTH: TailWidth = TailWidth::$width;
        }
    )*};
}

tail_number!(
    u8 => One, i8 => One,
    u16 => Two, i16 => Two,
    u32 => Four, i32 => Four, f32 => Four,
    u64 => Eight, i64 => Eight, f64 => Eight,
    u128 => Sixteen, i128 => Sixteen,
);

/// `items` cast to a vector of `U` (same size and alignment), or given
/// back.
fn cast<T: bytemuck::Pod, U: bytemuck::Pod>(items: Vec<T>) -> Result<Vec<U>, Vec<T>> {
    bytemuck::allocation::try_cast_vec(items).map_err(|(_, items)| items)
}

impl Tail {
    /// An empty tail of bytes.
    pub const fn new() -> Self {
        Self(Words::One(Vec::new()))
    }

    /// A tail of `len` zero bytes kept as numbers of `width` (for a
    /// transport to receive into), or as bytes where
    /// [`TailWidth::for_len`] says so.
    pub fn zeroed(width: TailWidth, len: usize) -> Self {
        let width = width.for_len(len);
        let count = len / width.bytes();
        Self(match width {
            TailWidth::One => Words::One(vec![0; len]),
            TailWidth::Two => Words::Two(vec![0; count]),
            TailWidth::Four => Words::Four(vec![0; count]),
            TailWidth::Eight => Words::Eight(vec![0; count]),
            TailWidth::Sixteen => Words::Sixteen(vec![0; count]),
        })
    }

    /// `items` as a tail: their allocation, kept, on a little-endian
    /// machine; their little-endian bytes, copied, on a big-endian one.
    pub fn from_numbers<T: TailNumber>(items: Vec<T>) -> Self {
        if cfg!(target_endian = "big") && T::WIDTH != TailWidth::One {
            let mut bytes = Vec::with_capacity(items.len() * size_of::<T>());
            for item in &items {
                let mut raw = bytemuck::bytes_of(item).to_vec();
                raw.reverse();
                bytes.extend_from_slice(&raw);
            }
            return Self(Words::One(bytes));
        }
        let words = match T::WIDTH {
            TailWidth::One => cast(items).map(Words::One),
            TailWidth::Two => cast(items).map(Words::Two),
            TailWidth::Four => cast(items).map(Words::Four),
            TailWidth::Eight => cast(items).map(Words::Eight),
            TailWidth::Sixteen => cast(items).map(Words::Sixteen),
        };
        // Every `TailNumber` has the layout of its width's unsigned
        // integer, so the cast cannot fail; bytes are the fallback anyway.
        Self(words.unwrap_or_else(|items| Words::One(bytemuck::cast_slice(&items).to_vec())))
    }

    /// The tail as a vector of `T` without a copy if it is kept in `T`'s
    /// width, or given back.
    ///
    /// # Errors
    ///
    /// The tail itself if it is kept in another width.
    pub fn into_numbers<T: TailNumber>(self) -> Result<Vec<T>, Self> {
        if self.width() != T::WIDTH {
            return Err(self);
        }
        match self.0 {
            Words::One(items) => cast(items).map_err(|items| Self(Words::One(items))),
            Words::Two(items) => cast(items).map_err(|items| Self(Words::Two(items))),
            Words::Four(items) => cast(items).map_err(|items| Self(Words::Four(items))),
            Words::Eight(items) => cast(items).map_err(|items| Self(Words::Eight(items))),
            Words::Sixteen(items) => cast(items).map_err(|items| Self(Words::Sixteen(items))),
        }
    }

    /// The tail's buffer as bytes, without a copy if it holds bytes.
    ///
    /// # Errors
    ///
    /// The tail itself if it holds wider numbers.
    pub fn into_bytes(self) -> Result<Vec<u8>, Self> {
        match self.0 {
            Words::One(bytes) => Ok(bytes),
            words => Err(Self(words)),
        }
    }

    /// The width its buffer is kept in.
    pub fn width(&self) -> TailWidth {
        match &self.0 {
            Words::One(_) => TailWidth::One,
            Words::Two(_) => TailWidth::Two,
            Words::Four(_) => TailWidth::Four,
            Words::Eight(_) => TailWidth::Eight,
            Words::Sixteen(_) => TailWidth::Sixteen,
        }
    }

    /// Its bytes (the wire's, see [`Tail`]).
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Words::One(bytes) => bytes,
            Words::Two(items) => bytemuck::cast_slice(items),
            Words::Four(items) => bytemuck::cast_slice(items),
            Words::Eight(items) => bytemuck::cast_slice(items),
            Words::Sixteen(items) => bytemuck::cast_slice(items),
        }
    }

    /// Its bytes, writable (for a transport receiving into it).
    #[inline]
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.0 {
            Words::One(bytes) => bytes,
            Words::Two(items) => bytemuck::cast_slice_mut(items),
            Words::Four(items) => bytemuck::cast_slice_mut(items),
            Words::Eight(items) => bytemuck::cast_slice_mut(items),
            Words::Sixteen(items) => bytemuck::cast_slice_mut(items),
        }
    }

    /// Sets its length to `len` bytes: cut, or extended with zeros.
    ///
    /// # Panics
    ///
    /// If `len` is not a whole number of its numbers.
    pub fn resize(&mut self, len: usize) {
        let width = self.width().bytes();
        assert!(len % width == 0, "a tail holds whole numbers");
        let count = len / width;
        match &mut self.0 {
            Words::One(bytes) => bytes.resize(count, 0),
            Words::Two(items) => items.resize(count, 0),
            Words::Four(items) => items.resize(count, 0),
            Words::Eight(items) => items.resize(count, 0),
            Words::Sixteen(items) => items.resize(count, 0),
        }
    }

    /// Its length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    /// Is it empty?
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes its allocation occupies.
    pub fn capacity(&self) -> usize {
        match &self.0 {
            Words::One(bytes) => bytes.capacity(),
            Words::Two(items) => items.capacity() * 2,
            Words::Four(items) => items.capacity() * 4,
            Words::Eight(items) => items.capacity() * 8,
            Words::Sixteen(items) => items.capacity() * 16,
        }
    }
}

impl fmt::Debug for Tail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Sizes only: never payload bytes.
        f.debug_struct("Tail")
            .field("width", &self.width())
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vector_of_numbers_is_kept_in_its_allocation_both_ways() {
        let expected = [1.5f64, -2.25, 1e300];
        let items = expected.to_vec();
        let address = items.as_ptr().cast::<u8>();
        let tail = Tail::from_numbers(items);
        if cfg!(target_endian = "little") {
            assert_eq!(tail.width(), TailWidth::Eight);
            assert_eq!(tail.as_bytes().as_ptr(), address, "not copied");
        }
        let wire: Vec<u8> = expected.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(tail.as_bytes(), wire);
        assert_eq!(tail.len(), 24);
        if cfg!(target_endian = "little") {
            let back = tail.into_numbers::<f64>().expect("same width");
            assert_eq!(back, expected);
            assert_eq!(back.as_ptr().cast::<u8>(), address, "not copied");
        }
    }

    #[test]
    fn a_tail_of_another_width_is_given_back() {
        let tail = Tail::from_numbers(vec![7u32, 8]);
        let tail = tail.into_numbers::<u64>().expect_err("4 is not 8");
        let tail = tail.into_bytes().expect_err("not bytes");
        let back: Vec<i32> = tail.into_numbers().expect("same width");
        assert_eq!(back, [7, 8]);
        let bytes = Tail::from(vec![1u8, 2, 3]);
        assert_eq!(bytes.width(), TailWidth::One);
        assert_eq!(bytes.into_numbers::<i8>().expect("bytes"), [1, 2, 3]);
    }

    #[test]
    fn a_zeroed_tail_takes_its_width_only_for_whole_elements() {
        let mut tail = Tail::zeroed(TailWidth::Four, 12);
        assert_eq!(tail.len(), 12);
        assert!(tail.capacity() >= 12);
        tail.as_bytes_mut()
            .copy_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0]);
        if cfg!(target_endian = "little") {
            assert_eq!(tail.width(), TailWidth::Four);
            assert_eq!(tail.into_numbers::<u32>().expect("width"), [1, 2, 3]);
        }
        let odd = Tail::zeroed(TailWidth::Eight, 12);
        assert_eq!(odd.width(), TailWidth::One);
        assert_eq!(odd.len(), 12);
    }

    #[test]
    fn debug_shows_sizes_only() {
        assert_eq!(
            format!("{:?}", Tail::from(vec![9u8; 3])),
            "Tail { width: One, len: 3 }"
        );
    }
}
