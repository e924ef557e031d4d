"""Dynamic sizes in torch.compile(backend="tpu") run at their buckets: one program per
bucket per graph, results equal to the CPU's at every real size (padding never leaks
into reductions, softmax, norms, attention, losses, indexing or argmax)."""

import os
import subprocess
import sys

import pytest
import torch
from torch.nn import functional as F

import torch_tpu
from torch_tpu.compile import bucketed
from torch_tpu.compile.buckets import BucketPolicy

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from gpt import GPT, Config  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    bucketed.reset()
    yield
    torch._dynamo.reset()


def _graphs():
    return bucketed.snapshot()


def test_bucket_policy_default_is_the_next_power_of_two():
    policy = BucketPolicy()
    assert [policy.bucket(n) for n in (1, 2, 3, 17, 32, 33, 500)] == [1, 2, 4, 32, 32, 64, 512]


def test_bucket_policy_torchtpu_options_and_explicit_lists():
    ladder = BucketPolicy(bucket_size=16, num_dynamic_buckets=3)
    assert [ladder.bucket(n) for n in (1, 16, 17, 40, 64, 65)] == [16, 16, 32, 64, 64, 65]
    assert BucketPolicy(bucket_size=100).bucket(101) == 200
    listed = BucketPolicy(buckets=[48, 12])
    assert [listed.bucket(n) for n in (3, 12, 13, 48, 49)] == [12, 12, 48, 48, 49]
    with pytest.raises(ValueError, match="buckets"):
        BucketPolicy(buckets=[0, 4])
    with pytest.raises(ValueError, match="bucket_size"):
        BucketPolicy(bucket_size=-2)


def test_bad_bucket_options_are_refused_by_torch_compile():
    fn = torch.compile(lambda x: x + 1, backend="tpu", options={"num_dynamic_buckets": 9})
    with pytest.raises(Exception, match="num_dynamic_buckets"):
        fn(torch.ones(3, device="tpu"))


def _reductions(x, w):
    h = x @ w  # (b, s, 8): rows over the padded s
    return (
        h.sum(1),
        h.mean(1),
        h.amax(1),
        h.amin(dim=1),
        h.argmax(1),
        h.softmax(1),
        h.log_softmax(-1),
        F.layer_norm(h, (8,)),
        h.transpose(1, 2) @ h,  # contracts over the padded dimension
        h.reshape(-1, 8).sum(0),  # a dimension merging batch and sequence
        h[:, -1],  # the last real row
        h[:, 1:].sum(1),
        h.mean(),
        h.reshape(-1, 8),  # an output merging a padded dimension, cut back to real rows
    )


@pytest.mark.parametrize("lengths", [(5, 7, 12, 3, 16, 9)])
def test_reductions_over_a_padded_dimension_equal_the_cpu(lengths):
    torch.manual_seed(0)
    w = torch.randn(6, 8)
    fn = torch.compile(_reductions, backend="tpu", dynamic=True)
    for n in lengths:
        x = torch.randn(3, n, 6)
        expected = _reductions(x, w)
        got = fn(x.to("tpu"), w.to("tpu"))
        for e, g in zip(expected, got):
            assert g.shape == e.shape
            torch.testing.assert_close(g.cpu(), e, rtol=1e-5, atol=1e-5)
    graphs = [g for g in _graphs().values() if g["padded_calls"]]
    assert graphs, _graphs()
    for graph in graphs:
        # lengths 3..16 fall in buckets 4, 8 and 16 (and the batch 3 in 4).
        assert graph["programs"] <= 3, graph
        assert graph["not_bucketed"] == ""


