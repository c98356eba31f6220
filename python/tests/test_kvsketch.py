"""The Python module against exact arithmetic and the papers' numbers, and its refusals."""
import math
import os
import tempfile

import numpy as np
import pytest

import kvsketch

RNG = np.random.default_rng(7)


def exact_attention(q, keys, values):
    """q (dim,), keys/values (tokens, dim): softmax(q k / sqrt(d)) v and its log-sum-exp, in float64."""
    scores = keys.astype(np.float64) @ q.astype(np.float64) / math.sqrt(q.shape[0])
    best = scores.max()
    p = np.exp(scores - best)
    return (p @ values.astype(np.float64)) / p.sum(), best + math.log(p.sum())


def unit_rows(n, dim):
    x = RNG.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_codec_distortion_is_the_papers():
    # TurboQuant_mse at b = 3 on unit vectors: D_mse = 0.03 (Theorem 1's table, d large).
    x = unit_rows(4000, 128)
    codec = kvsketch.Codec("tq_mse:b=3", 128, seed=1)
    codes = codec.encode(x)
    assert codes.dtype == np.uint8 and codes.shape == (4000, codec.code_bytes) and codec.code_bytes == 50
    mse = float(np.mean(np.sum((codec.decode(codes) - x) ** 2, axis=1)))
    assert 0.028 < mse < 0.036


def test_codec_scores_and_accumulate_are_the_decoded_rows():
    x = RNG.standard_normal((300, 64)).astype(np.float32)
    codec = kvsketch.Codec("tq_prod:b=3", 64, seed=2)
    codes = codec.encode(x)
    decoded = codec.decode(codes)
    q = RNG.standard_normal(64).astype(np.float32)
    np.testing.assert_allclose(codec.scores(q, codes), decoded @ q, rtol=1e-3, atol=1e-3)
    w = RNG.standard_normal(300).astype(np.float32)
    np.testing.assert_allclose(codec.accumulate(w, codes), w @ decoded, rtol=1e-3, atol=1e-3)
    assert "tq_prod:b=3" in codec.spec and codec.dim == 64


def model_like(heads, tokens, dim):
    offset = np.arange(dim, dtype=np.float32) % 5 * 0.5
    return (RNG.standard_normal((heads, tokens, dim)) + offset).astype(np.float32)


def test_fp16_cache_attention_is_exact_attention():
    cache = kvsketch.KVCache(2, 2, 64, policy="fp16|sinks=4|window=16|block=16|page=32")
    a, b = cache.add_sequence(), cache.add_sequence()
    keys, values = model_like(2, 200, 64), model_like(2, 200, 64)
    for layer in range(2):
        cache.append(a, layer, keys, values)
        cache.append(b, layer, np.ascontiguousarray(keys[:, :90]), np.ascontiguousarray(values[:, :90]))
    queries = RNG.standard_normal((2, 4, 64)).astype(np.float32)
    out, lse = cache.attention(1, [a, b], queries)
    assert out.shape == (2, 4, 64) and lse.shape == (2, 4)
    for s, tokens in enumerate([200, 90]):
        for h in range(4):
            kv = h // 2
            expected, expected_lse = exact_attention(queries[s, h], keys[kv, :tokens], values[kv, :tokens])
            np.testing.assert_allclose(out[s, h], expected, rtol=3e-3, atol=3e-3)
            assert abs(lse[s, h] - expected_lse) < 3e-3
    # The same step from float16 and bfloat16 inputs of the same values.
    half = kvsketch.KVCache(1, 2, 64, policy="fp16")
    c = half.add_sequence()
    half.append(c, 0, keys.astype(np.float16), values.astype(np.float16))
    bf16 = (keys.view(np.uint32) >> 16).astype(np.uint16)
    d = half.add_sequence()
    half.append(d, 0, bf16, bf16)
    assert half.tokens(c) == half.tokens(d) == 200


