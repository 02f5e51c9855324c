// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The ring all-reduce byte plan: chunk sizes and each worker's per-step bytes.

/// Chunk sizes of a gradient of `g` bytes split over `w` workers (they differ by at most 1 byte).
pub fn chunks(g: u64, w: usize) -> Vec<u64> {
    let w64 = w as u64;
    (0..w64).map(|c| g / w64 + u64::from(c < g % w64)).collect()
}

/// Bytes worker `i` of a `w`-worker ring sends in each of its 2(w−1) steps: reduce-scatter step s
/// sends chunk (i − s) mod w, all-gather step s sends chunk (i + 1 − s) mod w.
pub fn ring_steps(g: u64, w: usize, i: usize) -> Vec<u64> {
    let c = chunks(g, w);
    let mut v = Vec::with_capacity(2 * (w - 1));
    for s in 0..w - 1 {
        v.push(c[(i + w - s) % w]);
    }
    for s in 0..w - 1 {
        v.push(c[(i + 1 + w - s) % w]);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_plan_sums_to_2w_minus_1_gradients() {
        for (g, w) in [
            (1000u64, 2usize),
            (1001, 3),
            (12345, 4),
            (7, 7),
            (1 << 20, 8),
        ] {
            let per: Vec<u64> = (0..w).map(|i| ring_steps(g, w, i).iter().sum()).collect();
            assert_eq!(
                per.iter().sum::<u64>(),
                2 * (w as u64 - 1) * g,
                "g={g} w={w}"
            );
            let c = chunks(g, w);
            for (i, p) in per.iter().enumerate() {
                assert_eq!(ring_steps(g, w, i).len(), 2 * (w - 1));
                // Every chunk but (i+1) in reduce-scatter, every chunk but (i+2) in all-gather.
                assert_eq!(*p, 2 * g - c[(i + 1) % w] - c[(i + 2) % w]);
            }
        }
    }
}