def _train(model_on, x, y, lr=0.05):
    logits = model_on(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def test_a_dynamic_padding_training_loop_compiles_per_bucket_and_matches_the_cpu():
    torch.manual_seed(0)
    config = Config(vocab=32, context=64, width=32, heads=2, layers=2)
    cpu = GPT(config)
    tpu = GPT(config)
    tpu.load_state_dict(cpu.state_dict())
    tpu.to("tpu")
    # SGD: AdamW would turn the key bias's gradient, zero up to rounding (softmax
    # ignores a shift shared by all keys), into steps of +-lr either way.
    opt_cpu = torch.optim.SGD(cpu.parameters(), lr=0.2, momentum=0.9)
    opt_tpu = torch.optim.SGD(tpu.parameters(), lr=0.2, momentum=0.9)
    step = torch.compile(_train, backend="tpu", dynamic=True)
    generator = torch.Generator().manual_seed(1)
    lengths = [int(n) for n in torch.randint(3, 64, (24,), generator=generator)]
    torch_tpu.metrics.reset()
    for n in lengths:
        x = torch.randint(0, config.vocab, (4, n), generator=generator)
        y = torch.randint(0, config.vocab, (4, n), generator=generator)
        loss_cpu = _train(cpu, x, y)
        loss_cpu.backward()
        opt_cpu.step()
        opt_cpu.zero_grad()
        loss_tpu = step(tpu, x.to("tpu"), y.to("tpu"))
        loss_tpu.backward()
        opt_tpu.step()
        opt_tpu.zero_grad()
        torch.testing.assert_close(loss_tpu.cpu(), loss_cpu, rtol=2e-4, atol=2e-4)
    for name, p in cpu.named_parameters():
        torch.testing.assert_close(
            dict(tpu.named_parameters())[name].cpu(), p, rtol=1e-3, atol=1e-3
        )
    graphs = [g for g in _graphs().values() if g["padded_calls"]]
    assert len(graphs) >= 2, _graphs()  # the forward and the backward
    buckets = {BucketPolicy().bucket(n) for n in lengths}
    assert len(set(lengths)) > len(buckets)
    for graph in graphs:
        assert graph["programs"] <= len(buckets), graph


def test_an_operator_unsafe_over_padding_runs_at_exact_sizes_and_says_why():
    fn = torch.compile(lambda x: x.cumsum(1) * 2, backend="tpu", dynamic=True)
    for n in (3, 5, 6):
        x = torch.randn(2, n)
        torch.testing.assert_close(fn(x.to("tpu")).cpu(), x.cumsum(1) * 2)
    reasons = [g["not_bucketed"] for g in _graphs().values() if g["exact_calls"]]
    assert any("cumsum" in r for r in reasons), _graphs()


def test_the_recompile_log_names_the_size_and_its_bucket():
    code = (
        "import torch, torch_tpu\n"
        "fn = torch.compile(lambda x: x.softmax(-1), backend='tpu', dynamic=True)\n"
        "for n in (3, 5, 6, 9): fn(torch.ones(2, n, device='tpu'))\n"
        "g = torch.compile(lambda x: x.cumsum(1), backend='tpu', dynamic=True)\n"
        "for n in (3, 5): g(torch.ones(2, n, device='tpu'))\n"
    )
    env = dict(os.environ, TORCH_TPU_LOG_RECOMPILES="1", TORCH_TPU_CACHE_DIR="")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stderr.splitlines() if "a program for a new bucket" in line]
    assert any("L['x'].size()[1] = 5 in bucket 8" in line for line in lines), out.stderr
    assert not any("= 6 in bucket 8" in line for line in lines), out.stderr  # no new program
    assert "runs at exact sizes, a program per size: aten::cumsum" in out.stderr, out.stderr


def test_bucket_options_choose_the_buckets():
    fn = torch.compile(
        lambda x: x.softmax(-1).sum(-1), backend="tpu", dynamic=True, options={"buckets": [10, 40]}
    )
    for n in (4, 9, 11, 30):
        x = torch.randn(2, n)
        torch.testing.assert_close(fn(x.to("tpu")).cpu(), x.softmax(-1).sum(-1))
    buckets = set()
    for graph in _graphs().values():
        buckets |= {b for bucket in graph["buckets"] for b in bucket}
    assert {10, 40} <= buckets, _graphs()


