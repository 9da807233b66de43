"""Tiny random-weight checkpoints for vLLM, built from `transformers` configs with a fixed seed (never committed).

    python ckpt.py OUT_DIR            # writes OUT_DIR/qwen3_next_mtp (and prints its sha256)

`qwen3_next_mtp`: Qwen3-Next (gated-delta-net and gated-attention layers, alternating like the project's text-hybrid;
MoE MLPs, as vLLM's Qwen3-Next requires) with one MTP module, float32. The tokenizer is a byte tokenizer built here with
`tokenizers`: id b is byte b (the project's text-hybrid ids), 256 is padding, 257 end of text.
"""
import hashlib, json, sys
from pathlib import Path

SEED = 0
QWEN3_NEXT = dict(  # transformers.Qwen3NextConfig arguments
    vocab_size=258, hidden_size=128, intermediate_size=256, num_hidden_layers=4,
    layer_types=['linear_attention', 'full_attention', 'linear_attention', 'full_attention'],
    num_attention_heads=4, num_key_value_heads=2, head_dim=32,
    linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32,
    linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
    shared_expert_intermediate_size=64, decoder_sparse_step=1, max_position_embeddings=8192,
    tie_word_embeddings=False, pad_token_id=256, eos_token_id=257, bos_token_id=None)

def bytes_to_unicode()->dict:
    "GPT-2's byte -> printable character map (what a byte-level BPE's vocabulary is written in)."
    bs = list(range(ord('!'), ord('~') + 1)) + list(range(ord('¡'), ord('¬') + 1)) + list(range(ord('®'), ord('ÿ') + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs: bs.append(b); cs.append(256 + n); n += 1
    return dict(zip(bs, map(chr, cs)))

def write_tokenizer(out:Path):
    "A byte-level tokenizer with no merges: token id == byte value; 256 pad, 257 end of text."
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, AddedToken
    vocab = {c: b for b, c in bytes_to_unicode().items()}
    vocab.update({'<|pad|>': 256, '<|endoftext|>': 257})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken('<|pad|>', special=True), AddedToken('<|endoftext|>', special=True)])
    tok.save(str(out / 'tokenizer.json'))
    (out / 'tokenizer_config.json').write_text(json.dumps(dict(
        tokenizer_class='PreTrainedTokenizerFast', eos_token='<|endoftext|>', pad_token='<|pad|>',
        model_max_length=8192, clean_up_tokenization_spaces=False), indent=1))
    assert tok.encode('ab\n').ids == [97, 98, 10], tok.encode('ab\n').ids

def mtp_tensors(state:dict, cfg, gen)->dict:
    "One MTP module (`mtp.*`, the names vLLM's Qwen3NextMTP loads): a full-attention decoder layer shaped like the model's first."
    import torch
    first_full = cfg.layer_types.index('full_attention')
    src = f'model.layers.{first_full}.'
    h = cfg.hidden_size
    def rand(shape, name):  # Qwen3-Next norms are zero-centred (1 + w): zeros is the identity
        return torch.zeros(shape) if name.endswith('norm.weight') else torch.randn(shape, generator=gen) * cfg.initializer_range
    out = {f'mtp.layers.0.{k[len(src):]}': rand(tuple(v.shape), k) for k, v in state.items() if k.startswith(src)}
    out['mtp.fc.weight'] = rand((h, 2 * h), 'mtp.fc.weight')
    for n in ('pre_fc_norm_hidden', 'pre_fc_norm_embedding', 'norm'): out[f'mtp.{n}.weight'] = torch.zeros(h)
    return out

def build_qwen3_next_mtp(out:Path)->str:
    "Write the checkpoint folder; return the sha256 of its weights."
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(SEED)
    cfg = Qwen3NextConfig(**QWEN3_NEXT)
    model = Qwen3NextForCausalLM(cfg).to(torch.float32)
    model.save_pretrained(out, safe_serialization=True)  # per-expert tensor names, as released checkpoints
    state = load_file(str(out / 'model.safetensors'))
    state.update(mtp_tensors(state, cfg, torch.Generator().manual_seed(SEED + 1)))
    state = {k: v.contiguous().to(torch.float32) for k, v in sorted(state.items())}
    save_file(state, str(out / 'model.safetensors'), metadata={'format': 'pt'})
    c = json.loads((out / 'config.json').read_text())
    c.update(num_nextn_predict_layers=1, architectures=['Qwen3NextForCausalLM'], torch_dtype='float32', dtype='float32')
    (out / 'config.json').write_text(json.dumps(c, indent=1))
    write_tokenizer(out)
    return hashlib.sha256((out / 'model.safetensors').read_bytes()).hexdigest()

if __name__ == '__main__':
    root = Path(sys.argv[1] if len(sys.argv) > 1 else 'ckpt')
    print(json.dumps({'qwen3_next_mtp': dict(path=str(root / 'qwen3_next_mtp'), sha256=build_qwen3_next_mtp(root / 'qwen3_next_mtp'),
                                             seed=SEED, config=QWEN3_NEXT)}))
