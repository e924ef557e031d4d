"""Hugging Face transformers models on tpu with no CPU fallback: tiny random-weight GPT-2,
Llama, Qwen3, BERT, ViT and T5 built from configs (nothing is downloaded), moved to tpu with
`.to("tpu")`, and compared with the same model on the CPU: logits, the gradients of a loss,
and greedy `generate()` token ids. TORCH_TPU_CPU_FALLBACK is "error" throughout, so an op
without a native lowering fails the test instead of quietly running on the CPU."""

import copy
import os

import pytest
import torch

os.environ["HF_HUB_OFFLINE"] = "1"  # models come from configs; never reach the hub
transformers = pytest.importorskip("transformers")

TPU = "tpu"
VOCAB = 96
# Special tokens inside the tiny vocabulary, so generation's end-of-sequence checks run.
TOKENS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)
# float32 all the way: the programs differ only in XLA's summation order.
ATOL = RTOL = 1e-4


def _gpt2():
    config = transformers.GPT2Config(
        n_layer=2, n_embd=32, n_inner=64, n_head=4, vocab_size=VOCAB, n_positions=32, **TOKENS
    )
    return transformers.GPT2LMHeadModel(config)


def _llama():
    config = transformers.LlamaConfig(
        num_hidden_layers=2,
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,  # grouped-query attention
        vocab_size=VOCAB,
        max_position_embeddings=32,
        **TOKENS,
    )
    return transformers.LlamaForCausalLM(config)


def _qwen3():
    config = transformers.Qwen3Config(
        num_hidden_layers=2,
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        vocab_size=VOCAB,
        max_position_embeddings=32,
        **TOKENS,
    )
    return transformers.Qwen3ForCausalLM(config)


def _bert():
    config = transformers.BertConfig(
        num_hidden_layers=2,
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=4,
        vocab_size=VOCAB,
        max_position_embeddings=32,
        pad_token_id=0,
    )
    return transformers.BertForMaskedLM(config)


def _vit():
    config = transformers.ViTConfig(
        num_hidden_layers=2,
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=4,
        image_size=16,
        patch_size=4,
        num_labels=5,
    )
    return transformers.ViTForImageClassification(config)


def _t5():
    config = transformers.T5Config(
        num_layers=2,
        num_decoder_layers=2,
        d_model=32,
        d_ff=64,
        d_kv=8,
        num_heads=4,
        vocab_size=VOCAB,
        decoder_start_token_id=0,
        pad_token_id=0,
        eos_token_id=1,
    )
    return transformers.T5ForConditionalGeneration(config)


MODELS = {"gpt2": _gpt2, "llama": _llama, "qwen3": _qwen3, "bert": _bert, "vit": _vit, "t5": _t5}
GENERATIVE = ("gpt2", "llama", "qwen3", "t5")


# Every test fails if anything falls back to the CPU (the `native` fixture, conftest.py).
pytestmark = pytest.mark.usefixtures("native")


def _models(name):
    """The model on the CPU (eval mode, so dropout is off) and a copy moved to tpu."""
    torch.manual_seed(0)
    cpu = MODELS[name]().eval()
    return cpu, copy.deepcopy(cpu).to(TPU)


def _inputs(name):
    """A batch of two with labels; text batches pad the second row (left for decoder-only
    models, as for generation, right for the encoders), so attention masks matter."""
    gen = torch.Generator().manual_seed(1)
    if name == "vit":
        return {
            "pixel_values": torch.randn(2, 3, 16, 16, generator=gen),
            "labels": torch.tensor([1, 3]),
        }
    ids = torch.randint(3, VOCAB, (2, 7), generator=gen)
    mask = torch.ones_like(ids)
    if name in ("gpt2", "llama", "qwen3"):
        mask[1, :2] = 0
        ids[1, :2] = TOKENS["pad_token_id"]
        labels = ids.masked_fill(mask == 0, -100)
    else:
        mask[1, -2:] = 0
        ids[1, -2:] = 0
        labels = ids.masked_fill(mask == 0, -100)
    if name == "t5":
        # as long as the input, so the decoder reuses the encoder's programs
        labels = torch.randint(3, VOCAB, (2, 7), generator=gen)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _to_tpu(batch):
    return {key: value.to(TPU) for key, value in batch.items()}