def test_turning_buckets_off_runs_exact_sizes():
    code = (
        "import torch, torch_tpu\n"
        "from torch_tpu.compile import bucketed\n"
        "fn = torch.compile(lambda x: x.sum(1), backend='tpu', dynamic=True)\n"
        "for n in (3, 5): fn(torch.ones(2, n, device='tpu'))\n"
        "print(sorted(g['not_bucketed'] for g in bucketed.snapshot().values()))\n"
    )
    env = dict(os.environ, TORCH_TPU_DYNAMIC_BUCKETS="0")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "TORCH_TPU_DYNAMIC_BUCKETS=0" in out.stdout


def _next_token(model, idx):
    return model(idx)[:, -1].argmax(-1, keepdim=True)


def test_greedy_generation_over_varied_prompts_compiles_per_bucket_not_per_size():
    torch.manual_seed(0)
    config = Config(vocab=32, context=64, width=32, heads=2, layers=1)
    cpu = GPT(config).eval()
    tpu = GPT(config).eval()
    tpu.load_state_dict(cpu.state_dict())
    tpu.to("tpu")
    next_token = torch.compile(_next_token, backend="tpu", dynamic=True)
    generator = torch.Generator().manual_seed(2)
    policy = BucketPolicy()
    met = set()
    with torch.no_grad():
        for i in range(20):
            batch, length = 1 + i % 8, 3 + 2 * i
            idx_cpu = torch.randint(0, config.vocab, (batch, length), generator=generator)
            idx_tpu = idx_cpu.to("tpu")
            for _ in range(3):
                met.add((policy.bucket(idx_cpu.shape[0]), policy.bucket(idx_cpu.shape[1])))
                idx_cpu = torch.cat([idx_cpu, _next_token(cpu, idx_cpu)], 1)
                idx_tpu = torch.cat([idx_tpu, next_token(tpu, idx_tpu)], 1)
            assert torch.equal(idx_tpu.cpu(), idx_cpu), (batch, length)
    graphs = [g for g in _graphs().values() if g["padded_calls"]]
    assert graphs, _graphs()
    sizes = 20 * 3
    for graph in graphs:
        assert graph["programs"] <= len(met) < sizes, graph


def _lookup_loss(table, idx, x):
    # The forward is safe over padding; the backward of an embedding that scales
    # gradients by frequency is not (padded indices would count): the backward runs at
    # exact sizes on the forward's padded activations, cut back.
    rows = F.embedding(idx, table, scale_grad_by_freq=True)
    return (rows * x).sum()


