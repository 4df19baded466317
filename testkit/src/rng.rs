//! The seeded generator of the tests: victims, moments and naps drawn repeatably.

use std::time::Duration;

/// A small LCG (Knuth's MMIX constants): enough to pick victims and moments repeatably.
pub struct Lcg(u64);

impl Lcg {
    pub fn new(seed: u64) -> Lcg {
        Lcg(seed)
    }

    /// The generator of one test: the seed of `SHOAL_FAULT_SEED` (or of the clock) mixed
    /// with the test's name, so tests draw differently but each is repeatable from the
    /// seed it prints.
    pub fn for_test(test: &str) -> Lcg {
        let seed = std::env::var("SHOAL_FAULT_SEED")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        eprintln!("[{test}] SHOAL_FAULT_SEED={seed}");
        // FNV-1a of the name.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in test.bytes() {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        let mut lcg = Lcg(seed ^ h);
        lcg.next_u64();
        lcg
    }

    /// The next draw (31 bits).
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    /// 0 to n - 1.
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0);
        (self.next_u64() % n as u64) as usize
    }

    /// `lo` to `hi` milliseconds.
    pub fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next_u64() % (hi - lo + 1))
    }

    /// `lo` to `hi` tenths of a second, as seconds in text (`1.5`), e.g. for `sleep`.
    pub fn tenths(&mut self, lo: usize, hi: usize) -> String {
        let tenths = lo + self.below(hi - lo + 1);
        format!("{}.{}", tenths / 10, tenths % 10)
    }
}
