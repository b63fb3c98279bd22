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
gradients equal the padded layout's up to float rounding order.

With SDPA, the dense layers run once per tree position and attention runs by rows
(:class:`RowPaths`): each row's path of positions, from its first prompt token to its last scored one,
is gathered into a causal attention batch, so a query costs what it would in its row alone, and each
position takes its output from the row that put it in the tree. No [L, L] mask is built, so a
micro-batch's trees can be one sequence of any length. Eager attention takes the tree mask as a
dense [L, L] matrix: there trees are cut into sequences of at most ``max_length`` positions (a row
that does not fit starts a new sequence, which computes its prefix again), stacked with a little
padding, because dense attention over one long sequence costs its length squared.

Torch and NumPy; the model is any causal LM whose forward takes ``attention_mask`` as a 4D mask (SDPA or
eager attention) and TRL's fused LM head (``fused_lm_head=True`` with ``shift_labels``).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from gaca_train.rollout.sampling import prefill_buckets

# Attention implementations that take a 4D mask as given (transformers' masking returns a 4D mask as-is).
MASKED_ATTENTION = ("sdpa", "eager")
# SDPA by query blocks: the block of queries [a, b) attends the keys [low, b) only, where ``low`` is the
# first key any of them may attend (causal masks leave the rest zero). Registered with transformers and
# set on the model for the packed forward passes of an SDPA model.
TREE_ATTENTION = "gaca_tree_sdpa"
QUERY_BLOCK = 128


@dataclass
class RowPaths:
    """Per-row attention of a packed layout: where each row's path lies, and which row computes each position.

    Rows are grouped by path length (:func:`gaca_train.rollout.sampling.prefill_buckets`); bucket ``b`` is an
    [R_b, L_b] matrix of flat positions (into the packed layout's [S * L]), one row's path per line by
    depth, padded at the end with the path's last position (never attended: the batch is causal).

    Attributes:
        gather: per bucket, the [R_b, L_b] flat positions of its rows' paths.
        scatter: [S * L] per packed position, its index into the buckets' outputs laid end to end
            (the row that added the position to the tree, at its depth; 0 for padding positions).
    """

    gather: list[torch.Tensor]
    scatter: torch.Tensor

    def to(self, device: torch.device | str) -> RowPaths:
        return RowPaths([index.to(device) for index in self.gather], self.scatter.to(device))


@dataclass
class PackedRows:
    """Rows laid out as prefix trees in ``S`` sequences of ``L`` positions.

    Attributes:
        input_ids: [S, L] tokens (padding positions hold ``pad_id``).
        position_ids: [S, L] depth of each position in its row (0 for the first prompt token).
        end: [S, L] the end of each position's subtree: the positions in ``[p, end[p])`` are ``p`` and
            its descendants (a padding position ends right after itself).
        shift_labels: [S, L] the next token a position is scored on, -100 where it is not scored.
        row, column: per scored position, its row and completion column in the padded output.
        flat: per scored position, its index into the flattened [S * L] outputs.
        tokens: positions that hold a token (the computed tokens without padding).
        paths: each row's path, for attention by rows (:func:`tree_attention`).
    """

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    end: torch.Tensor
    shift_labels: torch.Tensor
    row: torch.Tensor
    column: torch.Tensor
    flat: torch.Tensor
    tokens: int
    paths: RowPaths

    @property
    def computed(self) -> int:
        """Positions the model runs, padding included (S x L)."""
        return self.input_ids.numel()

    @property
    def attend(self) -> torch.Tensor:
        """[S, 1, L, L] bool tree mask, True where a query position may attend a key position.

        Depth-first order: key k is an ancestor of (or is) query q iff k <= q < end[k].
        """
        length = self.end.shape[1]
        query = torch.arange(length, device=self.end.device).view(1, length, 1)
        key = torch.arange(length, device=self.end.device).view(1, 1, length)
        return ((key <= query) & (query < self.end.unsqueeze(1))).unsqueeze(1)


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
    rows: Sequence[tuple[Sequence[int], Sequence[int]]],
    max_length: int | None = None,
    max_row_tokens: int | None = None,
) -> list[tuple[list[int], int]]:
    """Splits ``rows`` into sequences of prefix trees: (row indices in tree order, positions) each.

    Rows are sorted by their shared part (prompt but the last token), so rows that share a prefix are
    neighbours. A row joins the open sequence while it stays within ``max_length`` positions (sharing
    its common prefix with the previous row, if any) and the sequence's rows within ``max_row_tokens``
    tokens (each row in full, what attention by rows gathers); otherwise it starts a sequence.
    """
    if any(len(prompt) == 0 for prompt, _ in rows):
        raise ValueError("every row needs at least one prompt token")
    order = sorted(range(len(rows)), key=lambda i: (tuple(rows[i][0][:-1]), i))
    groups: list[tuple[list[int], int]] = []
    previous: Sequence[int] = ()
    row_tokens = 0  # of the open sequence
    for i in order:
        prompt, completion = rows[i]
        shared = prompt[:-1]
        path = len(shared) + max(len(completion), 1)
        common = common_prefix(previous, shared) if groups else 0
        cost = path - common
        if (
            not groups
            or (max_length is not None and groups[-1][1] + cost > max_length)
            or (max_row_tokens is not None and row_tokens + path > max_row_tokens)
        ):
            groups.append(([], 0))
            cost, row_tokens = path, 0
        members, size = groups[-1]
        members.append(i)
        groups[-1] = (members, size + cost)
        row_tokens += path
        previous = shared
    return groups