def test_compressed_cache_saves_bytes_forks_truncates_and_loads():
    policy = "tq_mse:b=3|sinks=4|window=32|block=32|page=64|rollback=32"
    cache = kvsketch.KVCache(1, 2, 128, policy=policy, seed=3)
    a = cache.add_sequence()
    keys, values = model_like(2, 1000, 128), model_like(2, 1000, 128)
    cache.append(a, 0, keys, values)
    fp16_bytes = keys.nbytes // 2 + values.nbytes // 2
    assert cache.bytes() < fp16_bytes / 3.5  # 3.25 bits of 16, sinks and window counted
    q = RNG.standard_normal((1, 8, 128)).astype(np.float32)
    out, lse = cache.attention(0, [a], q)
    for h in range(8):
        expected, _ = exact_attention(q[0, h], keys[h // 4], values[h // 4])
        assert np.linalg.norm(out[0, h] - expected) / np.linalg.norm(expected) < 0.2
    b = cache.fork(a)
    # Sealed pages are held once: the fork adds its window, sinks, rollback copies and open page.
    assert cache.bytes() < 1.5 * cache.sequence_bytes(a)
    cache.truncate(b, 990)
    assert cache.tokens(b) == 990 and b in cache
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "cache.kvp")
        cache.save(path)
        loaded = kvsketch.KVCache.load(path)
        again, again_lse = loaded.attention(0, [a], q)
        assert np.array_equal(out, again) and np.array_equal(lse, again_lse)
    # prefill's last position is decode's answer
    last, _ = cache.prefill(0, a, q[0][None])
    assert np.array_equal(last[0], out[0])
    cache.remove_sequence(b)
    assert cache.sequences() == [a]


def test_attend_chunk_reads_the_chunk_exactly_before_its_append():
    cache = kvsketch.KVCache(1, 2, 64, policy="tq_mse:b=3|window=16|block=16|page=32", seed=5)
    a = cache.add_sequence()
    keys, values = model_like(2, 300, 64), model_like(2, 300, 64)
    cache.append(a, 0, np.ascontiguousarray(keys[:, :200]), np.ascontiguousarray(values[:, :200]))
    chunk_keys, chunk_values = np.ascontiguousarray(keys[:, 200:]), np.ascontiguousarray(values[:, 200:])
    queries = RNG.standard_normal((100, 4, 64)).astype(np.float32)
    out, lse = cache.attend_chunk(0, a, queries, chunk_keys, chunk_values)
    assert out.shape == (100, 4, 64) and lse.shape == (100, 4) and cache.tokens(a) == 200
    # Query i: the past as decode reads it, merged with exact attention over the chunk's tokens 0..i.
    past_out, past_lse = cache.attention(0, [a] * 100, queries)
    for i in (0, 37, 99):
        for h in range(4):
            own, own_lse = exact_attention(queries[i, h], chunk_keys[h // 2, :i + 1].astype(np.float16).astype(np.float32),
                                           chunk_values[h // 2, :i + 1].astype(np.float16).astype(np.float32))
            top = max(past_lse[i, h], own_lse)
            wa, wb = np.exp(past_lse[i, h] - top), np.exp(own_lse - top)
            np.testing.assert_allclose(out[i, h], (wa * past_out[i, h] + wb * own) / (wa + wb), rtol=1e-4, atol=1e-4)
            assert abs(lse[i, h] - (top + np.log(wa + wb))) < 1e-4
    with pytest.raises(ValueError, match="100 queries, but keys and values of 99 tokens"):
        cache.attend_chunk(0, a, queries, chunk_keys[:, :99].copy(), chunk_values[:, :99].copy())
    bad = chunk_keys.copy()
    bad[1, 5, 7] = np.inf
    with pytest.raises(ValueError, match="inf"):
        cache.attend_chunk(0, a, queries, bad, chunk_values)


def test_calibration_feeds_a_cache():
    calibration = kvsketch.Calibration(1, 2, 64, "tq_mse:b=2.5|tq_mse:b=3", seed=4)
    assert not calibration.complete
    calibration.fit(0, model_like(2, 64, 64), model_like(2, 64, 64))
    assert calibration.complete
    cache = kvsketch.KVCache(calibration)
    s = cache.add_sequence()
    cache.append(s, 0, model_like(2, 300, 64), model_like(2, 300, 64))
    out, _ = cache.attention(0, [s], RNG.standard_normal((1, 2, 64)).astype(np.float32))
    assert np.isfinite(out).all()


def test_merge_attention_equals_attention_over_the_union():
    keys, values = RNG.standard_normal((40, 32)), RNG.standard_normal((40, 32))
    q = RNG.standard_normal(32)
    a, la = exact_attention(q, keys[:15], values[:15])
    b, lb = exact_attention(q, keys[15:], values[15:])
    whole, lwhole = exact_attention(q, keys, values)
    f32 = lambda x: np.asarray(x, dtype=np.float32)
    out, lse = kvsketch.merge_attention(f32([a]), f32([la]), f32([b]), f32([lb]))
    np.testing.assert_allclose(out[0], whole, rtol=1e-5, atol=1e-6)
    assert abs(lse[0] - lwhole) < 1e-5


def test_index_recall_against_exact_search():
    x = RNG.standard_normal((2000, 64)).astype(np.float32)
    queries = RNG.standard_normal((50, 64)).astype(np.float32)
    index = kvsketch.Index(64, codec="tq_mse:b=4,rescale=1", metric="ip")
    index.add(x)
    assert index.ntotal == 2000 and index.d == 64
    _, ids = index.search(queries, 10)
    truth = np.argsort(-(queries @ x.T), axis=1)[:, :10]
    recall = np.mean([len(set(ids[i]) & set(truth[i])) / 10 for i in range(50)])
    assert recall > 0.8, recall
    assert index.remove_ids(np.array([0, 1, 123456], dtype=np.int64)) == 2
    assert index.ntotal == 1998
    index.add_with_ids(x[:2], np.array([5000, 5001], dtype=np.int64))
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "index.kvi")
        index.save(path)
        again = kvsketch.Index.load(path)
        assert np.array_equal(again.search(queries, 10)[1], index.search(queries, 10)[1])


# ---- Refusals: each names its argument, and leaves the object unchanged. ----------------------


@pytest.fixture
def cache():
    c = kvsketch.KVCache(1, 2, 64, policy="tq_mse:b=3|sinks=4|window=16|block=16|rollback=16")
    s = c.add_sequence()
    c.append(s, 0, model_like(2, 100, 64), model_like(2, 100, 64))
    return c, s


def test_refusals_of_the_codec():
    codec = kvsketch.Codec("tq_mse:b=3", 64)
    with pytest.raises(kvsketch.Error, match="nope"):
        kvsketch.Codec("nope:b=3", 64)
    with pytest.raises(TypeError, match="x must be a numpy array of dtype float32"):
        codec.encode(np.zeros((3, 64), dtype=np.float64))
    with pytest.raises(ValueError, match="x has shape"):
        codec.encode(np.zeros((3, 65), dtype=np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        codec.encode(np.zeros((64, 3), dtype=np.float32).T)
    with pytest.raises(ValueError, match="dimensions"):
        codec.encode(np.zeros(64, dtype=np.float32))
    bad = np.zeros((3, 64), dtype=np.float32)
    bad[1, 5] = np.nan
    with pytest.raises(kvsketch.Error, match="row 1"):
        codec.encode(bad)
    with pytest.raises(TypeError, match="codes must be a numpy array of dtype uint8"):
        codec.decode(np.zeros((2, codec.code_bytes), dtype=np.int32))
    with pytest.raises(ValueError, match="codes has shape"):
        codec.decode(np.zeros((2, codec.code_bytes + 1), dtype=np.uint8))
    with pytest.raises(ValueError, match="query has shape"):
        codec.scores(np.zeros(63, dtype=np.float32), np.zeros((1, codec.code_bytes), dtype=np.uint8))
    with pytest.raises(TypeError):
        codec.encode([[0.0] * 64])


def test_refusals_of_the_cache(cache):
    c, s = cache
    before = c.bytes()
    keys = model_like(2, 10, 64)
    with pytest.raises(kvsketch.Error, match="12345"):
        c.append(12345, 0, keys, keys)
    with pytest.raises(kvsketch.Error, match="layer"):
        c.append(s, 1, keys, keys)
    with pytest.raises(TypeError, match="keys must be float32, float16 or bfloat16"):
        c.append(s, 0, keys.astype(np.float64), keys)
    with pytest.raises(ValueError, match="keys has shape"):
        c.append(s, 0, model_like(3, 10, 64), keys)
    with pytest.raises(ValueError, match="values has shape"):
        c.append(s, 0, keys, model_like(2, 11, 64))
    with pytest.raises(ValueError, match="C-contiguous"):
        c.append(s, 0, keys[:, ::2], keys[:, ::2])
    nan = keys.copy()
    nan[1, 3, 7] = np.nan
    with pytest.raises(kvsketch.Error, match="nan"):
        c.append(s, 0, keys, nan)
    with pytest.raises(kvsketch.Error, match="65504"):
        c.append(s, 0, np.full((2, 10, 64), 70000.0, dtype=np.float32), keys)
    assert c.tokens(s) == 100 and c.bytes() == before
    q = np.zeros((1, 4, 64), dtype=np.float32)
    with pytest.raises(kvsketch.Error, match="query heads"):
        c.attention(0, [s], np.zeros((1, 3, 64), dtype=np.float32))
    with pytest.raises(ValueError, match="queries has shape"):
        c.attention(0, [s, s], q)
    with pytest.raises(kvsketch.Error, match="12345"):
        c.attention(0, [12345], q)
    with pytest.raises(ValueError, match="threads"):
        c.attention(0, [s], q, threads=-1)
    with pytest.raises(kvsketch.Error):
        c.truncate(s, 101)  # past the end
    with pytest.raises(kvsketch.Error, match="rollback"):
        c.truncate(s, 3)  # before what rollback keeps
    with pytest.raises(kvsketch.Error, match="12345"):
        c.fork(12345)
    with pytest.raises(kvsketch.Error, match="12345"):
        c.remove_sequence(12345)
    with pytest.raises(kvsketch.Error, match="sinks"):
        kvsketch.KVCache(1, 2, 64, policy="tq_mse:b=3|sinks=x")
    with pytest.raises(kvsketch.Error, match="head_dim"):
        kvsketch.KVCache(1, 2, 0)
    assert c.tokens(s) == 100 and c.bytes() == before


def test_refusals_of_files_and_the_index(cache):
    c, s = cache
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "sequence.kvs")
        c.save_sequence(s, path)
        other = kvsketch.KVCache(1, 2, 128, policy="tq_mse:b=3")
        with pytest.raises(kvsketch.Error):
            other.load_sequence(path)  # written for another shape
        with pytest.raises(kvsketch.Error, match="missing.kvp"):
            kvsketch.KVCache.load(os.path.join(directory, "missing.kvp"))
        truncated = os.path.join(directory, "truncated.kvp")
        c.save(truncated)
        with open(truncated, "r+b") as f:
            f.truncate(os.path.getsize(truncated) // 2)
        with pytest.raises(kvsketch.Error):
            kvsketch.KVCache.load(truncated)
    index = kvsketch.Index(16, codec="tq_mse:b=4", metric="l2")
    index.add(RNG.standard_normal((20, 16)).astype(np.float32))
    with pytest.raises(kvsketch.Error, match="k"):
        index.search(np.zeros((1, 16), dtype=np.float32), 21)
    with pytest.raises(TypeError, match="ids must be a numpy array of dtype int64"):
        index.add_with_ids(np.zeros((1, 16), dtype=np.float32), np.array([1], dtype=np.int32))
    with pytest.raises(kvsketch.Error, match="manhattan"):
        kvsketch.Index(16, metric="manhattan")
    assert index.ntotal == 20


def test_bytes_is_what_the_process_holds():
    # cache.bytes() is the memory a Python user saves: the allocation (capacity included) and the
    # growth of the process's resident memory stay near it, also after long prefill appends.
    def resident():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    keys = RNG.standard_normal((8, 4096, 128)).astype(np.float32)
    before = resident()
    cache = kvsketch.KVCache(1, 8, 128, policy="tq_mse:b=3")
    for _ in range(16):
        s = cache.add_sequence()
        for _ in range(2):
            cache.append(s, 0, keys, keys)
    grown = resident() - before
    assert cache.bytes() > 100e6
    assert cache.allocated_bytes() < 1.05 * cache.bytes()
    assert grown < 1.3 * cache.bytes(), (grown, cache.bytes())


def test_type_stubs_name_what_the_module_has():
    import ast

    stub = ast.parse(open(os.path.join(os.path.dirname(kvsketch.__file__), "_kvsketch.pyi")).read())
    module = kvsketch._kvsketch
    stubbed = {node.name: node for node in stub.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    public = {name for name in dir(module) if not name.startswith("_")}
    assert set(stubbed) == public
    for name, node in stubbed.items():
        if not isinstance(node, ast.ClassDef) or name == "Error":
            continue
        in_stub = {item.name for item in node.body if isinstance(item, ast.FunctionDef)} - {"__init__"}
        in_class = {attribute for attribute in dir(getattr(module, name))
                    if not attribute.startswith("_") or attribute == "__contains__"}
        assert in_stub == in_class, (name, in_stub ^ in_class)


def test_ivf_index_finds_what_exact_search_finds():
    rng = np.random.default_rng(4)
    centres = rng.standard_normal((30, 32)).astype(np.float32) * 3
    x = (centres[np.arange(3000) % 30] + rng.standard_normal((3000, 32))).astype(np.float32)
    queries = (centres[np.arange(40) % 30] + rng.standard_normal((40, 32))).astype(np.float32)
    index = kvsketch.IvfIndex(32, "ivf:nlist=30,nprobe=8,metric=l2|tq_mse:b=4,rescale=1")
    assert not index.is_trained
    index.train(x)
    index.add(x)
    assert index.ntotal == 3000 and sum(index.list_sizes()) == 3000
    distances = ((queries[:, None, :] - x[None, :, :]) ** 2).sum(axis=2)
    truth = np.argsort(distances, axis=1)[:, :10]
    recall = lambda ids: np.mean([len(set(ids[i]) & set(truth[i])) / 10 for i in range(40)])
    # 8 of 30 lists find what all 30 find (the 4-bit codes bound both, near 0.74-0.81 over seeds).
    probed, everything = recall(index.search(queries, 10)[1]), recall(index.search(queries, 10, 30)[1])
    assert probed > 0.65 and probed >= 0.97 * everything, (probed, everything)
    assert index.remove_ids(np.array([0, 1], dtype=np.int64)) == 2
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "index.kvivf")
        index.save(path)
        again = kvsketch.IvfIndex.load(path)
        assert np.array_equal(again.search(queries, 10)[1], index.search(queries, 10)[1])
        assert again.factory == index.factory
        mapped = kvsketch.IvfIndex.map(path)  # searched in the file's pages
        assert again.mapped_bytes() == 0 and mapped.mapped_bytes() > 0.9 * (mapped.bytes() - 31 * 32 * 4)
        assert mapped.search(queries, 10)[1].tobytes() == again.search(queries, 10)[1].tobytes()
        assert mapped.search(queries, 10)[0].tobytes() == again.search(queries, 10)[0].tobytes()
        del mapped
    with pytest.raises(kvsketch.Error, match="nothing-here"):
        kvsketch.IvfIndex.map("/nonexistent/nothing-here.kvivf")
    with pytest.raises(kvsketch.Error, match="ivf factory"):
        kvsketch.IvfIndex(32, "ivf:nlist=x")
    with pytest.raises(kvsketch.Error, match="before train"):
        kvsketch.IvfIndex(32, "ivf:nlist=4").add(x)


def test_ivf_shards_merge_to_the_answer_of_one_index():
    rng = np.random.default_rng(5)
    centres = rng.standard_normal((20, 16)).astype(np.float32) * 3
    x = (centres[np.arange(2000) % 20] + rng.standard_normal((2000, 16))).astype(np.float32)
    queries = x[:25] + 0.1
    factory = "ivf:nlist=20,nprobe=4,metric=l2,refine=int8,k_factor=2|tq_mse:b=2,rescale=1"
    whole = kvsketch.IvfIndex(16, factory)
    whole.train(x)
    trained = whole.to_bytes()
    whole.add(x)
    # Three shards from the trained bytes (as a Dask task or an MPI rank would make them).
    shards = [kvsketch.IvfIndex.from_bytes(trained) for _ in range(3)]
    for shard, rows in zip(shards, np.array_split(np.arange(2000), 3)):
        shard.add_with_ids(x[rows], rows.astype(np.int64))
    parts = [shard.candidates(queries, 10) for shard in shards]
    assert parts[0]["scan"].shape[0] == 25 and parts[0]["ids"].dtype == np.int64
    scores, ids = shards[0].merge(parts)
    expected_scores, expected_ids = whole.search(queries, 10)
    assert np.array_equal(ids, expected_ids) and np.array_equal(scores, expected_scores)
    with pytest.raises(ValueError, match="scan"):  # ids of another shape than the scores
        shards[0].merge([dict(parts[0], ids=np.ascontiguousarray(parts[0]["ids"][:, :5]))])
    with pytest.raises(kvsketch.Error, match="merge"):  # a part of another search's shape
        part = {name: np.ascontiguousarray(value[:, :5]) if name != "k" else value for name, value in parts[0].items()}
        shards[0].merge([part])
    with pytest.raises(kvsketch.Error):
        kvsketch.IvfIndex.from_bytes(trained[:-3])


def test_distortion_gives_the_papers_values():
    # TurboQuant_mse (Theorem 1): D_mse -> 0.36, 0.117, 0.03, 0.009 at b = 1..4 as d grows, the
    # Gaussian Lloyd-Max costs 0.3634, 0.1175, 0.03454, 0.009497 (the paper rounds them); at
    # d = 128 the coordinates' Beta law gives 1-3% less.
    for bits, cost in [(1, 0.3634), (2, 0.1175), (3, 0.03454), (4, 0.009497)]:
        d = kvsketch.distortion(f"tq_mse:b={bits}", dim=128, n=3000, queries=8)
        assert abs(d["mse"] - cost) < 0.04 * cost + 4 * d["mse_stderr"], (bits, d["mse"])
    # TurboQuant_prod is unbiased: the mean error is within a few standard errors of zero, and
    # tq_mse's shrinkage bias is not (its estimates are about (1 - D_mse) <y, x>: y = x shows it).
    prod = kvsketch.distortion("tq_prod:b=3", dim=128, n=3000, queries=16)
    assert abs(prod["bias"]) < 4 * prod["bias_stderr"] + 1e-4
    assert prod["bits_per_value"] > 3.0


def test_selection_cache_attends_through_its_selector():
    rng = np.random.default_rng(40)
    keys = rng.standard_normal((2, 600, 64)).astype(np.float32)
    values = rng.standard_normal((2, 600, 64)).astype(np.float32)
    queries = rng.standard_normal((4, 64)).astype(np.float32)
    policy = "tq_mse:b=4|tq_mse:b=4|window=32|block=16"
    everything = kvsketch.SelectionCache(2, 2, 64, policy, "topk:budget=1", seed=3)
    sampled = kvsketch.SelectionCache(2, 2, 64, policy, "magicpig:K=4,L=40", seed=3)
    dense = kvsketch.SelectionCache(2, 2, 64, policy, "magicpig:K=4,L=40", dense_layers={0}, seed=3)
    for cache in (everything, sampled, dense):
        for layer in (0, 1):
            for part in (slice(0, 100), slice(100, 600)):
                cache.append(layer, np.ascontiguousarray(keys[:, part]), np.ascontiguousarray(values[:, part]))
        assert cache.tokens(0) == 600
    assert dense.dense(0) and not dense.dense(1)
    # Selecting every body token is dense attention over the same codes in float arithmetic (the
    # paged cache of the same policy and seed holds the same codes); a dense layer takes the integer
    # kernels, which round the queries.
    paged = kvsketch.KVCache(2, 2, 64, policy, seed=3)
    s = paged.add_sequence()
    paged.append(s, 0, keys, values)
    float_out, float_lse = paged.attention(0, [s], queries[None], integer_arithmetic=False)
    all_out, all_lse = everything.attention(0, queries)
    assert np.allclose(all_out, float_out[0], atol=1e-6) and np.allclose(all_lse, float_lse[0], atol=1e-5)
    dense_out, dense_lse = dense.attention(0, queries)
    assert np.allclose(all_out, dense_out, atol=2e-2) and np.allclose(all_lse, dense_lse, atol=2e-2)
    # MagicPIG samples: near dense attention, not equal to it, and its index is counted.
    out, lse = sampled.attention(0, queries, draw=1)
    error = np.linalg.norm(out - all_out) / np.linalg.norm(all_out)
    assert 1e-4 < error < 0.5, error
    assert sampled.index_bytes() > 0 and everything.bytes() == sampled.bytes()
    with pytest.raises(kvsketch.Error, match="magicpig|selector"):
        kvsketch.SelectionCache(1, 2, 64, policy, "magicpig:K=0")
    with pytest.raises(ValueError, match="queries"):
        sampled.attention(0, queries[:, :32].copy())
    with pytest.raises(kvsketch.Error, match="layer"):
        sampled.append(5, keys[:, :4].copy(), values[:, :4].copy())
    assert sampled.tokens(0) == 600


def test_paged_selection_cache_follows_fork_and_answers_as_the_one_sequence_cache():
    rng = np.random.default_rng(41)
    keys = rng.standard_normal((2, 500, 64)).astype(np.float32)
    values = rng.standard_normal((2, 500, 64)).astype(np.float32)
    queries = rng.standard_normal((2, 4, 64)).astype(np.float32)
    policy = "tq_mse:b=3|window=32|block=16|page=64"
    served = kvsketch.PagedSelectionCache(2, 2, 64, policy, "magicpig:K=4,L=40", seed=3)
    single = kvsketch.SelectionCache(2, 2, 64, policy, "magicpig:K=4,L=40", seed=3)
    s = served.add_sequence()
    for layer in (0, 1):
        served.append(s, layer, keys[:, :300].copy(), values[:, :300].copy())
        single.append(layer, keys[:, :300].copy(), values[:, :300].copy())
    t = served.fork(s)
    for layer in (0, 1):
        served.append(s, layer, keys[:, 300:].copy(), values[:, 300:].copy())
        single.append(layer, keys[:, 300:].copy(), values[:, 300:].copy())
    assert served.tokens(s) == 500 and served.tokens(t) == 300
    assert served.indexed_tokens(s) == 464 and served.indexed_tokens(t) == 256
    # Without rollback one sequence has the one-sequence cache's bits; the fork its own answer.
    out, lse = served.attention(0, [s, t], queries, draw=2)
    want_out, want_lse = single.attention(0, queries[0], draw=2)
    assert np.array_equal(out[0], want_out) and np.array_equal(lse[0], want_lse)
    assert not np.allclose(out[1], out[0])
    assert served.index_bytes() > single.index_bytes()
    assert served.sequence_index_bytes(s) == single.index_bytes()
    served.remove_sequence(t)
    assert served.index_bytes() == single.index_bytes()
    with pytest.raises(kvsketch.Error, match="no sequence"):
        served.attention(0, [t], queries[:1].copy())
    with pytest.raises(ValueError, match="queries"):
        served.attention(0, [s], queries)
