"""The update schedule of an iteration: mini-batches of step rows, micro-batches by a token budget.

An iteration's step rows (all ranks together) are shuffled and cut into mini-batches of
``mini_batch_rows`` rows; each mini-batch is one optimiser update, and ``ppo_epochs`` passes
reshuffle and repeat this. Each rank holds the rows its own envs produced and never sends them
elsewhere: a mini-batch is the set of global row indices, and each rank trains on its share. On
each rank an update is accumulated over micro-batches packed under a token budget
(``micro_batch_tokens``): in the padded layout counted as rows x (longest prompt + longest
completion), in the packed layout (:mod:`gaca_train.training.packing`) as the positions of the rows' prefix
tree, each shared prompt prefix once.

World-size invariance: a row's global index orders rows by (episode, step), where episodes are
numbered over the whole iteration as the single-process run numbers them, so the mini-batches
(and therefore every update's gradient) are the same whatever the number of ranks.

Pure Python and torch (for the seeded permutation); no TRL import.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from gaca_train.training.packing import group_rows


def plan_mini_batches(
    num_rows: int, mini_batch_rows: int | None, ppo_epochs: int = 1, seed: int = 0
) -> list[list[int]]:
    """Global row indices of each optimiser update of an iteration.

    Each epoch draws a fresh permutation of ``range(num_rows)`` (seeded) and cuts it into chunks of
    ``mini_batch_rows``; the last chunk of an epoch holds the remainder (fewer rows), so every row
    counts exactly once per epoch. ``mini_batch_rows=None`` makes one update of all rows per epoch.

    Args:
        num_rows: rows of the iteration over all ranks (>= 1).
        mini_batch_rows: rows per update (None: all).
        ppo_epochs: passes over the rows.
        seed: seed of the permutations (the same on every rank).

    Returns:
        ``ppo_epochs * ceil(num_rows / mini_batch_rows)`` lists of global row indices.
    """
    if num_rows < 1:
        raise ValueError(f"an iteration needs at least one row, got {num_rows}")
    size = num_rows if mini_batch_rows is None else mini_batch_rows
    generator = torch.Generator().manual_seed(seed)
    updates = []
    for _ in range(ppo_epochs):
        order = torch.randperm(num_rows, generator=generator).tolist()
        updates += [order[start : start + size] for start in range(0, num_rows, size)]
    return updates


def num_updates(num_rows: int, mini_batch_rows: int | None, ppo_epochs: int = 1) -> int:
    """Optimiser updates of an iteration of ``num_rows`` rows (see :func:`plan_mini_batches`)."""
    per_epoch = 1 if mini_batch_rows is None else math.ceil(num_rows / mini_batch_rows)
    return per_epoch * ppo_epochs


def padded_tokens(lengths: Sequence[tuple[int, int]], rows: Sequence[int]) -> int:
    """Tokens of ``rows`` padded into one tensor: rows x (longest prompt + longest completion)."""
    if not rows:
        return 0
    return len(rows) * (max(lengths[i][0] for i in rows) + max(lengths[i][1] for i in rows))


def pack_micro_batches(
    lengths: Sequence[tuple[int, int]],
    rows: Sequence[int],
    budget: int | None,
    min_count: int = 1,
    prompts: Sequence[Sequence[int]] | None = None,
    pack_length: int | None = None,
) -> list[list[int]]:
    """Packs ``rows`` into micro-batches whose computed size stays within ``budget`` tokens.

    Padded layout (``prompts`` None): rows are sorted by length (longest first) so that rows of similar
    length share a micro-batch and padding stays small; a micro-batch's size is its padded tokens.
    Packed layout (``prompts`` given, per row its prompt tokens): rows are grouped into sequences of
    prefix trees (:func:`gaca_train.training.packing.group_rows`, at most ``pack_length`` positions and ``budget``
    row tokens each), and a micro-batch takes consecutive sequences while both its sequences x the
    longest one's positions (what the stacked sequences compute) and its rows' tokens in full (what
    attention by rows gathers) stay within ``budget``. A micro-batch is closed when the next row
    (sequence) would take it over budget; a single one over budget runs alone. Micro-batches are then
    split (the most rows first) until there are ``min_count`` of them, as far as the rows allow: ranks
    agree on a common count (a sharded model's forward is a collective), and a rank with fewer rows gets
    empty ones.

    Args:
        lengths: per local row, (prompt tokens, completion tokens).
        rows: the local rows to pack (indices into ``lengths``).
        budget: most computed tokens per micro-batch (None: no limit, one micro-batch).
        min_count: the number of micro-batches to reach.
        prompts: per local row, its prompt tokens (the packed layout), or None (the padded layout).
        pack_length: the packed layout's most positions per sequence (:func:`gaca_train.training.packing.pack_rows`).

    Returns:
        ``max(min_count, needed)`` lists of row indices; some may be empty if ``rows`` is short.
    """
    if prompts is None:
        order = sorted(rows, key=lambda i: (lengths[i][0] + lengths[i][1], i), reverse=True)
        units = [([row], padded_tokens(lengths, [row])) for row in order]
    else:
        local = sorted(rows)  # equal prompts in row order, whatever the order given: the same trees every pass
        trees = group_rows([(prompts[i], range(lengths[i][1])) for i in local], pack_length, budget)
        # In tree order: a micro-batch of whole consecutive sequences is regrouped by pack_rows into the same ones.
        units = [([local[j] for j in members], size) for members, size in trees]
    bins: list[list[int]] = []
    count = largest = row_tokens = 0  # of the open micro-batch: its units, its largest's size, its rows' tokens
    for members, size in units:
        paths = sum(lengths[i][0] - 1 + max(lengths[i][1], 1) for i in members)  # rows in full (packed)
        if prompts is None:
            fits = bool(bins) and (budget is None or padded_tokens(lengths, [*bins[-1], *members]) <= budget)
        else:  # the stacked sequences (count x longest) and the rows' tokens
            fits = bool(bins) and (
                budget is None or ((count + 1) * max(largest, size) <= budget and row_tokens + paths <= budget)
            )
        if fits:
            bins[-1] += members
            count, largest, row_tokens = count + 1, max(largest, size), row_tokens + paths
        else:
            bins.append(list(members))
            count, largest, row_tokens = 1, size, paths
    while len(bins) < min_count:
        largest_bin = max(range(len(bins)), key=lambda b: len(bins[b])) if bins else None
        if largest_bin is None or len(bins[largest_bin]) < 2:
            bins.append([])
            continue
        rows_in = bins.pop(largest_bin)
        half = len(rows_in) // 2
        bins += [rows_in[:half], rows_in[half:]]
    return bins