def pack_rows(
    rows: Sequence[tuple[Sequence[int], Sequence[int]]],
    max_length: int | None = None,
    pad_id: int = 0,
    max_row_tokens: int | None = None,
) -> PackedRows:
    """Lays ``rows`` (prompt tokens, completion tokens) out as prefix trees; see the module docstring.

    Args:
        rows: per row, its prompt (at least one token) and its scored completion tokens (may be empty).
        max_length: most positions of a sequence (None: no limit); a row longer than this gets a
            sequence of its own.
        pad_id: token id of padding positions.
        max_row_tokens: most row tokens of a sequence (:func:`group_rows`; None: no limit).

    Returns:
        The packed layout; rows keep their indices in ``row``.
    """
    sequences: list[dict[str, list[int]]] = []
    scored: list[tuple[int, int, int, int]] = []  # (row, column, sequence, position)
    paths: list[tuple[int, list[int]]] = []  # per row in tree order: (sequence, its positions by depth)
    for members, _ in group_rows(rows, max_length, max_row_tokens):
        current: dict[str, list[int]] = {"tokens": [], "depth": [], "end": [], "label": [], "owner": []}
        sequences.append(current)
        open_nodes: list[int] = []  # positions on the previous row's path (shared, then tail), by depth
        previous: Sequence[int] = ()
        for i in members:
            prompt, completion = rows[i]
            shared = prompt[:-1]
            common = common_prefix(previous, shared)
            _close(current, open_nodes, common)
            # The row's new positions: its shared part after the common prefix, then its tail (last prompt
            # token, completion but the last), at depths common, common + 1, ...
            new = [*shared[common:], prompt[-1], *completion[:-1]]
            first, count = len(current["tokens"]), len(new)
            open_nodes[common:] = range(first, first + count)
            current["tokens"] += map(int, new)
            current["depth"] += range(common, common + count)
            current["end"] += [-1] * count
            current["label"] += [-100] * count
            current["owner"] += [len(paths)] * count
            paths.append((len(sequences) - 1, list(open_nodes)))
            tail = first + len(shared) - common  # the position scored on completion[0]
            for column, token in enumerate(completion):
                current["label"][tail + column] = int(token)
                scored.append((i, column, len(sequences) - 1, tail + column))
            previous = shared
        _close(current, open_nodes, 0)
    return _tensors(sequences, scored, paths, pad_id)


