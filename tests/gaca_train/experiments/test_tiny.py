"""gaca_train.experiments.tiny's tokenizers: BPE decodes every text back exactly, the spaced one WebShop's actions."""

from __future__ import annotations

import json

import pytest
import torch

from gaca_train.experiments.tiny import (
    CHAT_TEMPLATE,
    build_bpe_tokenizer,
    build_spaced_tokenizer,
    build_tokenizer,
    torch_threads,
)

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


WEBSHOP = [
    "Instruction: [SEP] i'm looking for red running shoes, and price lower than 40.00 dollars [SEP] Search",
    "Back to Search [SEP] Page 1 (Total results: 50) [SEP] B0CNJHB48A [SEP] Velo Running Shoes [SEP] $31.20",
    "<think> </think> <action> search[red running shoes] </action>",
    "<think> </think> <action> click[b0cnjhb48a] </action>",
]


def test_spaced_tokenizer_gives_webshop_actions_back_as_written_and_the_word_level_one_does_not():
    spaced, words = build_spaced_tokenizer(WEBSHOP), build_tokenizer(WEBSHOP)
    for response in WEBSHOP[2:]:
        assert spaced.decode(spaced.encode(response, add_special_tokens=False)) == response
        assert words.decode(words.encode(response, add_special_tokens=False)) != response  # "search [ red ..."
    # Lowercased, spaces kept, each run of whitespace one space; a title's word is the instruction's word.
    assert spaced.decode(spaced.encode("Velo  Running\nShoes", add_special_tokens=False)) == "velo running shoes"
    assert spaced.convert_tokens_to_ids("running ") != spaced.unk_token_id
    assert "Running " not in spaced.get_vocab()


def test_spaced_tokenizer_tokenizes_a_prompt_alone_as_it_does_before_its_response():
    # SFT tokenizes prompt + response as one text, a rollout the prompt, then generates: the two must agree.
    tokenizer = build_spaced_tokenizer(WEBSHOP)
    messages = [{"role": "user", "content": WEBSHOP[0]}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    alone = tokenizer.encode(prompt, add_special_tokens=False)
    response = tokenizer.encode(WEBSHOP[2], add_special_tokens=False)
    assert tokenizer.encode(prompt + WEBSHOP[2], add_special_tokens=False) == alone + response
    assert tokenizer.unk_token_id not in alone + response
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<pad>" and tokenizer.padding_side == "left"
