"""A tiny causal LM and word-level tokenizer built locally, for tests, CPU runs and benchmarks.

Nothing is downloaded: the tokenizer's vocabulary comes from text the caller passes (for
example prompts rendered from an env), and the model is a randomly initialised LLaMA-architecture
decoder of a few ten thousand parameters. ``save_tiny_model`` writes both in the Hugging Face layout, so every
script loads them by path like any hub model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
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


def _ranked_vocab(counts: dict[str, int], first: tuple[str, ...], max_vocab: int | None) -> dict[str, int]:
    """Token ids: ``first``, then the ``max_vocab`` most frequent words of ``counts`` (ties by spelling), sorted."""
    words = sorted(counts, key=lambda w: (-counts[w], w))[:max_vocab]
    return {tok: i for i, tok in enumerate((*first, *sorted(words)))}


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
    vocab = _ranked_vocab(counts, (*SPECIAL_TOKENS, *TAG_TOKENS), max_vocab)
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex(_WORD), behavior="isolated")]
    )
    tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=True)  # joins words with spaces
    return _chat_tokenizer(tokenizer)


# The spaced tokenizer's words: a word, a tag or one other character, with the space after it attached.
_SPACED_WORD = r"(?:</?(?:think|action)>|[a-z0-9]+|[^\sa-z0-9]) ?| "


def build_spaced_tokenizer(corpus: Iterable[str], *, max_vocab: int | None = None) -> PreTrainedTokenizerFast:
    """A lowercase word-level tokenizer that keeps the spaces: decoding gives the text back, lowercased.

    :func:`build_tokenizer` joins every word with a space on decoding, so ``search[red shoes]`` comes
    back as ``search [ red shoes ]``, which WebShop rejects. Here a word carries the space after it
    (``red `` then ``shoes``), so a decoded action is the text the model meant, and a prompt that ends
    in a line break tokenizes the same alone as followed by its response. Text is lowercased first
    (a title's ``Shoes`` and an instruction's ``shoes`` are one word), and each run of whitespace,
    newlines included, becomes one space.

    Args:
        corpus: texts to take the vocabulary from (e.g. rendered prompts, responses and page words).
        max_vocab: keep at most this many words (most frequent first), besides the special tokens.

    Returns:
        A fast tokenizer with a ChatML chat template, ``<|im_end|>`` as EOS and ``<pad>`` as pad.
    """
    reader = pre_tokenizers.Split(Regex(_SPACED_WORD), behavior="isolated")
    counts: dict[str, int] = {}
    for text in corpus:
        for word, _ in reader.pre_tokenize_str(re.sub(r"\s+", " ", text).lower()):
            counts[word] = counts.get(word, 0) + 1
    for tag in SPECIAL_TOKENS:
        counts.pop(tag, None)
    for word in ("system ", "user ", "assistant ", " "):  # the chat template's roles and line breaks
        counts.setdefault(word, 1)
    vocab = _ranked_vocab(counts, SPECIAL_TOKENS, max_vocab)
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.normalizer = normalizers.Sequence([normalizers.Replace(Regex(r"\s+"), " "), normalizers.Lowercase()])
    tokenizer.pre_tokenizer = reader
    tokenizer.decoder = decoders.Fuse()  # the words already hold their spaces
    return _chat_tokenizer(tokenizer, clean_up_tokenization_spaces=False)


def build_bpe_tokenizer(corpus: Iterable[str], *, vocab_size: int = 1024) -> PreTrainedTokenizerFast:
    """Builds a byte-level BPE tokenizer trained on ``corpus`` that decodes every text back exactly.

    Unlike :func:`build_tokenizer` (whole words joined by spaces on decoding, newlines dropped), it
    spells any text, spaces, newlines and JSON included, and ``decode(encode(text)) == text``: a chat
    template's ``<|im_start|>assistant\n`` comes back as written. A response parser that looks for
    that turn start in decoded text (TRL's tool-calling loop does) then reads the tiny model's
    turns as it reads a real model's. The price is longer sequences: words outside the corpus are
    spelled in bytes.

    Args:
        corpus: texts to learn the merges from (e.g. rendered prompts and env answers).
        vocab_size: most tokens, the 256 byte tokens and the special tokens included.

    Returns:
        A fast tokenizer with :data:`SPECIAL_TOKENS` (``<|im_end|>`` as EOS, ``<pad>`` as pad), the
        ChatML template, left padding and no clean-up of spaces on decoding.
    """
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer)
    return _chat_tokenizer(tokenizer, clean_up_tokenization_spaces=False)


def _chat_tokenizer(tokenizer: Tokenizer, **kwargs: object) -> PreTrainedTokenizerFast:
    """``tokenizer`` wrapped for transformers: the special tokens, left padding and the ChatML template."""
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="<unk>",
        pad_token="<pad>",
        eos_token="<|im_end|>",
        bos_token=None,
        padding_side="left",
        additional_special_tokens=["<|im_start|>"],
        **kwargs,
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


@contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """Runs the block at ``threads`` torch CPU threads and gives the process its own count back after.

    A CPU run's trajectory depends on the thread count (kernels split their sums by thread), so a
    benchmark or test that pins one must not leave the rest of the process at it.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


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


def as_qwen2(model: LlamaForCausalLM) -> torch.nn.Module:
    """The same network as a Qwen2-architecture model (Qwen2.5's layout): its weights, zero q/k/v biases.

    Qwen2 is LLaMA with biases on the query, key and value projections; with those at zero it computes
    the same function, so a warm-started tiny model can stand in for a tiny Qwen2.5.
    """
    from transformers import Qwen2Config, Qwen2ForCausalLM

    c = model.config
    config = Qwen2Config(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
        num_hidden_layers=c.num_hidden_layers, num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads, max_position_embeddings=c.max_position_embeddings,
        tie_word_embeddings=c.tie_word_embeddings, eos_token_id=c.eos_token_id, pad_token_id=c.pad_token_id,
        bos_token_id=c.bos_token_id,
    )  # fmt: skip
    qwen2 = Qwen2ForCausalLM(config)
    missing, unexpected = qwen2.load_state_dict(model.state_dict(), strict=False)
    if unexpected or not all(name.endswith(("q_proj.bias", "k_proj.bias", "v_proj.bias")) for name in missing):
        raise ValueError(f"not a LLaMA layout: unexpected {unexpected}, missing {missing}")
    with torch.no_grad():
        for name in missing:
            qwen2.get_parameter(name).zero_()
    qwen2.generation_config.eos_token_id = model.generation_config.eos_token_id
    qwen2.generation_config.pad_token_id = model.generation_config.pad_token_id
    qwen2.generation_config.bos_token_id = model.generation_config.bos_token_id
    return qwen2
