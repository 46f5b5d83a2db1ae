"""Writes a small llama-architecture GGUF with seeded random weights for tests/it/llamacpp_real.rs.

usage: make_gguf.py VOCAB_GGUF OUT

VOCAB_GGUF is llama.cpp's models/ggml-vocab-llama-spm.gguf (a vocabulary without weights); its
tokenizer is copied, so that llama-server tokenizes and detokenizes real text. The weights are
random (numpy seed 33): the model writes nonsense, which is all a test of the request path
and of /metrics needs. Its size sets the time scale: 8 layers of width 128 (F16, about 20 MB)
decode a token in two or three milliseconds on one CPU core, and prefill a prompt of a few
hundred tokens in a hundred or more, so that latencies spread well beyond the one to two
milliseconds the client sees beyond the tap (a debug build, loopback, the SDK's parsing): few
requests lie that close to an SLO limit inside the distribution.
"""

import sys

import numpy as np
from gguf import GGUFReader, GGUFWriter, TokenType

N_LAYER, N_EMBD, N_HEAD, N_FF, N_CTX = 8, 128, 8, 1024, 4096


def field(reader, key):
    f = reader.fields[key]
    return [f.parts[i] for i in f.data]


def text(part):
    return bytes(part).decode("utf-8")


def main(vocab_path, out_path):
    vocab = GGUFReader(vocab_path)
    tokens = [text(p) for p in field(vocab, "tokenizer.ggml.tokens")]
    scores = [float(p[0]) for p in field(vocab, "tokenizer.ggml.scores")]
    types = [int(p[0]) for p in field(vocab, "tokenizer.ggml.token_type")]
    scalar = lambda key: int(field(vocab, key)[0][0])
    n_vocab = len(tokens)

    w = GGUFWriter(out_path, "llama")
    w.add_name("goodput-test-random")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(1)  # F16 matrices, F32 norms
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types([TokenType(t) for t in types])
    w.add_bos_token_id(scalar("tokenizer.ggml.bos_token_id"))
    w.add_eos_token_id(scalar("tokenizer.ggml.eos_token_id"))
    w.add_unk_token_id(scalar("tokenizer.ggml.unknown_token_id"))
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    rng = np.random.default_rng(33)
    # numpy shapes are ggml's dimensions reversed: (rows = outputs, columns = inputs).
    weight = lambda *shape: (rng.standard_normal(shape) * 0.02).astype(np.float16)
    ones = lambda n: np.ones(n, dtype=np.float32)
    w.add_tensor("token_embd.weight", weight(n_vocab, N_EMBD))
    for i in range(N_LAYER):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", ones(N_EMBD))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(b + name + ".weight", weight(N_EMBD, N_EMBD))
        w.add_tensor(b + "ffn_norm.weight", ones(N_EMBD))
        w.add_tensor(b + "ffn_gate.weight", weight(N_FF, N_EMBD))
        w.add_tensor(b + "ffn_up.weight", weight(N_FF, N_EMBD))
        w.add_tensor(b + "ffn_down.weight", weight(N_EMBD, N_FF))
    w.add_tensor("output_norm.weight", ones(N_EMBD))
    w.add_tensor("output.weight", weight(n_vocab, N_EMBD))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
