//! What an engine step reports: the only channel from the model to the metrics and the
//! ground truth, so that both see exactly the same observations.

/// `finished_reason` label values, in the order vLLM pre-creates them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FinishReason {
    Stop,
    Length,
    Abort,
    Error,
}

impl FinishReason {
    pub const ALL: [FinishReason; 4] =
        [FinishReason::Stop, FinishReason::Length, FinishReason::Abort, FinishReason::Error];

    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Abort => "abort",
            FinishReason::Error => "error",
        }
    }
}

/// A request that left the engine, with its phase times (virtual seconds).
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    pub engine: u32,
    pub id: u64,
    pub arrival: f64,
    pub first_token: Option<f64>,
    pub finish: f64,
    pub prompt: u32,
    pub output: u32,
    pub max_tokens: u32,
    pub prefix_hit: u32,
    pub ttft: Option<f64>,
    /// `decode / (output - 1)`, or 0 with at most one token (as vLLM).
    pub tpot: f64,
    pub e2e: f64,
    /// First scheduled − engine enqueue (re-queueing after preemption not added).
    pub queue: f64,
    /// First token − first scheduled.
    pub prefill: f64,
    /// Last token − first token.
    pub decode: f64,
    pub reason: FinishReason,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A new request was scheduled for the first time: prefix-cache lookup in tokens.
    PrefixQuery {
        engine: u32,
        queried: u32,
        hit: u32,
    },
    /// Prefill completed and the first token came out.
    FirstToken {
        engine: u32,
        ttft: f64,
        prompt: u32,
    },
    /// Request `id` got `n` new tokens in the step that ended at `at`; `itl` is the gap
    /// since its previous token (absent for the first token).
    Tokens {
        engine: u32,
        id: u64,
        at: f64,
        n: u32,
        itl: Option<f64>,
    },
    Spec {
        engine: u32,
        drafts: u32,
        accepted: u32,
    },
    Preempted {
        engine: u32,
        at: f64,
    },
    /// One engine step ended at `at` (vLLM's `iteration_tokens_total` observation).
    Step {
        engine: u32,
        at: f64,
        iteration_tokens: u64,
    },
    /// The API server accepted a request (TGI counts and validates here).
    Arrived {
        engine: u32,
        prompt: u32,
        max_tokens: u32,
        validation: f64,
    },
    Finished(Finished),
}
