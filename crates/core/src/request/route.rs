//! Which requests the tap measures: the generation routes of the engines' HTTP APIs
//! (docs/request-path.md, "What is measured"). Everything else passes through unmeasured.

/// A measured generation route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// OpenAI `POST /v1/chat/completions` (every engine).
    ChatCompletions,
    /// OpenAI `POST /v1/completions` (every engine).
    Completions,
    /// TGI's `POST /generate_stream`: one event per token, no `[DONE]`.
    GenerateStream,
    /// `POST /generate`: SGLang's native route (streaming with `"stream": true`, ending in
    /// `[DONE]`), and TGI's non-streaming one.
    Generate,
    /// llama.cpp's native `POST /completion` (and its alias `/completions`): streaming with
    /// `"stream": true`, the last event `"stop": true` (no `[DONE]`), with the engine's
    /// `timings`.
    LlamaCompletion,
}

impl Route {
    /// The route of a request, from its method and path (a query string is ignored, as is
    /// one trailing slash); `None` for anything the tap does not measure.
    pub fn classify(method: &str, path: &str) -> Option<Route> {
        if method != "POST" {
            return None;
        }
        let path = path.split_once('?').map_or(path, |(p, _)| p);
        let path = path.strip_suffix('/').filter(|p| !p.is_empty()).unwrap_or(path);
        match path {
            // llama.cpp serves its OpenAI chat route without the version too.
            "/v1/chat/completions" | "/chat/completions" => Some(Route::ChatCompletions),
            "/v1/completions" => Some(Route::Completions),
            "/completion" | "/completions" => Some(Route::LlamaCompletion),
            "/generate_stream" => Some(Route::GenerateStream),
            "/generate" => Some(Route::Generate),
            _ => None,
        }
    }

    /// The OpenAI-compatible routes, where `stream_options.include_usage` means something.
    pub fn is_openai(self) -> bool {
        matches!(self, Route::ChatCompletions | Route::Completions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_routes_only_and_only_post() {
        assert_eq!(Route::classify("POST", "/v1/chat/completions"), Some(Route::ChatCompletions));
        assert_eq!(Route::classify("POST", "/v1/completions/?x=1"), Some(Route::Completions));
        assert_eq!(Route::classify("POST", "/generate_stream"), Some(Route::GenerateStream));
        assert_eq!(Route::classify("POST", "/generate"), Some(Route::Generate));
        assert_eq!(Route::classify("POST", "/chat/completions"), Some(Route::ChatCompletions));
        assert_eq!(Route::classify("POST", "/completion"), Some(Route::LlamaCompletion));
        assert_eq!(Route::classify("POST", "/completions/"), Some(Route::LlamaCompletion));
        assert_eq!(Route::classify("POST", "/chat/completion"), None);
        assert_eq!(Route::classify("GET", "/v1/chat/completions"), None);
        assert_eq!(Route::classify("POST", "/v1/embeddings"), None);
        assert_eq!(Route::classify("POST", "/v1/chat/completions/x"), None);
        assert_eq!(Route::classify("POST", "/"), None);
        assert!(Route::ChatCompletions.is_openai() && !Route::Generate.is_openai());
    }
}
