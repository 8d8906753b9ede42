//! The simulator's pseudo-random numbers: xoshiro256** seeded by
//! SplitMix64.
//!
//! Both algorithms are Blackman and Vigna's public-domain reference
//! designs, written out here so that a run replays bit for bit from its
//! seed on every platform and with every dependency version:
//!
//! - **SplitMix64** adds the golden-ratio increment `0x9e37_79b9_7f4a_7c15`
//!   to a 64-bit counter and hashes the counter with two multiply-xorshift
//!   rounds. It only seeds: rank `r` of a network seeded with `seed` takes
//!   outputs `4r .. 4r + 4` of the SplitMix64 stream started at `seed` as
//!   its xoshiro256** state, so each sending rank has its own stream and a
//!   rank's fault decisions depend only on its own sends.
//! - **xoshiro256\*\*** (256 bits of state, period 2^256 - 1) produces the
//!   numbers. The state can never be all zero: SplitMix64's output hash is a
//!   bijection and the four counters differ, so at most one word is zero.
//!
//! Probabilities compare the top 53 bits as a fraction in `[0, 1)` (exact
//! in IEEE-754 `f64`); ranges use the multiply-high reduction
//! `(x * n) >> 64`. Neither depends on the platform.

/// The golden-ratio increment of SplitMix64.
const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// One SplitMix64 output for the counter value `state` (already
/// incremented).
fn split_mix_hash(state: u64) -> u64 {
    let mut z = state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The SplitMix64 generator (used only to seed [`SimRng`]).
#[derive(Debug, Clone)]
pub(super) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A stream starting at `seed`.
    pub(super) const fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next output.
    pub(super) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        split_mix_hash(self.state)
    }
}

/// A xoshiro256** generator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SimRng {
    s: [u64; 4],
}

impl SimRng {
    /// The generator of stream `stream` for `seed`: outputs
    /// `4 * stream .. 4 * stream + 4` of SplitMix64 started at `seed`.
    pub(super) fn for_stream(seed: u64, stream: u32) -> Self {
        // SplitMix64 is counter based: skipping n outputs adds n * gamma.
        let skip = u64::from(stream).wrapping_mul(4).wrapping_mul(GOLDEN_GAMMA);
        let mut seeder = SplitMix64::new(seed.wrapping_add(skip));
        Self::from_state([
            seeder.next_u64(),
            seeder.next_u64(),
            seeder.next_u64(),
            seeder.next_u64(),
        ])
    }

    /// A generator with exactly this state (tests use the reference
    /// vectors).
    const fn from_state(s: [u64; 4]) -> Self {
        Self { s }
    }

    /// The next output.
    pub(super) fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// `true` with probability `p` (validated to lie in `[0, 1]`). Draws
    /// nothing when `p` is zero, so a plan without a fault does not move
    /// the stream.
    pub(super) fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        // The top 53 bits as a fraction in [0, 1): exact in f64.
        let fraction = (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        fraction < p
    }

    /// A value in `low..=high` (requires `low <= high`). Draws nothing when
    /// the range holds one value.
    pub(super) fn in_range(&mut self, low: u64, high: u64) -> u64 {
        if low >= high {
            return low;
        }
        match (high - low).checked_add(1) {
            Some(span) => low + ((u128::from(self.next_u64()) * u128::from(span)) >> 64) as u64,
            // The full u64 range.
            None => self.next_u64(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_mix_matches_the_reference_vector() {
        let mut rng = SplitMix64::new(1_234_567);
        let got: Vec<u64> = (0..5).map(|_| rng.next_u64()).collect();
        assert_eq!(
            got,
            [
                6_457_827_717_110_365_317,
                3_203_168_211_198_807_973,
                9_817_491_932_198_370_423,
                4_593_380_528_125_082_431,
                16_408_922_859_458_223_821,
            ]
        );
    }

    #[test]
    fn xoshiro_matches_the_reference_vector() {
        let mut rng = SimRng::from_state([1, 2, 3, 4]);
        let got: Vec<u64> = (0..10).map(|_| rng.next_u64()).collect();
        assert_eq!(
            got,
            [
                11_520,
                0,
                1_509_978_240,
                1_215_971_899_390_074_240,
                1_216_172_134_540_287_360,
                607_988_272_756_665_600,
                16_172_922_978_634_559_625,
                8_476_171_486_693_032_832,
                10_595_114_339_597_558_777,
                2_904_607_092_377_533_576,
            ]
        );
    }

    #[test]
    fn streams_are_seeded_from_consecutive_split_mix_outputs() {
        let mut seeder = SplitMix64::new(42);
        let words: Vec<u64> = (0..8).map(|_| seeder.next_u64()).collect();
        assert_eq!(
            SimRng::for_stream(42, 0),
            SimRng::from_state([words[0], words[1], words[2], words[3]])
        );
        assert_eq!(
            SimRng::for_stream(42, 1),
            SimRng::from_state([words[4], words[5], words[6], words[7]])
        );
        // Pinned so a change of the derivation is noticed.
        let mut rng = SimRng::for_stream(42, 0);
        assert_eq!(
            [rng.next_u64(), rng.next_u64(), rng.next_u64()],
            [
                1_546_998_764_402_558_742,
                6_990_951_692_964_543_102,
                12_544_586_762_248_559_009
            ]
        );
    }

    #[test]
    fn chance_respects_the_extremes_and_draws_nothing_at_zero() {
        let mut rng = SimRng::for_stream(7, 3);
        let before = rng.clone();
        assert!((0..1000).all(|_| !rng.chance(0.0)));
        assert_eq!(rng, before);
        assert!((0..1000).all(|_| rng.chance(1.0)));
        let hits = (0..10_000).filter(|_| rng.chance(0.25)).count();
        assert!(
            (2_000..3_000).contains(&hits),
            "{hits} hits of 10000 at p = 0.25"
        );
    }

    #[test]
    fn ranges_stay_inside_and_cover_their_ends() {
        let mut rng = SimRng::for_stream(9, 0);
        let mut seen = [false; 4];
        for _ in 0..1000 {
            let value = rng.in_range(3, 6);
            assert!((3..=6).contains(&value));
            seen[(value - 3) as usize] = true;
        }
        assert_eq!(seen, [true; 4]);
        let before = rng.clone();
        assert_eq!(rng.in_range(5, 5), 5);
        assert_eq!(rng, before);
        let _ = rng.in_range(0, u64::MAX);
    }
}
