//! The process-wide random generator behind `Tensor::rand`/`randn` and parameter
//! initialisation: xoshiro256** seeded through splitmix64, so a seed gives the same numbers on
//! every machine (PyTorch's `torch.manual_seed`).

use std::sync::Mutex;

pub(crate) struct Rng {
    s: [u64; 4],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    pub fn seeded(seed: u64) -> Rng {
        let mut st = seed;
        Rng {
            s: [
                splitmix64(&mut st),
                splitmix64(&mut st),
                splitmix64(&mut st),
                splitmix64(&mut st),
            ],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal values by the Box-Muller transform, two at a time.
    pub fn fill_normal(&mut self, out: &mut [f64]) {
        for pair in out.chunks_mut(2) {
            // 1 - u is in (0, 1], so the logarithm is finite.
            let u1 = 1.0 - self.uniform();
            let u2 = self.uniform();
            let r = (-2.0 * u1.ln()).sqrt();
            let (s, c) = (std::f64::consts::TAU * u2).sin_cos();
            pair[0] = r * c;
            if pair.len() > 1 {
                pair[1] = r * s;
            }
        }
    }
}

static GLOBAL: Mutex<Option<Rng>> = Mutex::new(None);

/// Runs `f` with the global generator, seeding it from the clock on first use.
pub(crate) fn with_global<R>(f: impl FnOnce(&mut Rng) -> R) -> R {
    let mut g = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
    let rng = g.get_or_insert_with(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x5EED);
        Rng::seeded(t ^ u64::from(std::process::id()))
    });
    f(rng)
}

/// Reseeds the global generator.
pub(crate) fn manual_seed(seed: u64) {
    let mut g = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
    *g = Some(Rng::seeded(seed));
}