@pytest.mark.parametrize("name", MODELS)
def test_forward_and_backward_match_cpu(name):
    cpu, tpu = _models(name)
    batch = _inputs(name)
    expected = cpu(**batch)
    actual = tpu(**_to_tpu(batch))
    assert actual.logits.device.type == TPU
    torch.testing.assert_close(actual.logits.cpu(), expected.logits, atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(actual.loss.cpu(), expected.loss, atol=ATOL, rtol=RTOL)

    expected.loss.backward()
    actual.loss.backward()
    tpu_parameters = dict(tpu.named_parameters())
    compared = 0
    for key, parameter in cpu.named_parameters():
        if parameter.grad is None:
            continue
        grad = tpu_parameters[key].grad
        assert grad is not None and grad.device.type == TPU, key
        torch.testing.assert_close(grad.cpu(), parameter.grad, atol=ATOL, rtol=RTOL, msg=key)
        compared += 1
    assert compared >= 10


@pytest.mark.parametrize("name", GENERATIVE)
def test_greedy_generate_matches_cpu(name):
    cpu, tpu = _models(name)
    batch = _inputs(name)
    prompt = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    settings = dict(max_new_tokens=5, do_sample=False, pad_token_id=0)
    expected = cpu.generate(**prompt, **settings)
    actual = tpu.generate(**_to_tpu(prompt), **settings)
    assert actual.device.type == TPU
    assert actual.tolist() == expected.tolist()
    # the comparison means something only if the model produced more than padding
    new_tokens = expected[:, -5:] if name != "t5" else expected[:, 1:]
    assert (new_tokens != 0).any()


def test_beam_search_matches_cpu():
    # beam bookkeeping adds topk over beams * vocab and floor division of the flat indices
    cpu, tpu = _models("llama")
    batch = _inputs("llama")
    # one prompt in two beams runs the model at batch 2, reusing the greedy test's programs
    prompt = {"input_ids": batch["input_ids"][:1], "attention_mask": batch["attention_mask"][:1]}
    settings = dict(max_new_tokens=4, num_beams=2, do_sample=False, pad_token_id=0)
    expected = cpu.generate(**prompt, **settings)
    assert tpu.generate(**_to_tpu(prompt), **settings).tolist() == expected.tolist()


def test_top_k_top_p_sampling_runs_natively_and_follows_the_seed():
    # random draws come from the tpu generator, so they differ from the CPU's: check the
    # result's form and that the device seed reproduces it
    _, tpu = _models("gpt2")
    prompt = _to_tpu({key: value for key, value in _inputs("gpt2").items() if key != "labels"})
    settings = dict(
        max_new_tokens=4, do_sample=True, top_k=20, top_p=0.9, temperature=0.8, pad_token_id=0
    )
    torch.tpu.manual_seed(3)
    first = tpu.generate(**prompt, **settings)
    torch.tpu.manual_seed(3)
    second = tpu.generate(**prompt, **settings)
    assert first.device.type == TPU and first.shape[0] == 2 and 7 < first.shape[1] <= 11
    assert torch.equal(first[:, :7].cpu(), prompt["input_ids"].cpu())
    assert int(first.min()) >= 0 and int(first.max()) < VOCAB
    assert first.tolist() == second.tolist()


@pytest.mark.parametrize("name", ["gpt2", "bert", "t5"])
def test_tied_weights_stay_tied_on_tpu(name):
    # `.to("tpu")` keeps each Parameter object, so the input embedding and the output layer
    # remain one tensor (and one gradient), as on the CPU
    cpu, tpu = _models(name)
    assert tpu.get_output_embeddings().weight is tpu.get_input_embeddings().weight
    assert cpu.get_output_embeddings().weight is cpu.get_input_embeddings().weight
