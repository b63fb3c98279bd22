"""A tiny causal LM and word-level tokenizer built locally, for tests, CPU runs and benchmarks.

Nothing is downloaded: the tokenizer's vocabulary comes from text the caller passes (for
example prompts rendered from an env), and the model is a randomly initialised LLaMA-architecture
decoder of a few ten thousand parameters. ``save_tiny_model`` writes both in the Hugging Face layout, so every
script loads them by path like any hub model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SPECIAL_TOKENS: tuple[str, ...] = ("<pad>", "<unk>", "<|im_start|>", "<|im_end|>")
TAG_TOKENS: tuple[str, ...] = ("<think>", "</think>", "<action>", "</action>")
# ChatML, as Qwen2.5-Instruct uses; the word-level tokenizer drops the newlines, which is harmless.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Words are runs of letters/digits; each other non-space character is its own token; tags stay whole.
_WORD = r"</?(?:think|action)>|<\|im_(?:start|end)\|>|[A-Za-z0-9]+|[^\sA-Za-z0-9]"


def build_tokenizer(corpus: Iterable[str], *, max_vocab: int | None = None) -> PreTrainedTokenizerFast:
    """Builds a word-level tokenizer whose vocabulary is the words of ``corpus``.

    Args:
        corpus: texts to take the vocabulary from (e.g. rendered prompts and expert actions).
        max_vocab: keep at most this many words (most frequent first), besides the special tokens.

    Returns:
        A fast tokenizer with a ChatML chat template, ``<|im_end|>`` as EOS and ``<pad>`` as pad.
    """
    counts: dict[str, int] = {}
    pattern = re.compile(_WORD)
    for text in corpus:
        for word in pattern.findall(text):
            counts[word] = counts.get(word, 0) + 1
    for tag in (*SPECIAL_TOKENS, *TAG_TOKENS):
        counts.pop(tag, None)
    for role in ("system", "user", "assistant"):  # the chat template's role names
        counts.setdefault(role, 1)
    words = sorted(counts, key=lambda w: (-counts[w], w))[:max_vocab]
    vocab = {tok: i for i, tok in enumerate((*SPECIAL_TOKENS, *TAG_TOKENS, *sorted(words)))}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex(_WORD), behavior="isolated")]
    )
    tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=True)  # joins words with spaces
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="<unk>",
        pad_token="<pad>",
        eos_token="<|im_end|>",
        bos_token=None,
        padding_side="left",
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_model(
    tokenizer: PreTrainedTokenizerFast,
    *,
    hidden_size: int = 32,
    num_layers: int = 2,
    num_heads: int = 4,
    seed: int = 0,
) -> LlamaForCausalLM:
    """A randomly initialised LLaMA-architecture causal LM sized for CPU tests.

    Args:
        tokenizer: fixes the vocabulary size and the special token ids.
        hidden_size: model width (a multiple of ``num_heads``).
        num_layers: number of decoder layers.
        num_heads: attention heads (two key/value heads when divisible).
        seed: seeds the initialisation, so the same arguments give the same weights.

    Returns:
        The model, in float32, with its generation config's EOS and pad set from the tokenizer.
    """
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size ({hidden_size}) must be a multiple of num_heads ({num_heads})")
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=2 if num_heads % 2 == 0 else num_heads,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = None
    return model


def cpu_run_defaults() -> dict[str, object]:
    """GACAConfig fields for a short, quiet CPU run of the tiny model (no checkpoints, no trackers)."""
    return {
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "bf16": False,
        "gradient_checkpointing": False,
        "use_cpu": True,
        "disable_tqdm": True,
        "seed": 0,
    }


def save_tiny_model(model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, path: str | Path) -> Path:
    """Writes model and tokenizer to ``path`` so ``from_pretrained(path)`` loads them."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    # Without an explicit class, AutoTokenizer may pick the model type's own tokenizer class and
    # rebuild a different tokenizer from the word-level vocabulary.
    config_file = path / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_file.write_text(json.dumps(config, indent=2))
    return path
