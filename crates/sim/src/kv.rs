//! The finite pool of KV-cache blocks one engine allocates from.
//!
//! Like vLLM's `BlockPool`, one block is reserved as the null block, so usage is
//! `used / (num_gpu_blocks - 1)`: the value `vllm:kv_cache_usage_perc` reports.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockPool {
    usable: u32,
    used: u32,
}

impl BlockPool {
    /// `num_gpu_blocks >= 2` (checked by `SimConfig::validate`).
    pub fn new(num_gpu_blocks: u32) -> BlockPool {
        BlockPool { usable: num_gpu_blocks.saturating_sub(1).max(1), used: 0 }
    }

    pub fn free(&self) -> u32 {
        self.usable - self.used
    }

    pub fn used(&self) -> u32 {
        self.used
    }

    /// Takes `n` blocks, or none at all when fewer are free.
    pub fn allocate(&mut self, n: u32) -> bool {
        if n > self.free() {
            return false;
        }
        self.used += n;
        true
    }

    pub fn release(&mut self, n: u32) {
        self.used = self.used.saturating_sub(n);
    }

    pub fn usage(&self) -> f64 {
        f64::from(self.used) / f64::from(self.usable)
    }
}

/// Blocks needed to hold `tokens` tokens.
pub fn blocks_for(tokens: u32, block_size: u32) -> u32 {
    tokens.div_ceil(block_size)
}
