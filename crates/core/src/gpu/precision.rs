//! The numeric precision a model computes in, which decides the peak FLOP/s that MFU divides by.

use serde::Deserialize;

/// The precision MFU divides by: BF16/FP16 tensor math (also weight-only int4/int8) or W8A8 FP8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    #[default]
    Bf16,
    Fp8,
}

impl Precision {
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Bf16 => "bf16",
            Precision::Fp8 => "fp8",
        }
    }
}
