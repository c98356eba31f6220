"""kvsketch.torch: tensors in and out, the same bits as the NumPy API, refusals that name the argument."""
import os

import numpy as np
import pytest

if os.environ.get("KVSKETCH_REQUIRE_TORCH") != "1":
    pytest.importorskip("torch")
import torch  # noqa: E402

import kvsketch  # noqa: E402
import kvsketch.torch as kt  # noqa: E402


def gaussian(*shape, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def test_codec_on_tensors_gives_the_numpy_bits():
    x = gaussian(50, 64)
    codec, reference = kt.Codec("tq_mse:b=3", 64, seed=3), kvsketch.Codec("tq_mse:b=3", 64, seed=3)
    codes = codec.encode(x)
    assert isinstance(codes, torch.Tensor) and codes.dtype == torch.uint8
    assert np.array_equal(codes.numpy(), reference.encode(x.numpy()))
    decoded = codec.decode(codes)
    assert decoded.dtype == torch.float32 and decoded.shape == (50, 64)
    assert np.array_equal(decoded.numpy(), reference.decode(reference.encode(x.numpy())))
    scores = codec.scores(x[0].contiguous(), codes)
    assert np.array_equal(scores.numpy(), reference.scores(x[0].numpy(), codes.numpy()))
    assert codec.code_bytes == reference.code_bytes


def test_cache_reads_bf16_and_fp16_tensors_in_place():
    keys, values = gaussian(2, 40, 64, seed=1), gaussian(2, 40, 64, seed=2)
    queries = gaussian(1, 4, 64, seed=3)
    for dtype in (torch.bfloat16, torch.float16):
        cache, reference = (kt.KVCache(layers=1, kv_heads=2, head_dim=64, policy="tq_mse:b=3", seed=5),
                            kvsketch.KVCache(layers=1, kv_heads=2, head_dim=64, policy="tq_mse:b=3", seed=5))
        s, r = cache.add_sequence(), reference.add_sequence()
        k, v = keys.to(dtype), values.to(dtype)
        cache.append(s, 0, k, v)
        # The reference gets the same values widened to float32 by torch: the same codes and bits.
        reference.append(r, 0, k.float().numpy(), v.float().numpy())
        out, lse = cache.attention(0, [s], queries)
        ref_out, ref_lse = reference.attention(0, [r], queries.numpy())
        assert isinstance(out, torch.Tensor) and out.shape == (1, 4, 64)
        assert np.array_equal(out.numpy(), ref_out) and np.array_equal(lse.numpy(), ref_lse)
        read_keys, _ = cache.read(s, 0)
        assert read_keys.shape == (2, 40, 64)
    assert cache.bytes() == reference.bytes()


def test_paged_selection_on_bf16_tensors_gives_the_numpy_bits():
    keys, values = gaussian(2, 300, 64, seed=4).to(torch.bfloat16), gaussian(2, 300, 64, seed=5).to(torch.bfloat16)
    queries = gaussian(2, 4, 64, seed=6)
    made = [cls(1, 2, 64, "tq_mse:b=3|window=32|block=16", "magicpig:K=4,L=40", seed=2)
            for cls in (kt.PagedSelectionCache, kvsketch.PagedSelectionCache)]
    ids = [cache.add_sequence() for cache in made]
    made[0].append(ids[0], 0, keys, values)
    made[1].append(ids[1], 0, keys.float().numpy(), values.float().numpy())
    forks = [cache.fork(i) for cache, i in zip(made, ids)]
    out, lse = made[0].attention(0, [ids[0], forks[0]], queries, draw=1)
    ref_out, ref_lse = made[1].attention(0, [ids[1], forks[1]], queries.numpy(), draw=1)
    assert isinstance(out, torch.Tensor) and out.shape == (2, 4, 64)
    assert np.array_equal(out.numpy(), ref_out) and np.array_equal(lse.numpy(), ref_lse)
    assert made[0].index_bytes() == made[1].index_bytes() > 0


def test_files_load_as_tensor_objects(tmp_path):
    cache = kt.KVCache(layers=1, kv_heads=2, head_dim=64, policy="tq_mse:b=3", seed=5)
    s = cache.add_sequence()
    cache.append(s, 0, gaussian(2, 40, 64, seed=1), gaussian(2, 40, 64, seed=2))
    cache.save(str(tmp_path / "cache.kvp"))
    loaded = kt.KVCache.load(str(tmp_path / "cache.kvp"))
    assert isinstance(loaded, kt.KVCache)
    queries = gaussian(1, 4, 64, seed=3)
    assert torch.equal(loaded.attention(0, [s], queries)[0], cache.attention(0, [s], queries)[0])
    index = kt.IvfIndex(32, "ivf:nlist=4,nprobe=4|tq_mse:b=4")
    base = gaussian(200, 32, seed=4)
    index.train(base)
    index.add(base)
    again = kt.IvfIndex.from_bytes(index.to_bytes())
    assert isinstance(again, kt.IvfIndex)
    assert torch.equal(again.search(base[:3].contiguous(), 5)[1], index.search(base[:3].contiguous(), 5)[1])


def test_index_search_returns_tensors():
    base, queries = gaussian(300, 32, seed=4), gaussian(5, 32, seed=5)
    index = kt.Index(32, codec="tq_mse:b=4", metric="ip")
    index.add(base)
    distances, ids = index.search(queries, 10)
    assert distances.dtype == torch.float32 and ids.dtype == torch.int64 and ids.shape == (5, 10)
    exact = (queries @ base.T).topk(10).indices
    recall = np.mean([len(set(ids[i].tolist()) & set(exact[i].tolist())) / 10 for i in range(5)])
    assert recall >= 0.7


def test_merge_attention_on_tensors_is_the_softmax_of_the_union():
    scores = gaussian(3, 10, seed=6)
    values = gaussian(10, 8, seed=7)

    def part(a, b):
        s = scores[:, a:b]
        return (torch.softmax(s, -1) @ values[a:b]).contiguous(), torch.logsumexp(s, -1).contiguous()

    out, lse = kt.merge_attention(*part(0, 4), *part(4, 10))
    whole_out, whole_lse = part(0, 10)
    assert torch.allclose(out, whole_out, atol=1e-6) and torch.allclose(lse, whole_lse, atol=1e-6)


def test_bad_tensors_are_refused_naming_the_argument():
    cache = kt.KVCache(layers=1, kv_heads=2, head_dim=64, policy="tq_mse:b=3")
    s = cache.add_sequence()
    keys = gaussian(2, 8, 64)
    with pytest.raises(ValueError, match="contiguous"):
        cache.append(s, 0, keys.transpose(1, 2), keys)
    with pytest.raises(ValueError, match="meta"):
        cache.append(s, 0, torch.empty(2, 8, 64, device="meta"), keys)
    with pytest.raises(TypeError, match="keys must be float32, float16 or bfloat16"):
        cache.append(s, 0, keys.double(), keys)
    with pytest.raises(TypeError, match="queries"):
        cache.attention(0, [s], gaussian(1, 4, 64).half())
    with pytest.raises(ValueError, match="NaN|nan"):
        bad = keys.clone()
        bad[1, 3, 7] = float("nan")
        cache.append(s, 0, bad, keys)
    assert cache.tokens(s, 0) == 0  # every refusal left the cache as it was
    with pytest.raises(TypeError, match="torch.Tensor"):
        kt.as_numpy(np.zeros(3, np.float32), "x")
