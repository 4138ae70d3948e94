//! How many pods one sync may ask for, and in what batches the controller
//! sends the creations.

/// At most this many pods are created or deleted by one sync (upstream's
/// `BurstReplicas`); the rest wait for the next one.
pub const BURST_REPLICAS: usize = 500;

/// The sizes of the batches in which to send `count` creations: 1, 2, 4, …
/// doubling, the last one what remains (upstream's `slowStartBatch` with an
/// initial batch of 1). The controller sends a batch in parallel and stops
/// at the first batch with a failure, so that a quota or admission refusal
/// costs one request rather than hundreds.
pub fn slow_start_batches(count: usize) -> Vec<usize> {
    let mut batches = Vec::new();
    let mut remaining = count;
    let mut size = 1usize.min(remaining);
    while size > 0 {
        batches.push(size);
        remaining -= size;
        size = size.saturating_mul(2).min(remaining);
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_double_and_end_with_the_rest() {
        assert_eq!(slow_start_batches(0), Vec::<usize>::new());
        assert_eq!(slow_start_batches(1), vec![1]);
        assert_eq!(slow_start_batches(10), vec![1, 2, 4, 3]);
        assert_eq!(slow_start_batches(15), vec![1, 2, 4, 8]);
        assert_eq!(slow_start_batches(500).iter().sum::<usize>(), 500);
    }
}
