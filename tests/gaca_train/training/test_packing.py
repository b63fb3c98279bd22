"""The packed update layout: prefix trees without padding give the padded layout's log-probs and gradients."""

from __future__ import annotations

import random

import pytest
import torch

from gaca_train.experiments.tiny import save_tiny_model
from gaca_train.training import packing
from gaca_train.training.batching import pack_micro_batches
from gaca_train.training.packing import pack_rows, packed_tokens, unpad_rows
from tests.gaca_train.tiny_setup import scripted_trainer_class, tiny_config, tiny_model_and_tokenizer


def _rows(seed: int, n: int = 12, vocab: int = 40) -> list[tuple[list[int], list[int]]]:
    """Rows as a task group makes them: prompts that share prefixes of random lengths, some equal rows."""
    rng = random.Random(seed)
    stems = [[rng.randrange(4, vocab) for _ in range(30)] for _ in range(2)]
    rows = []
    for _ in range(n):
        stem = rng.choice(stems)
        prompt = stem[: rng.randrange(1, 30)] + [rng.randrange(4, vocab) for _ in range(rng.randrange(0, 6))]
        completion = [rng.randrange(4, vocab) for _ in range(rng.randrange(1, 7))]
        rows.append((prompt, completion))
    rows += [rows[0], (rows[1][0], rows[1][1][:1])]  # an equal row; a row whose completion is a prefix of another's
    return rows


def _padded(rows: list[tuple[list[int], list[int]]], pad: int = 0) -> tuple[torch.Tensor, torch.Tensor, int]:
    """TRL's loss inputs: left-padded prompts, right-padded completions, and the completion width."""
    longest_prompt = max(len(p) for p, _ in rows)
    width = max(len(c) for _, c in rows)
    ids = torch.full((len(rows), longest_prompt + width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, (prompt, completion) in enumerate(rows):
        ids[i, longest_prompt - len(prompt) : longest_prompt] = torch.tensor(prompt)
        mask[i, longest_prompt - len(prompt) : longest_prompt] = 1
        ids[i, longest_prompt : longest_prompt + len(completion)] = torch.tensor(completion)
        mask[i, longest_prompt : longest_prompt + len(completion)] = 1
    return ids, mask, width


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    model, tokenizer = tiny_model_and_tokenizer()
    args = tiny_config(tmp_path_factory.mktemp("packing"))
    trainer = scripted_trainer_class()(model=model, args=args, processing_class=tokenizer)
    trainer.model.train()
    return trainer


def _logps_and_grads(trainer, ids, mask, width, packed: bool, model=None):
    model = trainer.model if model is None else model
    trainer._packed = packed
    model.zero_grad()
    logps, entropies, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, width, compute_entropy=True)
    weights = torch.randn(logps.shape, generator=torch.Generator().manual_seed(1))  # any loss of the log-probs
    ((logps * weights).sum() + entropies.sum()).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return logps.detach(), entropies.detach(), grads


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm().clamp(min=1e-30))


def test_the_tree_holds_each_shared_prefix_once_and_every_row_sees_its_own_context():
    rows = _rows(0)
    packed = pack_rows(rows)
    # One sequence: each distinct prompt prefix once, then one position per completion token of each row.
    assert packed.input_ids.shape[0] == 1
    assert packed.tokens == packed_tokens(rows) < sum(len(p) + len(c) for p, c in rows)
    scored = packed.flat.tolist()
    assert len(scored) == len(set(scored)) == sum(len(c) for _, c in rows)
    attend = packed.attend[0, 0]
    tokens, depth = packed.input_ids[0], packed.position_ids[0]
    for i, (prompt, completion) in enumerate(rows):
        for column in range(len(completion)):
            position = int(packed.flat[(packed.row == i) & (packed.column == column)])
            seen = attend[position].nonzero().flatten()
            # The context a scored position attends to is, in depth order, exactly the row's prompt and
            # completion before the scored token; its label is that token.
            context = [*prompt, *completion[:column]]
            assert tokens[seen].tolist() == context and depth[seen].tolist() == list(range(len(context)))
            assert int(packed.shift_labels.flatten()[position]) == completion[column]


