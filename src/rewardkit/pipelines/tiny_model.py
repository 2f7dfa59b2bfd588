"""A tiny, randomly initialised Qwen3 model for offline ms-swift smoke tests.

`swift rlhf --rlhf_type grpo` needs a real causal LM plus a tokenizer whose
special tokens match ms-swift's `qwen3` template. Downloading Qwen3-0.6B is not
an option offline and is far too slow on CPU, so we train a byte-level BPE
tokenizer on the caller's corpus and pair it with a ~100k-parameter Qwen3.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # heavy imports stay lazy: importing rewardkit must be cheap.
    from transformers import PreTrainedTokenizerFast

# Qwen2/3 pre-tokeniser regex: CJK runs stay whole (\p{L}+), digits split one by one.
_QWEN_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Control tokens ms-swift's chatml/qwen3 template emits; special=True so that
# skip_special_tokens strips them from decoded completions.
_SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# As in real Qwen3, <think> tags are added but *not* special: they must survive
# decoding, otherwise format rewards never see them.
_THINK = ("<think>", "</think>")

# Reduced Qwen3 chat template (no tools); honours enable_thinking=False the same
# way Qwen3 does, by pre-filling an empty think block.
_CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{{- message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}"
)


def offline_env() -> dict[str, str]:
    """Environment for `swift` subprocesses that must never touch the network."""
    return {
        # huggingface_hub: no HTTP at all; local paths and cache only.
        "HF_HUB_OFFLINE": "1",
        # transformers: from_pretrained skips hub metadata/update checks.
        "TRANSFORMERS_OFFLINE": "1",
        # datasets: local jsonl loads without probing the hub for scripts.
        "HF_DATASETS_OFFLINE": "1",
        # huggingface_hub / transformers usage telemetry pings.
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "DISABLE_TELEMETRY": "1",
        # Should anything still reach for the hub, give up after 1s, not 10s.
        "HF_HUB_ETAG_TIMEOUT": "1",
        "HF_HUB_DOWNLOAD_TIMEOUT": "1",
        # ms-swift: resolve hub ids via huggingface_hub (honours HF_HUB_OFFLINE)
        # rather than modelscope, which has no offline switch.
        "USE_HF": "1",
        # modelscope has no offline switch; make any stray call (e.g. the
        # `check_model` freshness probe, also off via --check_model false)
        # fail fast. modelscope_hub names, then legacy modelscope.hub names.
        "MODELSCOPE_API_MAX_RETRIES": "1",  # 0 is rejected (falls back to 5).
        "MODELSCOPE_API_TIMEOUT": "1",
        "MODELSCOPE_API_CONNECT_TIMEOUT": "1",
        "MODELSCOPE_REPO_TREE_PAGE_MAX_ATTEMPTS": "1",  # else 1+2+4s of backoff.
        "API_HTTP_CLIENT_MAX_RETRIES": "0",
        "MODELSCOPE_API_HTTP_CLIENT_TIMEOUT": "1",
        "MODELSCOPE_API_HTTP_CLIENT_CONNECT_TIMEOUT": "1",
        # tokenizers: no fork-after-parallelism warnings/deadlocks in dataloaders.
        "TOKENIZERS_PARALLELISM": "false",
        # Trackers that phone home when installed (`--report_to none` also helps).
        "WANDB_DISABLED": "true",
        "WANDB_MODE": "offline",
        "SWANLAB_MODE": "disabled",
    }


def _train_tokenizer(corpus: Iterable[str], vocab_size: int, max_length: int = 2048) -> PreTrainedTokenizerFast:
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
    from tokenizers import pre_tokenizers as pre
    from tokenizers.trainers import BpeTrainer
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre.Sequence(
        [
            pre.Split(Regex(_QWEN_SPLIT), behavior="isolated"),
            pre.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    n_added = len(_SPECIAL) + len(_THINK)
    # The full 256-byte alphabet means any text (unseen CJK included) encodes.
    trainer = BpeTrainer(
        vocab_size=vocab_size - n_added,
        initial_alphabet=pre.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus), trainer=trainer)
    # Added after training so they get the last ids, as in Qwen's vocab.
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in _SPECIAL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in _THINK])
    # Mirrors Qwen3: eos is <|im_end|>, pad is <|endoftext|>, no bos.
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=_CHAT_TEMPLATE,
        model_max_length=max_length,
        clean_up_tokenization_spaces=False,
    )


def build_tiny_model(
    out_dir: str | Path,
    corpus: Iterable[str],
    *,
    vocab_size: int = 2048,
    hidden_size: int = 64,
    num_layers: int = 2,
    max_positions: int = 2048,
    seed: int = 0,
) -> Path:
    """Train a tokenizer on `corpus` and save a random Qwen3ForCausalLM to `out_dir`.

    The vocabulary may come out smaller than `vocab_size` on a small corpus; the
    model is sized to the tokenizer actually trained. Same corpus + seed gives
    byte-identical weights.
    """
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    corpus = list(corpus)
    if not any(isinstance(t, str) and t.strip() for t in corpus):  # else: a bytes-only, 261-token vocabulary
        raise ValueError("empty tokenizer corpus: build_tiny_model needs some text to train the tokenizer on")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _train_tokenizer(corpus, vocab_size, max_positions)
    eos, pad = tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])

    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden_size // 4,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        eos_token_id=eos,
        pad_token_id=pad,
        dtype="float32",  # ms-swift picks its default dtype from here; CPU needs fp32.
    )
    config.architectures = ["Qwen3ForCausalLM"]
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=[eos, pad],  # stop on either, like Qwen3's generation_config.
        pad_token_id=pad,
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    # Qwen3ForCausalLM maps to qwen3, qwen3_emb and qwen3_reranker (and qwen3 to
    # six templates), so ms-swift cannot infer either from config.json. It does
    # read both from an args.json beside the weights, as for its own checkpoints
    # (model_type only if swift_version >= 4), so plain `--model out_dir` works;
    # explicit --model_type/--template still override. Its inference engine also reads use_chat_template there, and
    # left out it falls back to the bare generation template: no chat turns, no empty think block.
    args = {"model_type": "qwen3", "template": "qwen3", "swift_version": "4.4.2", "use_chat_template": True}
    (out / "args.json").write_text(json.dumps(args) + "\n")
    return out


def teach(
    model_dir: str | Path, examples: Iterable[tuple[list[int], list[int]]], *, steps: int = 600, lr: float = 2e-3
) -> Path:
    """Fit the tiny model on encoded (input_ids, labels) examples: a cold start in seconds, saved in place.

    A random model almost never samples ``<|im_end|>``, so its rollouts end only at
    the length limit. A few hundred steps on short conversations, encoded by the same
    template that renders rollout prompts (labels -100 outside the replies), give a
    model whose turns end by themselves and can write a given tool call, which
    multi-turn tests need. Deterministic for the same inputs.
    """
    import torch
    from transformers import AutoModelForCausalLM

    out = Path(model_dir)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    batch = [(torch.tensor(ids)[None], torch.tensor(labels)[None]) for ids, labels in examples]
    torch.manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for step in range(steps):
        ids, labels = batch[step % len(batch)]
        model(input_ids=ids, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.save_pretrained(out)
    return out
