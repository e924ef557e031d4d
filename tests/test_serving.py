"""vLLM on the tpu device (torch_tpu.serving): offline LLM() and the OpenAI server, on small
models made here from configs (torch_tpu.serving.local_models), checked against Hugging Face's
greedy generate on the CPU.

Each engine runs in a process of its own (vLLM sets process-wide state), with short timeouts
so a hang fails in seconds, and the server's process group is killed at the end.
"""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
import torch
from ports import free_port

vllm = pytest.importorskip("vllm", reason="vLLM is installed by scripts/setup.sh --test")
transformers = pytest.importorskip("transformers")

from torch_tpu.serving import local_models  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPTS = [
    [329, 71, 223, 280, 351, 283, 281, 380, 284, 364],
    [35, 260, 321, 223, 347, 259, 315],
    [41, 5, 19, 200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211, 212, 213],
]
NEW_TOKENS = 12


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {arch: local_models.make_model(str(root / arch), arch) for arch in ("llama", "qwen2")}


def hugging_face_greedy(model_dir, prompts, new_tokens=NEW_TOKENS, dtype=torch.float32):
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    outputs = []
    for prompt in prompts:
        ids = torch.tensor([prompt])
        generated = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
        )
        outputs.append(generated[0, len(prompt) :].tolist())
    return outputs


def assert_near_greedy_in_bfloat16(model_dir, prompts, generated):
    """In bfloat16 two correct implementations may break a near-tie differently and then
    follow different continuations, so each served token is checked against Hugging Face's
    bfloat16 logits given the same prefix (teacher forcing): it must be the argmax, or within
    bfloat16 rounding (1/64 of the largest logit) of it."""
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    for prompt, tokens in zip(prompts, generated):
        assert len(tokens) == NEW_TOKENS
        sequence = torch.tensor([prompt + tokens])
        with torch.no_grad():
            logits = model(sequence).logits[0].float()
        for step, token in enumerate(tokens):
            row = logits[len(prompt) - 1 + step]
            assert row[token] >= row.max() - row.abs().max() / 64, (prompt, step, token)


def environment(tmp_path):
    # A cache directory of the test's own: programs counted as compiled are compiled here.
    return dict(os.environ, PYTHONPATH=ROOT, TORCH_TPU_CACHE_DIR=str(tmp_path / "programs"))