def test_sequences_are_cut_at_max_length_and_a_longer_row_runs_alone():
    rows = _rows(1, n=20)
    longest = max(len(p) + len(c) for p, c in rows)
    packed = pack_rows(rows, max_length=longest)
    assert packed.input_ids.shape[1] <= longest and packed.input_ids.shape[0] > 1
    assert packed.computed == packed.input_ids.shape[0] * packed.input_ids.shape[1] >= packed.tokens
    # Each row's scored positions lie in one sequence.
    sequence = packed.flat // packed.input_ids.shape[1]
    for i in range(len(rows)):
        assert sequence[packed.row == i].unique().numel() == 1
    short = pack_rows(rows, max_length=3)  # every row over the limit: one sequence each
    assert short.input_ids.shape[0] == len(rows)


def test_rows_not_in_trls_layout_are_left_to_the_padded_path():
    ids, mask, width = _padded(_rows(2))
    assert unpad_rows(ids, mask, width) == [(p, c) for p, c in _rows(2)]
    holed = mask.clone()
    holed[0, -width] = 0  # a completion mask with a hole after it
    holed[0, -width + 1] = 1
    assert unpad_rows(ids, holed, width) is None


def _assert_equal_passes(a, b, mask, width):
    assert _relative(a[0], b[0]) <= 1e-5 and _relative(a[1], b[1]) <= 1e-5
    assert (a[0] == 0).equal(mask[:, -width:] == 0)  # zero off the scored tokens, as TRL's
    assert a[2].keys() == b[2].keys()
    for name, grad in b[2].items():
        assert _relative(a[2][name], grad) <= 1e-5, name


@pytest.mark.parametrize("seed", [0, 1, 2, 5])
def test_packed_log_probs_entropies_and_gradients_equal_the_padded_layouts(trainer, seed):
    rows = _rows(seed)
    ids, mask, width = _padded(rows)
    padded = _logps_and_grads(trainer, ids, mask, width, packed=False)
    for max_length in (None, 40, 12):  # one sequence; several; rows longer than a sequence, one each
        trainer._pack_length = max_length
        _assert_equal_passes(_logps_and_grads(trainer, ids, mask, width, packed=True), padded, mask, width)
    trainer._pack_length = None
    # The packed pass computed fewer positions than the padded one.
    trainer._computed_tokens = 0
    trainer._packed = True
    trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, width)
    assert trainer._computed_tokens == packed_tokens(rows) < ids.numel()


@pytest.mark.parametrize(("seed", "block"), [(0, 128), (1, 8), (2, 5)])
def test_attention_by_query_blocks_equals_one_sdpa_call(trainer, seed, block, monkeypatch):
    # A 4D mask without row paths (here TRL's padded layout) runs by blocks of queries over the keys they can
    # attend; 128 (the default) is one block for these rows, 8 and 5 make many, the last one ragged.
    monkeypatch.setattr(packing, "QUERY_BLOCK", block)
    ids, mask, width = _padded(_rows(seed))
    plain = _logps_and_grads(trainer, ids, mask, width, packed=False)
    with packing.block_attention(trainer.model):
        _assert_equal_passes(_logps_and_grads(trainer, ids, mask, width, packed=False), plain, mask, width)


