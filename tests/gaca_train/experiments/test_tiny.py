"""gaca_train.experiments.tiny's tokenizers: the byte-level BPE one decodes every text back exactly."""

from __future__ import annotations

import json

import pytest
import torch

from gaca_train.experiments.tiny import CHAT_TEMPLATE, build_bpe_tokenizer, build_tokenizer, torch_threads

CORPUS = ["You arrive at countertop 1. On the countertop 1, you see a apple 2.\n\nAdmissible actions:\n- look"]


def test_bpe_tokenizer_round_trips_chat_text_tool_calls_and_unknown_words():
    tokenizer = build_bpe_tokenizer(CORPUS, vocab_size=400)
    call = json.dumps({"name": "act", "arguments": {"action": "take apple 2 from countertop 1"}})
    messages = [
        {"role": "system", "content": "  two spaces, a tab\tand trailing newline\n"},
        {"role": "user", "content": CORPUS[0] + "\n- go to fridge 1 (Ünïcode, 世界, émoji 🍎)"},
        {"role": "assistant", "content": f"<tool_call>\n{call}\n</tool_call>"},
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|im_end|>\n<|im_start|>assistant\n")
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids) == text
    assert ids.count(tokenizer.convert_tokens_to_ids("<|im_start|>")) == 4  # one token per turn start
    assert tokenizer.chat_template == CHAT_TEMPLATE
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<pad>" and tokenizer.padding_side == "left"
    # The corpus's words become tokens: its text takes far fewer tokens than its bytes.
    assert len(tokenizer.encode(CORPUS[0], add_special_tokens=False)) < len(CORPUS[0].encode()) / 2


def test_word_level_tokenizer_does_not_round_trip():
    # Why the BPE builder exists: the word-level one joins words with spaces and drops newlines.
    tokenizer = build_tokenizer(CORPUS)
    text = "<|im_start|>assistant\nlook<|im_end|>"
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) != text


def test_torch_threads_gives_the_process_its_count_back_even_when_the_block_raises():
    start = torch.get_num_threads()
    other = 1 if start != 1 else 2
    with torch_threads(other):
        assert torch.get_num_threads() == other
    assert torch.get_num_threads() == start
    with pytest.raises(RuntimeError, match="inside"), torch_threads(other):
        raise RuntimeError("inside")
    assert torch.get_num_threads() == start
