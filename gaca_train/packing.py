"""Padding-free update passes: step rows packed into sequences, shared prompt prefixes computed once.

A training row is (prompt tokens, completion tokens); its loss needs the log-prob of each completion
token, i.e. the model's output at the last prompt token and at every completion token but the last.
The padded layout (TRL's) runs ``rows x (longest prompt + longest completion)`` positions. Here each
row is split into

* a *shared* part, its prompt but the last token, which rows of one task group often repeat (the
  siblings of a group start from one first prompt, and equal paths give equal later prompts), and
* a *private* tail, its last prompt token and its completion but the last token, whose outputs are
  scored (one position per completion token).

Rows are sorted by their shared part and inserted into a prefix tree laid out in depth-first order,
so a prefix that several rows share occupies one run of positions; each row's tail hangs below its
own shared path. A position attends to itself and its ancestors (a 4D mask), and its position id is
its depth, so every scored position sees exactly its row's context: log-probs, entropies and their
gradients equal the padded layout's up to float rounding order. Trees are cut into sequences of at
most ``max_length`` positions (a row that does not fit starts a new sequence, which computes its
prefix again), and the sequences are stacked with a little padding, because dense attention over one
long sequence costs its length squared.

Pure torch; the model is any causal LM whose forward takes ``attention_mask`` as a 4D mask (SDPA or
eager attention) and TRL's fused LM head (``fused_lm_head=True`` with ``shift_labels``).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

# Attention implementations that take a 4D mask as given (transformers' masking returns a 4D mask as-is).
MASKED_ATTENTION = ("sdpa", "eager")
# SDPA by query blocks: the block of queries [a, b) attends the keys [low, b) only, where ``low`` is the
# first key any of them may attend (causal masks leave the rest zero). Registered with transformers and
# set on the model for the packed forward passes of an SDPA model.
TREE_ATTENTION = "gaca_tree_sdpa"
QUERY_BLOCK = 128


@dataclass
class PackedRows:
    """Rows laid out as prefix trees in ``S`` sequences of ``L`` positions.

    Attributes:
        input_ids: [S, L] tokens (padding positions hold ``pad_id``).
        position_ids: [S, L] depth of each position in its row (0 for the first prompt token).
        attend: [S, 1, L, L] bool, True where a query position may attend a key position.
        shift_labels: [S, L] the next token a position is scored on, -100 where it is not scored.
        row, column: per scored position, its row and completion column in the padded output.
        flat: per scored position, its index into the flattened [S * L] outputs.
        tokens: positions that hold a token (the computed tokens without padding).
    """

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    attend: torch.Tensor
    shift_labels: torch.Tensor
    row: torch.Tensor
    column: torch.Tensor
    flat: torch.Tensor
    tokens: int

    @property
    def computed(self) -> int:
        """Positions the model runs, padding included (S x L)."""
        return self.input_ids.numel()


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def packed_tokens(rows: Sequence[tuple[Sequence[int], Sequence[int]]]) -> int:
    """Positions a prefix tree of ``rows`` holds: each distinct shared prefix once, plus every tail."""
    shared = sorted(tuple(prompt[:-1]) for prompt, _ in rows)
    total, previous = 0, ()
    for part in shared:
        total += len(part) - common_prefix(previous, part)
        previous = part
    return total + sum(max(len(completion), 1) for _, completion in rows)


def group_rows(
    rows: Sequence[tuple[Sequence[int], Sequence[int]]], max_length: int | None = None
) -> list[tuple[list[int], int]]:
    """Splits ``rows`` into sequences of prefix trees: (row indices in tree order, positions) each.

    Rows are sorted by their shared part (prompt but the last token), so rows that share a prefix are
    neighbours. A row joins the open sequence while it stays within ``max_length`` positions (sharing
    its common prefix with the previous row, if any); otherwise it starts a sequence.
    """
    if any(len(prompt) == 0 for prompt, _ in rows):
        raise ValueError("every row needs at least one prompt token")
    order = sorted(range(len(rows)), key=lambda i: (tuple(rows[i][0][:-1]), i))
    groups: list[tuple[list[int], int]] = []
    previous: Sequence[int] = ()
    for i in order:
        prompt, completion = rows[i]
        shared = prompt[:-1]
        common = common_prefix(previous, shared) if groups else 0
        cost = len(shared) - common + max(len(completion), 1)
        if not groups or (max_length is not None and groups[-1][1] + cost > max_length):
            groups.append(([], 0))
            cost = len(shared) + max(len(completion), 1)
        members, size = groups[-1]
        members.append(i)
        groups[-1] = (members, size + cost)
        previous = shared
    return groups


def pack_rows(
    rows: Sequence[tuple[Sequence[int], Sequence[int]]],
    max_length: int | None = None,
    pad_id: int = 0,
) -> PackedRows:
    """Lays ``rows`` (prompt tokens, completion tokens) out as prefix trees; see the module docstring.

    Args:
        rows: per row, its prompt (at least one token) and its scored completion tokens (may be empty).
        max_length: most positions of a sequence (None: no limit); a row longer than this gets a
            sequence of its own.
        pad_id: token id of padding positions.

    Returns:
        The packed layout; rows keep their indices in ``row``.
    """
    sequences: list[dict[str, list[int]]] = []
    scored: list[tuple[int, int, int, int]] = []  # (row, column, sequence, position)
    for members, _ in group_rows(rows, max_length):
        current: dict[str, list[int]] = {"tokens": [], "depth": [], "end": [], "label": []}
        sequences.append(current)
        open_nodes: list[int] = []  # positions on the previous row's path (shared, then tail), by depth
        previous: Sequence[int] = ()
        for i in members:
            prompt, completion = rows[i]
            shared, tail = prompt[:-1], [prompt[-1], *completion[:-1]]
            common = common_prefix(previous, shared)
            _close(current, open_nodes, common)
            del open_nodes[common:]
            for depth, token in enumerate([*shared[common:], *tail], start=common):
                open_nodes.append(len(current["tokens"]))
                current["tokens"].append(int(token))
                current["depth"].append(depth)
                current["end"].append(-1)
                current["label"].append(-100)
            for column, token in enumerate(completion):
                position = open_nodes[len(shared) + column]
                current["label"][position] = int(token)
                scored.append((i, column, len(sequences) - 1, position))
            previous = shared
        _close(current, open_nodes, 0)
    return _tensors(sequences, scored, pad_id)


def _close(sequence: dict[str, list[int]], open_nodes: list[int], keep: int) -> None:
    """Ends the subtrees of the open positions deeper than ``keep``: later positions are not their descendants."""
    for position in open_nodes[keep:]:
        sequence["end"][position] = len(sequence["tokens"])


def _tensors(
    sequences: list[dict[str, list[int]]], scored: list[tuple[int, int, int, int]], pad_id: int
) -> PackedRows:
    length = max((len(s["tokens"]) for s in sequences), default=1)
    count = max(len(sequences), 1)
    input_ids = torch.full((count, length), pad_id, dtype=torch.long)
    position_ids = torch.zeros((count, length), dtype=torch.long)
    labels = torch.full((count, length), -100, dtype=torch.long)
    # A padding position ends right after itself, so it attends to itself only (no empty softmax row).
    end = torch.arange(1, length + 1).repeat(count, 1)
    for s, sequence in enumerate(sequences):
        n = len(sequence["tokens"])
        input_ids[s, :n] = torch.tensor(sequence["tokens"])
        position_ids[s, :n] = torch.tensor(sequence["depth"])
        labels[s, :n] = torch.tensor(sequence["label"])
        end[s, :n] = torch.tensor(sequence["end"])
    # Depth-first order: key k is an ancestor of (or is) query q iff k <= q < end[k].
    query = torch.arange(length).view(1, length, 1)
    key = torch.arange(length).view(1, 1, length)
    attend = (key <= query) & (query < end.unsqueeze(1))
    row, column, s, position = (torch.tensor(x, dtype=torch.long) for x in zip(*scored, strict=True)) if scored else (
        torch.zeros(0, dtype=torch.long) for _ in range(4)
    )  # fmt: skip
    return PackedRows(
        input_ids=input_ids,
        position_ids=position_ids,
        attend=attend.unsqueeze(1),
        shift_labels=labels,
        row=row,
        column=column,
        flat=s * length + position,
        tokens=sum(len(s["tokens"]) for s in sequences),
    )


def unpad_rows(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, width: int
) -> list[tuple[list[int], list[int]]] | None:
    """(prompt, scored completion) token lists of TRL's padded loss inputs, or None if they are not in its layout.

    TRL's layout: left-padded prompts, then ``width`` completion columns whose mask is ones then zeros
    (the scored tokens). A mask with holes is not this layout (None: the caller keeps the padded path).
    """
    ids, mask = input_ids.tolist(), attention_mask.bool().tolist()
    rows = []
    for tokens, keep in zip(ids, mask, strict=True):
        prompt_keep, completion_keep = keep[:-width], keep[-width:]
        n_prompt, n_completion = sum(prompt_keep), sum(completion_keep)
        start = len(prompt_keep) - n_prompt
        if n_prompt == 0 or not all(prompt_keep[start:]) or not all(completion_keep[:n_completion]):
            return None
        prompt = tokens[start : len(prompt_keep)]
        rows.append((prompt, tokens[len(prompt_keep) : len(prompt_keep) + n_completion]))
    return rows


def tree_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' SDPA attention by blocks of ``QUERY_BLOCK`` queries, each over the keys it can attend.

    Dense attention over a packed sequence of length L costs L^2 whatever the mask; a block of queries
    ``[a, b)`` needs only the keys ``[low, b)`` (no key after its last query under a causal or tree mask,
    none before the first key one of them attends), about half of it. The same values as one SDPA call up
    to rounding order.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    length = query.shape[2]
    if attention_mask is None or attention_mask.ndim != 4 or length <= QUERY_BLOCK or key.shape[2] != length:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    allowed = (
        attention_mask
        if attention_mask.dtype == torch.bool
        else attention_mask > torch.finfo(attention_mask.dtype).min
    )
    outputs = []
    for start in range(0, length, QUERY_BLOCK):
        end = min(start + QUERY_BLOCK, length)
        keys = allowed[:, :, start:end, :end].any(dim=2).any(dim=1).any(dim=0)
        low = int(keys.int().argmax())  # the first key any query of the block attends
        block, _ = sdpa_attention_forward(
            module,
            query[:, :, start:end],
            key[:, :, low:end],
            value[:, :, low:end],
            attention_mask[:, :, start:end, low:end],
            **kwargs,
        )
        outputs.append(block)
    return torch.cat(outputs, dim=1), None


@contextmanager
def block_attention(model: Any):
    """Runs an SDPA ``model``'s attention by query blocks (:func:`tree_attention`) in the ``with`` block.

    Exact for any mask, so it may span a whole micro-batch: its backward pass too, where gradient
    checkpointing recomputes the forward and must save the same tensors as the first time.
    """
    if attention_of(model) != "sdpa":
        yield
        return
    with _attention_implementation(model, TREE_ATTENTION):
        yield


def _unwrapped(model: Any) -> Any:
    """The transformers model inside DDP and PEFT wrappers."""
    inner = getattr(model, "module", model)
    return inner.get_base_model() if hasattr(inner, "get_base_model") else inner


def attention_of(model: Any) -> str | None:
    """The attention implementation of a (possibly wrapped: DDP, PEFT) model; SDPA by blocks counts as ``sdpa``."""
    name = getattr(getattr(_unwrapped(model), "config", None), "_attn_implementation", None)
    return "sdpa" if name == TREE_ATTENTION else name


@contextmanager
def _attention_implementation(model: Any, name: str):
    """Sets the attention implementation of ``model`` (unwrapping DDP and PEFT) for the ``with`` block."""
    config = _unwrapped(model).config
    before = config._attn_implementation_internal
    config._attn_implementation_internal = name
    try:
        yield
    finally:
        config._attn_implementation_internal = before


def attention_for(packed: PackedRows, implementation: str, dtype: torch.dtype) -> torch.Tensor:
    """The 4D mask in the form the attention implementation takes: bool for SDPA, additive for eager."""
    if implementation == "sdpa":
        return packed.attend
    zero = torch.zeros((), dtype=dtype)
    return torch.where(packed.attend, zero, torch.tensor(torch.finfo(dtype).min, dtype=dtype))


def packed_logps(
    model: Any,
    packed: PackedRows,
    shape: tuple[int, int],
    implementation: str,
    compute_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs (and entropies) of the packed rows, in the padded [rows, width] frame (0 elsewhere).

    ``model`` is called with TRL's fused LM head (``fused_lm_head=True``, ``shift_labels``): only the
    scored positions are projected onto the vocabulary where TRL compacts them.
    """
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    dtype = dtype if dtype.is_floating_point else torch.float32
    with block_attention(model) if implementation == "sdpa" else nullcontext():
        outputs = model(
            input_ids=packed.input_ids.to(device),
            attention_mask=attention_for(packed, implementation, dtype).to(device),
            position_ids=packed.position_ids.to(device),
            shift_labels=packed.shift_labels.to(device),
            fused_lm_head=True,
        )
    flat, row, column = packed.flat.to(device), packed.row.to(device), packed.column.to(device)

    def scatter(values: torch.Tensor) -> torch.Tensor:
        out = values.new_zeros(shape)
        return out.index_put((row, column), values.reshape(-1)[flat])

    entropy = scatter(outputs.entropy) if compute_entropy and outputs.entropy is not None else None
    return scatter(outputs.log_probs), entropy


AttentionInterface.register(TREE_ATTENTION, tree_attention)
# A model set to it builds SDPA's masks (padding, causal), so any forward in block_attention stays exact.
AttentionMaskInterface.register(TREE_ATTENTION, sdpa_mask)