def test_a_backward_at_exact_sizes_after_a_bucketed_forward_and_gradients_of_dynamic_inputs():
    torch.manual_seed(0)
    table = torch.randn(10, 4, requires_grad=True)
    table_tpu = table.detach().to("tpu").requires_grad_()
    fn = torch.compile(_lookup_loss, backend="tpu")  # sizes marked dynamic below
    for n in (3, 5, 7):
        idx = torch.randint(0, 10, (2, n))
        x = torch.randn(2, n, 4, requires_grad=True)
        x_tpu = x.detach().to("tpu").requires_grad_()
        idx_tpu = idx.to("tpu")
        torch._dynamo.mark_dynamic(idx_tpu, 1)
        torch._dynamo.mark_dynamic(x_tpu, 1)
        _lookup_loss(table, idx, x).backward()
        fn(table_tpu, idx_tpu, x_tpu).backward()
        assert x_tpu.grad.shape == x.grad.shape
        torch.testing.assert_close(x_tpu.grad.cpu(), x.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(table_tpu.grad.cpu(), table.grad, rtol=1e-5, atol=1e-5)
    graphs = _graphs().values()
    assert any(g["padded_calls"] for g in graphs), _graphs()
    assert any("scale_grad_by_freq" in g["not_bucketed"] for g in graphs), _graphs()


def test_a_hugging_face_llama_fine_tuning_loop_runs_bucketed_and_matches_the_cpu():
    """GQA, rotary embeddings, RMSNorm, SwiGLU, SDPA with Hugging Face's causal mask and
    its loss (labels shifted with F.pad): forward and backward bucketed."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = _tiny_llama(transformers)
    cpu = transformers.LlamaForCausalLM(config)
    tpu = transformers.LlamaForCausalLM(config)
    tpu.load_state_dict(cpu.state_dict())
    tpu.to("tpu")

    def step(model, ids):
        return model(input_ids=ids, labels=ids).loss

    compiled = torch.compile(step, backend="tpu", dynamic=True)
    opt_cpu = torch.optim.SGD(cpu.parameters(), lr=0.1)
    opt_tpu = torch.optim.SGD(tpu.parameters(), lr=0.1)
    lengths = (17, 23, 30, 9, 12, 40, 33)
    generator = torch.Generator().manual_seed(3)
    for n in lengths:
        ids = torch.randint(0, 64, (2, n), generator=generator)
        loss_cpu = step(cpu, ids)
        loss_cpu.backward()
        opt_cpu.step()
        opt_cpu.zero_grad()
        loss_tpu = compiled(tpu, ids.to("tpu"))
        loss_tpu.backward()
        opt_tpu.step()
        opt_tpu.zero_grad()
        torch.testing.assert_close(loss_tpu.cpu(), loss_cpu, rtol=1e-4, atol=1e-4)
    graphs = [g for g in _graphs().values() if g["padded_calls"]]
    assert len(graphs) == 2, _graphs()  # forward and backward, both bucketed
    for graph in graphs:
        assert graph["programs"] <= 3 and graph["exact_calls"] == 0, graph  # 16, 32, 64


def _positional(x, table):
    return (x + table[: x.shape[1]]).softmax(-1).sum(1)


def test_a_static_table_cut_to_a_dynamic_length_past_its_end_in_the_bucket():
    torch.manual_seed(0)
    table = torch.randn(40, 6)  # lengths up to 40 fit; their bucket (64) does not
    fn = torch.compile(_positional, backend="tpu")
    for n in (5, 9, 33, 40):
        x = torch.randn(2, n, 6)
        x_tpu = x.to("tpu")
        torch._dynamo.mark_dynamic(x_tpu, 1)
        got = fn(x_tpu, table.to("tpu"))
        torch.testing.assert_close(got.cpu(), _positional(x, table), rtol=1e-5, atol=1e-5)
    assert any(g["padded_calls"] for g in _graphs().values()), _graphs()


def _tiny_llama(transformers):
    return transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        attn_implementation="sdpa",
    )


def test_hugging_face_generate_over_varied_prompts_compiles_per_bucket_not_per_size():
    """generate() with its key/value cache: the prompt's forward and each decoded
    token's forward (the cache grown along a padded length) run bucketed; the tokens
    equal the CPU's."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = _tiny_llama(transformers)
    cpu = transformers.LlamaForCausalLM(config).eval()
    tpu = transformers.LlamaForCausalLM(config).eval()
    tpu.load_state_dict(cpu.state_dict())
    tpu.to("tpu")
    tpu.forward = torch.compile(tpu.forward, backend="tpu", dynamic=True)
    options = dict(max_new_tokens=2, do_sample=False, pad_token_id=0)  # the cache grows once
    generator = torch.Generator().manual_seed(4)
    policy = BucketPolicy()
    met, sizes = set(), set()
    for i in range(20):
        batch, length = 1 + i % 8, 3 + 2 * i  # 3..41: buckets 4, 8, 16, 32, 64
        for n in range(length, length + options["max_new_tokens"]):  # the cache grows
            met.add((policy.bucket(batch), policy.bucket(n)))
            sizes.add((batch, n))
        ids = torch.randint(1, 64, (batch, length), generator=generator)
        want = cpu.generate(ids, **options)
        got = tpu.generate(ids.to("tpu"), **options)
        assert torch.equal(got.cpu(), want), (ids.shape, got.cpu(), want)
    graphs = [g for g in _graphs().values() if g["padded_calls"]]
    assert graphs, _graphs()
    for graph in graphs:
        # A program per (batch bucket, length bucket) met, never one per size.
        assert graph["programs"] <= len(met) < len(sizes), (graph, len(met), len(sizes))
        assert graph["exact_calls"] == 0, graph


def _grow_and_read(cache, new, extra):
    # A cache grown along its padded length twice (by a static and by a dynamic part),
    # then read from its real end and reduced over it.
    grown = torch.cat([torch.cat([cache, new], 1), extra], 1)
    return grown[:, -2:].sum(1), grown.softmax(1).sum(-1), grown.amax(1)


def test_a_cache_grown_along_a_padded_dimension_equals_the_cpu():
    torch.manual_seed(0)
    fn = torch.compile(_grow_and_read, backend="tpu")
    for n, m in ((3, 2), (5, 6), (9, 3), (12, 7)):
        args = (torch.randn(2, n, 4), torch.randn(2, 1, 4), torch.randn(2, m, 4))
        moved = [a.to("tpu") for a in args]
        torch._dynamo.mark_dynamic(moved[0], 1)
        torch._dynamo.mark_dynamic(moved[2], 1)
        for got, want in zip(fn(*moved), _grow_and_read(*args)):
            torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    graphs = [g for g in _graphs().values() if g["padded_calls"]]
    assert graphs and all(g["exact_calls"] == 0 for g in graphs), _graphs()


def _gather_rows(x, rows, cols):
    # Negative positions count from the real end of the padded dimension.
    return x[:, rows] * 2, x[rows.abs() % 2, cols]


def test_integer_indexing_into_a_padded_dimension_counts_negative_indices_from_the_real_end():
    torch.manual_seed(0)
    fn = torch.compile(_gather_rows, backend="tpu")
    for n in (5, 6, 11):
        x = torch.randn(2, n, 3)
        rows = torch.tensor([-1, 0, -n, 2])
        cols = torch.tensor([1, -1, 0, -2])
        x_tpu = x.to("tpu")
        torch._dynamo.mark_dynamic(x_tpu, 1)
        for got, want in zip(
            fn(x_tpu, rows.to("tpu"), cols.to("tpu")), _gather_rows(x, rows, cols)
        ):
            torch.testing.assert_close(got.cpu(), want)
    graphs = [g for g in _graphs().values() if g["padded_calls"]]
    assert graphs and all(g["exact_calls"] == 0 for g in graphs), _graphs()


def _attend(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


def _assert_attention_matches_cpu(got, want, moved, originals):
    """Forward values and the inputs' gradients (of the output's squares) equal the CPU's."""
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    (got * got).sum().backward()
    (want * want).sum().backward()
    for a, b in zip(moved, originals):
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-5, atol=1e-5)


def _assert_one_bucketed_forward_and_backward():
    graphs = [g for g in _graphs().values() if g["programs"]]  # a forward, a backward
    assert len(graphs) == 2 and all(g["exact_calls"] == 0 for g in graphs), _graphs()
    assert all(g["programs"] == 3 for g in graphs), _graphs()  # buckets 4, 8, 16


@pytest.mark.parametrize("queries", ["one decoded token", "as many as the keys"])
def test_a_non_causal_attention_without_a_mask_over_padded_keys(queries):
    """The keys' padding becomes the mask (a decoded token over its cache, an encoder's
    self-attention): forward and gradients equal the CPU's."""
    torch.manual_seed(0)
    fn = torch.compile(_attend, backend="tpu")
    for n in (3, 5, 9):
        q = torch.randn(2, 2, 1 if queries == "one decoded token" else n, 8, requires_grad=True)
        k, v = (torch.randn(2, 2, n, 8, requires_grad=True) for _ in range(2))
        moved = [t.detach().to("tpu").requires_grad_() for t in (q, k, v)]
        for t in moved[int(queries == "one decoded token") :]:
            torch._dynamo.mark_dynamic(t, 2)
        _assert_attention_matches_cpu(fn(*moved), _attend(q, k, v), moved, (q, k, v))
    _assert_one_bucketed_forward_and_backward()


def _attend_grouped(q, k, v, causal):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "one decoded token"])
def test_grouped_query_attention_runs_bucketed_through_the_math_path(causal):
    """Keys with fewer heads than the queries (enable_gqa, as Hugging Face passes it)
    take PyTorch's math path: its causal mask (tril) and its check for rows of -inf
    scores (all) run padded; forward and gradients equal the CPU's."""
    torch.manual_seed(0)
    fn = torch.compile(_attend_grouped, backend="tpu")
    for n in (3, 5, 9):
        q = torch.randn(2, 4, n if causal else 1, 8, requires_grad=True)
        k, v = (torch.randn(2, 2, n, 8, requires_grad=True) for _ in range(2))
        moved = [t.detach().to("tpu").requires_grad_() for t in (q, k, v)]
        for t in moved[int(not causal) :]:
            torch._dynamo.mark_dynamic(t, 2)
        got, want = fn(*moved, causal), _attend_grouped(q, k, v, causal)
        _assert_attention_matches_cpu(got, want, moved, (q, k, v))
    _assert_one_bucketed_forward_and_backward()