def _close(sequence: dict[str, list[int]], open_nodes: list[int], keep: int) -> None:
    """Ends the subtrees of the open positions deeper than ``keep``: later positions are not their descendants."""
    end, size = sequence["end"], len(sequence["tokens"])
    for position in open_nodes[keep:]:
        end[position] = size


def _long(values: Sequence[int]) -> torch.Tensor:
    """An int64 tensor of a list of ints (through NumPy: many times faster than ``torch.tensor`` on a list)."""
    return torch.from_numpy(np.asarray(values, dtype=np.int64))


def _row_paths(sequences: list[dict[str, list[int]]], paths: list[tuple[int, list[int]]], length: int) -> RowPaths:
    """The :class:`RowPaths` of packed sequences of ``length`` positions."""
    gather, start = [], np.zeros(len(paths), dtype=np.int64)  # start: where a path's outputs begin
    offset = 0
    for bucket in prefill_buckets([len(positions) for _, positions in paths]):
        width = len(paths[bucket[0]][1])
        index = np.empty((len(bucket), width), dtype=np.int64)
        for r, p in enumerate(bucket):
            s, positions = paths[p]
            index[r, : len(positions)] = positions
            index[r, len(positions) :] = positions[-1]
            index[r] += s * length
            start[p] = offset + r * width
        gather.append(torch.from_numpy(index))
        offset += len(bucket) * width
    scatter = np.zeros(len(sequences) * length, dtype=np.int64)
    for s, sequence in enumerate(sequences):
        n = len(sequence["owner"])
        scatter[s * length : s * length + n] = start[sequence["owner"]] + np.asarray(sequence["depth"])
    return RowPaths(gather, torch.from_numpy(scatter))