@pytest.mark.parametrize(
    "arch,mode",
    [("llama", "eager"), ("llama", "compiled"), ("qwen2", "eager"), ("llama", "bf16")],
)
def test_offline_llm_matches_hugging_face_and_compiles_nothing_after_warm_up(
    models, arch, mode, tmp_path
):
    run = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tests", "vllm_offline_run.py"), models[arch], mode]
        + [json.dumps(PROMPTS)],
        env=environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert run.returncode == 0 and lines, run.stderr[-4000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    if mode == "bf16":
        assert_near_greedy_in_bfloat16(models[arch], PROMPTS, result["tokens"])
    else:
        assert result["tokens"] == hugging_face_greedy(models[arch], PROMPTS)
    # 20 requests of mixed prompt and output lengths after warm-up: every step's sizes were
    # padded to buckets that warm-up compiled.
    assert result["compiles_after_warm_up"] == 0
    # A seeded sampled request draws the same tokens again.
    first, second = result["seeded_samples"]
    assert first == second and len(first) == 8
    # The second of two identical 70-token prompts reuses its four full 16-token blocks.
    assert result["prefix_cache_hits"] >= 64


def test_tensor_parallel_over_two_devices_gives_the_same_tokens(models, tmp_path):
    run = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tests", "vllm_offline_run.py"), models["llama"]]
        + ["tp2", json.dumps(PROMPTS)],
        env=dict(environment(tmp_path), TORCH_TPU_CPU_DEVICES="2"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert run.returncode == 0 and lines, run.stderr[-4000:]
    tokens = json.loads(lines[-1][len("RESULT ") :])["tokens"]
    assert tokens == hugging_face_greedy(models["llama"], PROMPTS)


class Server:
    def __init__(self, model_dir, tmp_path, extra=()):
        self.port = free_port()
        self.events_port = free_port()
        self.model = model_dir
        self.log = open(tmp_path / "server.log", "w")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model",
                model_dir,
                "--port",
                str(self.port),
                "--dtype",
                "float32",
                "--max-model-len",
                "128",
                "--max-num-seqs",
                "8",
                "--max-num-batched-tokens",
                "64",
                # The KV cache sized from the device's memory statistics: a quarter of a 1 GiB
                # device (TORCH_TPU_HBM_BYTES below) less the forward pass's peak.
                "--gpu-memory-utilization",
                "0.25",
                "--enforce-eager",
                "--kv-events-config",
                json.dumps(
                    {
                        "enable_kv_cache_events": True,
                        "publisher": "zmq",
                        "endpoint": f"tcp://*:{self.events_port}",
                        "topic": "kv",
                    }
                ),
                *extra,
            ],
            env=dict(environment(tmp_path), TORCH_TPU_HBM_BYTES=str(1 << 30)),
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the engine core dies with it
        )

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def wait_ready(self, timeout=240):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the server exited: {self.tail()}")
            try:
                with urllib.request.urlopen(self.url("/health"), timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(1)
        raise AssertionError(f"the server did not come up in {timeout} s: {self.tail()}")

    def tail(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()[-4000:]

    def post(self, path, body, timeout=60):
        request = urllib.request.Request(
            self.url(path),
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def metric(self, name):
        with urllib.request.urlopen(self.url("/metrics"), timeout=10) as response:
            text = response.read().decode()
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith(name + "{") or line.startswith(name + " ")
        )

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self.log.close()


@pytest.fixture
def server(models, tmp_path):
    running = Server(models["llama"], tmp_path)
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


def test_openai_server_serves_chat_streams_metrics_kv_events_and_bad_requests(server, models):
    import zmq
    from msgspec.msgpack import Decoder
    from vllm.distributed.kv_events import BlockStored, KVEventBatch

    context = zmq.Context()
    events = context.socket(zmq.SUB)
    events.connect(f"tcp://127.0.0.1:{server.events_port}")
    events.setsockopt(zmq.SUBSCRIBE, b"kv")
    time.sleep(0.5)  # the subscription reaches the publisher

    # Completions from token ids: greedy output equals Hugging Face's.
    expected = hugging_face_greedy(models["llama"], PROMPTS[:2])
    for prompt, tokens in zip(PROMPTS[:2], expected):
        status, body = server.post(
            "/v1/completions",
            {
                "model": server.model,
                "prompt": prompt,
                "max_tokens": NEW_TOKENS,
                "temperature": 0,
                "ignore_eos": True,
                "return_token_ids": True,
            },
        )
        assert status == 200, body
        assert json.loads(body)["choices"][0]["token_ids"] == tokens

    # Chat, streamed: server-sent events ending with [DONE] and a finish reason.
    status, body = server.post(
        "/v1/chat/completions",
        {
            "model": server.model,
            "messages": [{"role": "user", "content": "Hello world"}],
            "max_tokens": 6,
            "temperature": 0,
            "stream": True,
        },
    )
    assert status == 200, body
    chunks = [line[len("data: ") :] for line in body.splitlines() if line.startswith("data: ")]
    assert chunks[-1] == "[DONE]"
    finishes = [json.loads(c)["choices"][0].get("finish_reason") for c in chunks[:-1]]
    assert finishes[-1] in ("length", "stop")

    # Prefix caching: the same long prompt again hits its cached blocks.
    long_prompt = list(range(10, 80))
    hits = server.metric("vllm:prefix_cache_hits_total")
    for _ in range(2):
        status, body = server.post(
            "/v1/completions",
            {"model": server.model, "prompt": long_prompt, "max_tokens": 2, "temperature": 0},
        )
        assert status == 200, body
    assert server.metric("vllm:prefix_cache_hits_total") - hits >= 64
    assert server.metric("vllm:kv_cache_usage_perc") >= 0
    server.log.flush()
    with open(server.log.name) as log:
        assert "GiB allowed" in log.read()  # the worker's measurement of device memory

    # KV events: the blocks the requests stored were published (what llm-d's routing reads).
    decoder = Decoder(type=KVEventBatch)
    stored = False
    deadline = time.monotonic() + 10
    while not stored and time.monotonic() < deadline:
        if events.poll(timeout=500):
            _, _, payload = events.recv_multipart()
            stored = any(isinstance(e, BlockStored) for e in decoder.decode(payload).events)
    events.close(linger=0)
    context.term()
    assert stored

    # Bad requests get vLLM's errors, and the server goes on serving.
    too_long = list(range(3, 203))  # 200 tokens, over --max-model-len 128
    status, body = server.post(
        "/v1/completions", {"model": server.model, "prompt": too_long, "max_tokens": 4}
    )
    assert status == 400, body
    assert "maximum context length" in body or "context length" in body, body

    status, body = server.post(
        "/v1/completions", {"model": "no-such-model", "prompt": "Hello", "max_tokens": 4}
    )
    assert status == 404, body
    assert "does not exist" in body, body

    status, body = server.post(
        "/v1/completions",
        {"model": server.model, "prompt": "Hello world", "max_tokens": 4, "temperature": 0},
    )
    assert status == 200, body
    assert json.loads(body)["usage"]["completion_tokens"] == 4