def test_packed_gradients_equal_the_padded_layouts_through_a_lora_adapter(tmp_path):
    from peft import LoraConfig

    model, tokenizer = tiny_model_and_tokenizer()
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    args = tiny_config(tmp_path, beta=0.01)  # LoRA's reference is the base model (the adapter off)
    peft_trainer = scripted_trainer_class()(model=model, args=args, processing_class=tokenizer, peft_config=lora)
    torch.manual_seed(0)
    for name, param in peft_trainer.model.named_parameters():
        if "lora_B" in name:  # a trained adapter, not the zero initialisation
            param.data.normal_(0, 0.5)
    peft_trainer.model.train()
    ids, mask, width = _padded(_rows(3))
    padded = _logps_and_grads(peft_trainer, ids, mask, width, packed=False)
    packed = _logps_and_grads(peft_trainer, ids, mask, width, packed=True)
    assert _relative(packed[0], padded[0]) <= 1e-5
    assert padded[2] and all("lora" in name for name in padded[2])
    for name, grad in padded[2].items():
        assert _relative(packed[2][name], grad) <= 1e-5, name
    # The reference pass (the base model: adapter off) goes through the same layout.
    with peft_trainer.model.disable_adapter(), torch.no_grad():
        peft_trainer._packed = True
        base_packed = peft_trainer._get_per_token_logps_and_entropies(peft_trainer.model, ids, mask, width)[0]
        peft_trainer._packed = False
        base_padded = peft_trainer._get_per_token_logps_and_entropies(peft_trainer.model, ids, mask, width)[0]
    assert _relative(base_packed, base_padded) <= 1e-5 and _relative(base_packed, packed[0]) > 1e-3


def test_an_iteration_trains_the_same_weights_in_either_layout(tmp_path):
    from transformers import AutoModelForCausalLM

    start_model, tokenizer = tiny_model_and_tokenizer()
    saved = save_tiny_model(start_model, tokenizer, tmp_path / "tiny")  # beta > 0: TRL loads the reference from it
    start = torch.cat([p.detach().flatten() for p in start_model.parameters()])
    results = {}
    for layout in ("packed", "padded"):
        model = AutoModelForCausalLM.from_pretrained(saved)
        args = tiny_config(
            tmp_path / layout, rollouts_per_task=4, beta=0.01, mini_batch_rows=5, micro_batch_tokens=400,
            optim="sgd", learning_rate=0.5, max_grad_norm=0.0, update_layout=layout,
        )  # fmt: skip
        trainer = scripted_trainer_class()(model=model, args=args, processing_class=tokenizer)
        trainer.train()
        logs = trainer.state.log_history[0]
        results[layout] = (logs, torch.cat([p.detach().flatten() for p in model.parameters()]))
        # Three passes over the rows: reference (beta), old policy (several updates) and the loss.
        steps = trainer.last_rollout.steps
        prompts, completions = sum(len(s.prompt_ids) for s in steps), sum(len(s.completion_ids) for s in steps)
        assert 3 * prompts < logs["train/row_tokens"] <= 3 * (prompts + completions)
    (packed_logs, packed), (padded_logs, padded) = results["packed"], results["padded"]
    assert packed_logs["train/updates"] == padded_logs["train/updates"] > 1
    assert packed_logs["loss"] == pytest.approx(padded_logs["loss"], abs=2e-4)
    # The two runs moved the weights by the same steps.
    assert _relative(packed - start, padded - start) <= 1e-4 and (padded - start).abs().max() > 1e-3
    # The packed run computed fewer positions for the same row tokens.
    assert packed_logs["train/row_tokens"] == padded_logs["train/row_tokens"]
    assert packed_logs["train/computed_tokens"] < padded_logs["train/computed_tokens"]


def test_micro_batches_of_the_same_rows_are_the_same_trees_in_any_row_order():
    # The loss pass gets a mini-batch's rows shuffled, the reference pass in order: equal prompts must land in
    # the same trees in the same order, or the two passes' log-probs differ by rounding and the KL term of a
    # policy equal to its reference (no advantage) moves the weights.
    rows = _rows(4, n=30)
    lengths = [(len(p), len(c)) for p, c in rows]
    prompts = [p for p, _ in rows]
    order = list(range(len(rows)))
    shuffled = random.Random(0).sample(order, len(order))
    kwargs = dict(budget=120, prompts=prompts, pack_length=60)
    assert pack_micro_batches(lengths, shuffled, **kwargs) == pack_micro_batches(lengths, order, **kwargs)