def _from_position(x, table, start, column):
    # `start` and `column` are integers, not sizes: positions count from the real start,
    # and the column is read where the user points.
    positions = torch.arange(start, start + x.shape[1], device=x.device)
    return (x + table[positions]).softmax(1)[:, :, column]


def test_integer_arguments_are_values_not_sizes():
    """A decoding position passed as an int never gets a bucket: the graph reads its real
    value at run time (one program for every position) or, used as an index, runs at
    it; an earlier version padded it like a size and shifted the positions."""
    torch.manual_seed(0)
    table = torch.randn(64, 5)
    fn = torch.compile(_from_position, backend="tpu", dynamic=True)
    for n, start, column in ((3, 0, 1), (5, 7, 1), (6, 2, 1), (9, 30, 1), (4, 11, 3)):
        x = torch.randn(2, n, 5)
        got = fn(x.to("tpu"), table.to("tpu"), start, column)
        torch.testing.assert_close(got.cpu(), _from_position(x, table, start, column))
    graphs = [g for g in _graphs().values() if g["padded_calls"]]
    assert graphs and all(g["exact_calls"] == 0 for g in graphs), _graphs()
    # Buckets 4, 8 and 16 of the length, each column once: never a program per start.
    assert sum(g["programs"] for g in graphs) <= 4, _graphs()


def _first_columns(x, i):
    return x[:, :i].sum(1) * x.shape[0]


def test_the_recompile_log_says_an_integer_value_is_no_size(capfd):
    from torch_tpu import _C

    previous = _C._get_log_recompiles()
    _C._set_log_recompiles(True)
    try:
        fn = torch.compile(_first_columns, backend="tpu", dynamic=True)
        for n, i in ((3, 2), (5, 3)):
            x = torch.randn(n, 4)
            torch.testing.assert_close(fn(x.to("tpu"), i).cpu(), _first_columns(x, i))
    finally:
        _C._set_log_recompiles(previous)
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if "a program for a new bucket" in line]
    assert any("L['i'] = 3 (a value, not a size)" in line for line in lines), err
    assert any("L['x'].size()[0] = 5 in bucket 8" in line for line in lines), err
