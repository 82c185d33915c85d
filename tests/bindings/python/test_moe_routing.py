"""The MoE routing helpers through the Python binding, on the mock CUDA driver (the mock runs the
routing kernels as host loops, so results are real): sizes, alignment against a numpy statement
of the contract, the reduction against numpy in f32 (exactly: small-integer values and power-of-two
weights make every sum exact), and argument errors."""
import numpy as np
import pytest

import humming

RNG = np.random.default_rng(18)


def expected_alignment(ids, num_experts, block, expert_map=None, local=0):
    flat = ids.reshape(-1)
    local = local or num_experts
    sentinel = flat.size
    keep = (flat >= 0) & (flat < num_experts)
    experts = np.where(keep, flat, 0)
    if expert_map is not None:
        experts = np.where(keep, expert_map[experts], -1)
    experts = np.where(keep & (experts >= 0) & (experts < local), experts, -1)
    sorted_ids, expert_ids, offsets, counts = [], [], [0], []
    for e in range(local):
        mine = np.nonzero(experts == e)[0].tolist()
        padded = -(-len(mine) // block) * block
        sorted_ids += mine + [sentinel] * (padded - len(mine))
        expert_ids += [e] * (padded // block)
        offsets.append(offsets[-1] + padded)
        counts.append(len(mine))
    return sorted_ids, expert_ids, offsets, counts


def test_align_sizes():
    s = humming.moe_align_sizes(4096, 8, 256, 64)
    assert s.sorted_ids == -(-(4096 * 8 + 256 * 63) // 64) * 64
    assert s.expert_ids == s.sorted_ids // 64 and s.expert_offsets == 257
    with pytest.raises(humming.InvalidArgumentError, match="block_size"):
        humming.moe_align_sizes(1, 8, 256, 48)
    with pytest.raises(humming.InvalidArgumentError, match="expert_map"):
        humming.moe_align_sizes(1, 8, 256, 64, num_local_experts=16)


@pytest.mark.parametrize("use_map", [False, True])
def test_align_matches_the_contract(mock_context, use_map):
    ids = RNG.integers(-2, 34, (57, 4)).astype(np.int32)
    expert_map = None
    local = 0
    if use_map:
        expert_map = np.full(32, -1, np.int32)
        expert_map[1::2] = np.arange(16, dtype=np.int32)[::-1]
        local = 16
    d_ids = mock_context.to_device(ids)
    d_map = mock_context.to_device(expert_map) if use_map else None
    out = humming.moe_align(mock_context, d_ids, 32, 16, expert_map=d_map,
                            num_local_experts=local)
    mock_context.synchronize()
    sorted_ids, expert_ids, offsets, counts = expected_alignment(ids, 32, 16, expert_map, local)
    got_sorted = out.sorted_ids.numpy()
    used = out.num_tokens_padded.numpy()[0]
    assert used == len(sorted_ids) == offsets[-1]
    assert got_sorted[:used].tolist() == sorted_ids
    assert (got_sorted[used:] == ids.size).all()
    got_experts = out.expert_ids.numpy()
    assert got_experts[:used // 16].tolist() == expert_ids
    assert (got_experts[used // 16:] == -1).all()
    assert out.expert_offsets.numpy().tolist() == offsets
    assert out.expert_counts.numpy().tolist() == counts


def test_reduce_matches_numpy(mock_context):
    tokens, top_k, n = 11, 4, 24
    ids = RNG.integers(-1, 9, (tokens, top_k)).astype(np.int32)  # -1 and 8 dropped (E = 8)
    weights = (RNG.integers(0, 8, (tokens, top_k)) / 8).astype(np.float32)
    values = RNG.integers(-64, 64, (tokens * top_k, n)).astype(np.float16)
    out = humming.moe_reduce(mock_context, mock_context.to_device(values),
                             mock_context.to_device(weights), mock_context.to_device(ids), 8)
    mock_context.synchronize()
    kept = ((ids >= 0) & (ids < 8)).reshape(-1, 1)
    terms = values.astype(np.float32) * weights.reshape(-1, 1) * kept
    want = terms.reshape(tokens, top_k, n).sum(axis=1).astype(np.float16)
    np.testing.assert_array_equal(out.numpy(), want)
    with pytest.raises(humming.InvalidArgumentError, match="topk_weights"):
        humming.moe_reduce(mock_context, mock_context.to_device(values),
                           mock_context.to_device(weights[:, :2].copy()),
                           mock_context.to_device(ids), 8)
    with pytest.raises(humming.InvalidArgumentError, match="topk_ids"):
        humming.moe_reduce(mock_context, mock_context.to_device(values),
                           mock_context.to_device(weights),
                           mock_context.to_device(ids.astype(np.int64)), 8)