def _tensors(
    sequences: list[dict[str, list[int]]],
    scored: list[tuple[int, int, int, int]],
    paths: list[tuple[int, list[int]]],
    pad_id: int,
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
        input_ids[s, :n] = _long(sequence["tokens"])
        position_ids[s, :n] = _long(sequence["depth"])
        labels[s, :n] = _long(sequence["label"])
        end[s, :n] = _long(sequence["end"])
    row, column, s, position = (
        _long(np.asarray(scored, dtype=np.int64).reshape(-1, 4)[:, k]) for k in range(4)
    )  # fmt: skip
    return PackedRows(
        input_ids=input_ids,
        position_ids=position_ids,
        end=end,
        shift_labels=labels,
        row=row,
        column=column,
        flat=s * length + position,
        tokens=sum(len(s["tokens"]) for s in sequences),
        paths=_row_paths(sequences, paths, length),
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
    """transformers' SDPA attention, by rows for a packed layout's mask, else by blocks of queries.

    A mask that :func:`packed_logps` gave its layout's :class:`RowPaths` (``mask.row_paths``) runs by
    rows: each row's path is gathered into a causal SDPA batch (one call per length bucket), and each
    position takes its output from the row that owns it. Other 4D masks run by blocks of
    ``QUERY_BLOCK`` queries: a block ``[a, b)`` needs only the keys ``[low, b)`` (no key after its last
    query under a causal or tree mask, none before the first key one of them attends). Either way the
    same values as one SDPA call over the mask, up to rounding order.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    paths = getattr(attention_mask, "row_paths", None)
    if paths is not None:
        if key.shape[2] != query.shape[2]:
            raise ValueError("a packed layout's attention runs without a KV cache: its keys are its queries")
        return _attention_by_rows(module, query, key, value, paths, **kwargs), None
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


def _attention_by_rows(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    paths: RowPaths,
    **kwargs: Any,
) -> torch.Tensor:
    """Causal SDPA over each row's gathered path, in the packed layout's [S, L, heads, dim] (see tree_attention)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    count, heads, length, dim = query.shape
    kwargs.pop("is_causal", None)

    def flat(x: torch.Tensor) -> torch.Tensor:  # [S, H, L, D] -> [S * L, H, D]
        return x.transpose(1, 2).reshape(count * length, x.shape[1], x.shape[3])

    def pick(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:  # [S * L, H, D] -> [R, H, W, D]
        return x.index_select(0, index.flatten()).view(*index.shape, x.shape[1], x.shape[2]).transpose(1, 2)

    query, key, value = flat(query), flat(key), flat(value)
    outputs = []
    for index in paths.gather:
        picked = (pick(x, index) for x in (query, key, value))
        out, _ = sdpa_attention_forward(module, *picked, None, is_causal=True, **kwargs)
        outputs.append(out.reshape(index.numel(), heads, -1))
    out = outputs[0] if len(outputs) == 1 else torch.cat(outputs)
    return out.index_select(0, paths.scatter).view(count, length, heads, -1)


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


def attention_for(packed: PackedRows, implementation: str, dtype: torch.dtype, device: Any = "cpu") -> torch.Tensor:
    """The 4D mask the attention implementation takes, on ``device``.

    SDPA: a [S, 1, L, L] view of one element that carries the rows' paths (``row_paths``), which
    :func:`tree_attention` attends by, with no [L, L] matrix; any other reader of it would see no tree,
    so :func:`tree_attention` refuses to run a mask with paths another way. Eager: the additive tree mask.
    """
    if implementation == "sdpa":
        count, length = packed.input_ids.shape
        mask = torch.ones((), dtype=torch.bool, device=device).expand(count, 1, length, length)
        mask.row_paths = packed.paths.to(device)
        return mask
    zero = torch.zeros((), dtype=dtype)
    additive = torch.where(packed.attend, zero, torch.tensor(torch.finfo(dtype).min, dtype=dtype))
    return additive.to(device)


def packed_logps(
    model: Any,
    packed: PackedRows,
    shape: tuple[int, int],
    implementation: str,
    compute_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs (and entropies) of the packed rows, in the padded [rows, width] frame (0 elsewhere).

    ``model`` is called with TRL's fused LM head (``fused_lm_head=True``, ``shift_labels``). Only the
    scored positions reach the head: the backbone's output is cut down to them (:func:`_scored_only`),
    as TRL itself compacts them on GPUs with Triton, where elsewhere it would score every position.
    """
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    dtype = dtype if dtype.is_floating_point else torch.float32
    mask = attention_for(packed, implementation, dtype, device)
    flat, row, column = packed.flat.to(device), packed.row.to(device), packed.column.to(device)
    scored = flat.numel() > 0
    labels = packed.shift_labels.to(device)
    with block_attention(model) if implementation == "sdpa" else nullcontext(), _scored_only(model, flat, scored):
        outputs = model(
            input_ids=packed.input_ids.to(device),
            attention_mask=mask,
            position_ids=packed.position_ids.to(device),
            shift_labels=labels.reshape(1, -1)[:, flat] if scored else labels,
            fused_lm_head=True,
        )

    def scatter(values: torch.Tensor) -> torch.Tensor:
        out = values.new_zeros(shape)
        return out.index_put((row, column), values.reshape(-1)[slice(None) if scored else flat])

    entropy = scatter(outputs.entropy) if compute_entropy and outputs.entropy is not None else None
    return scatter(outputs.log_probs), entropy


@contextmanager
def _scored_only(model: Any, flat: torch.Tensor, active: bool = True):
    """Within the block, the backbone of ``model`` returns the hidden states of the ``flat`` positions only.

    Its ``last_hidden_state`` becomes [1, len(flat), hidden], in ``flat``'s order, for the fused LM head
    to score against labels in the same order.
    """
    if not active:
        yield
        return

    def keep_scored(module: torch.nn.Module, args: Any, output: Any) -> Any:
        hidden = output.last_hidden_state
        output.last_hidden_state = hidden.reshape(-1, hidden.shape[-1]).index_select(0, flat).unsqueeze(0)
        return output

    handle = _unwrapped(model).base_model.register_forward_hook(keep_scored)
    try:
        yield
    finally:
        handle.remove()


AttentionInterface.register(TREE_ATTENTION, tree_attention)
# A model set to it builds SDPA's masks (padding, causal), so any forward in block_attention stays exact.
AttentionMaskInterface.register(TREE_ATTENTION, sdpa_mask)