@pytest.mark.parametrize("pack_length", [None, 60])
def test_micro_batches_hold_at_most_the_budget_in_row_tokens_and_in_stacked_positions(pack_length):
    # Attention by rows gathers each row in full, so a micro-batch's rows (each path: prompt, then its scored
    # tokens but the last) stay within the budget, as do its stacked sequences (count x longest).
    rows = _rows(5, n=40)
    lengths = [(len(p), len(c)) for p, c in rows]
    budget = 150
    bins = pack_micro_batches(lengths, range(len(rows)), budget, prompts=[p for p, _ in rows], pack_length=pack_length)
    assert sorted(i for b in bins for i in b) == list(range(len(rows))) and len(bins) > 1
    for members in bins:
        batch = [rows[i] for i in members]
        assert sum(len(p) - 1 + max(len(c), 1) for p, c in batch) <= budget
        packed = pack_rows(batch, pack_length, max_row_tokens=budget)
        assert packed.computed <= budget
        if pack_length is None:  # no cut: one sequence, no padding
            assert packed.input_ids.shape[0] == 1 and packed.computed == packed.tokens == packed_tokens(batch)


def test_sdpa_attends_by_row_paths_without_an_l_by_l_mask():
    rows = _rows(6)
    packed = pack_rows(rows)
    mask = packing.attention_for(packed, "sdpa", torch.float32)
    length = packed.input_ids.shape[1]
    assert mask.shape == (1, 1, length, length) and mask.stride() == (0, 0, 0, 0)  # one element, viewed
    # Each row's path, gathered, is the row's own tokens in order: its prompt, then its completion but the last.
    flat_tokens = packed.input_ids.flatten()
    paths = {tuple(flat_tokens[index].tolist()) for bucket in mask.row_paths.gather for index in bucket}
    for prompt, completion in rows:
        path = (*prompt, *completion[:-1]) if completion else tuple(prompt)
        assert any(p[: len(path)] == path for p in paths)
    # Every position takes its output from a gathered row at its own depth: the same token.
    outputs = torch.cat([flat_tokens[index].flatten() for index in mask.row_paths.gather])
    assert outputs[mask.row_paths.scatter[: packed.tokens]].equal(flat_tokens[: packed.tokens])
    # A mask that carries row paths runs no other way: with a KV cache its keys are not its queries.
    query = torch.zeros(1, 2, length, 4)
    with pytest.raises(ValueError, match="KV cache"):
        packing.tree_attention(torch.nn.Module(), query, torch.zeros(1, 2, length + 1, 4), query, mask)


def test_the_fused_lm_head_projects_only_the_scored_positions(trainer, monkeypatch):
    import trl.trainer.utils as trl_utils

    seen = []
    chunked = trl_utils._ChunkedLogProbFunction

    class Recording(chunked):
        @staticmethod
        def forward(ctx, hidden, *args):
            seen.append(hidden.shape[0])
            return chunked.forward(ctx, hidden, *args)

    monkeypatch.setattr(trl_utils, "_ChunkedLogProbFunction", Recording)
    rows = _rows(7)
    ids, mask, width = _padded(rows)
    trainer._packed = True
    with torch.no_grad():
        trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, width)
    assert seen == [sum(len(c) for _, c in rows)]  # not every position of the packed sequence


def test_eager_attention_takes_the_tree_mask_in_stacked_sequences(trainer):
    # Eager attention has no attention by rows: it reads the additive [L, L] tree mask, in sequences of at most
    # pack_length positions (40 here: several stacked sequences).
    ids, mask, width = _padded(_rows(8))
    with packing._attention_implementation(trainer.model, "eager"):
        assert packing.attention_of(trainer.model) == "eager"
        padded = _logps_and_grads(trainer, ids, mask, width, packed=False)
        trainer._pack_length = 40
        try:
            packed = _logps_and_grads(trainer, ids, mask, width, packed=True)
        finally:
            trainer._pack_length = None
    _assert_equal_passes(packed, padded, mask, width)
    layout = pack_rows(_rows(8), 40)
    additive = packing.attention_for(layout, "eager", torch.float32)
    assert layout.input_ids.shape[0] > 1 and not hasattr(additive, "row_paths")
    assert additive.shape == layout.attend.shape and (additive == 0).equal(layout.attend)
