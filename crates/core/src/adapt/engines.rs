//! Each engine's table of metric names, by engine.

use super::table::EngineTable;
use super::{dynamo, llamacpp, nim, sglang, tgi, trtllm, vllm};
use crate::canonical::Engine;

pub(crate) fn engine_table(engine: Engine) -> &'static EngineTable {
    match engine {
        Engine::Vllm => &vllm::TABLE,
        Engine::Sglang => &sglang::TABLE,
        Engine::Tgi => &tgi::TABLE,
        Engine::Trtllm => &trtllm::TABLE,
        Engine::Nim => &nim::TABLE,
        Engine::Dynamo => &dynamo::TABLE,
        Engine::Llamacpp => &llamacpp::TABLE,
    }
}
