"""The decoding cache and decode attention of the transformers policy: the reserved cache holds
exactly what transformers' DynamicCache holds, one decoded token under autocast attends as
float32 SDPA does on a left-padded batch, and replies sampled under bf16 autocast carry the
log-probs a plain forward pass under the same autocast gives."""

import logging

import pytest
import torch
import torch.nn.functional as F

from gagpo.agents.models import load_model
from gagpo.agents.policies import TransformersPolicy
from gagpo.agents.policies.base import Request
from gagpo.agents.policies.kv_cache import (
    ATTENTION,
    _gagpo_sdpa,
    cache_keyword,
    gagpo_attention,
    new_cache,
    returned_cache,
)

torch.set_num_threads(1)

pytestmark = pytest.mark.skipif(new_cache(1) is None, reason="transformers without cache layers")


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny", device="cpu")


def test_reserved_cache_holds_what_a_dynamic_cache_holds_through_drops_and_copies():
    from transformers import DynamicCache

    g = torch.Generator().manual_seed(0)
    reserved, dynamic = new_cache(reserve=3), DynamicCache()
    steps = [torch.randn(4, 2, 5, 8, generator=g)] + \
        [torch.randn(4, 2, 1, 8, generator=g) for _ in range(6)]  # past the reserve: regrows
    for t, kv in enumerate(steps):
        if t == 2:  # rows copied for shared prompts, then finished rows dropped
            for c in (reserved, dynamic):
                c.reorder_cache(torch.tensor([0, 0, 3, 1]))
        if t == 4:
            for c in (reserved, dynamic):
                c.batch_select_indices(torch.tensor([1, 3]))
            steps[t:] = [s[:2] for s in steps[t:]]
            kv = steps[t]
        for layer in range(2):
            got = reserved.update(kv + layer, -kv, layer)
            want = dynamic.update(kv + layer, -kv, layer)
            assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        assert reserved.get_seq_length() == dynamic.get_seq_length()


def test_one_token_under_autocast_attends_in_float32_and_prompts_as_before(tiny):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    module = tiny[0].model.layers[0].self_attn  # 4 query heads on 2 key/value heads
    g = torch.Generator().manual_seed(1)
    q = torch.randn(3, 4, 1, 16, generator=g)
    k, v = (torch.randn(3, 2, 9, 16, generator=g) for _ in range(2))
    v = v.bfloat16().float()  # values a bf16 projection gave (the cache keeps them widened)
    mask = torch.ones(3, 1, 1, 9, dtype=torch.bool)
    mask[1, ..., :4] = False  # a left-padded row
    exact, _ = sdpa_attention_forward(module, q, k, v, mask, scaling=0.25)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mine, _ = _gagpo_sdpa(module, q, k, v.bfloat16(), mask, scaling=0.25)
        cast, _ = sdpa_attention_forward(module, q, k, v, mask, scaling=0.25)
        prompt = torch.randn(3, 4, 9, 16, generator=g)
        full_mask = mask.expand(3, 1, 9, 9)
        assert torch.equal(_gagpo_sdpa(module, prompt, k, v, full_mask)[0],
                           sdpa_attention_forward(module, prompt, k, v, full_mask)[0])
    assert mine.dtype == torch.float32 and cast.dtype == torch.bfloat16
    torch.testing.assert_close(mine, exact, atol=1e-6, rtol=1e-5)
    assert not torch.allclose(cast.float(), exact, atol=1e-4)  # what autocast alone would do


def test_one_token_in_float32_attends_over_the_key_value_heads_as_sdpa_does(tiny, monkeypatch):
    """Without autocast too, a decoded token attends as SDPA over the repeated cache would,
    without repeating it and without transformers' SDPA wrapper, whose handling of grouped
    heads depends on its version (5.19 repeated the cache per query head at every step)."""
    import transformers.integrations.sdpa_attention as sdpa

    module = tiny[0].model.layers[0].self_attn
    g = torch.Generator().manual_seed(2)
    q = torch.randn(3, 4, 1, 16, generator=g)
    k, v = (torch.randn(3, 2, 9, 16, generator=g) for _ in range(2))
    mask = torch.ones(3, 1, 1, 9, dtype=torch.bool)
    mask[2, ..., :5] = False
    exact = F.scaled_dot_product_attention(q, sdpa.repeat_kv(k, 2), sdpa.repeat_kv(v, 2),
                                           attn_mask=mask, scale=0.25).transpose(1, 2)
    monkeypatch.setattr(sdpa, "repeat_kv", lambda *a: pytest.fail("the cache was repeated"))
    monkeypatch.setattr(sdpa, "sdpa_attention_forward",
                        lambda *a, **k: pytest.fail("transformers' SDPA decided"))
    mine, _ = _gagpo_sdpa(module, q, k, v, mask, scaling=0.25)
    assert mine.dtype == torch.float32
    torch.testing.assert_close(mine, exact, atol=1e-6, rtol=1e-5)


def test_packed_replies_attend_split_with_the_same_logprobs_and_gradients(tiny, monkeypatch):
    """A prompt and several packed replies (the update's passes): under gagpo_attention the
    prompt's rows attend causally with no mask and only the replies' rows under it, with the
    log-probs and gradients of plain SDPA under the whole mask."""
    import transformers.integrations.sdpa_attention as sdpa

    from gagpo.logprobs import reply_logprobs

    model, _ = tiny
    g = torch.Generator().manual_seed(3)
    vocab = model.config.vocab_size
    prompt = torch.randint(3, vocab, (23,), generator=g).tolist()
    replies = [torch.randint(3, vocab, (n,), generator=g).tolist() for n in (5, 8, 2)]

    def logprobs_and_grads() -> tuple[torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        logp, mask, _ = reply_logprobs(model, [prompt] * 3, replies, pad_id=0, packed=True)
        (logp * torch.arange(1, 4)[:, None]).sum().backward()  # rows weighted apart
        return logp.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    plain, plain_grads = logprobs_and_grads()
    calls = []
    forward = sdpa.sdpa_attention_forward

    def spy(module, query, key, value, attention_mask, **kwargs):
        calls.append((query.shape[2], key.shape[2], attention_mask is None))
        return forward(module, query, key, value, attention_mask, **kwargs)

    monkeypatch.setattr(sdpa, "sdpa_attention_forward", spy)
    with gagpo_attention(model) as switched:
        assert switched
        split, split_grads = logprobs_and_grads()
    layers = model.config.num_hidden_layers
    assert calls == [(23, 23, True), (15, 38, False)] * layers
    torch.testing.assert_close(split, plain, atol=1e-5, rtol=1e-5)
    assert len(split_grads) == len(plain_grads) > 0
    for a, b in zip(split_grads, plain_grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    assert model.config._attn_implementation == "sdpa"  # switched back


def test_decode_attention_is_switched_on_only_while_generating(tiny):
    model = tiny[0]
    assert model.config._attn_implementation == "sdpa"
    with gagpo_attention(model):
        assert model.config._attn_implementation == ATTENTION
    assert model.config._attn_implementation == "sdpa"
    with pytest.raises(RuntimeError), gagpo_attention(model):
        raise RuntimeError("generation failed")
    assert model.config._attn_implementation == "sdpa"  # restored on errors too


def test_replies_under_bf16_autocast_carry_a_forward_passes_logprobs(tiny):
    model, tok = tiny
    policy = TransformersPolicy(model, tok, temperature=1.0, max_new_tokens=20, batch_size=4,
                                seed=0)
    texts = ["hi", "find a red pair of running shoes " * 3, "hi", "what now? " * 12]
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        replies = policy.act([Request([{"role": "user", "content": t}]) for t in texts])
        for reply in replies:
            ids = torch.tensor([reply.prompt_token_ids + reply.token_ids])
            logits = model(input_ids=ids).logits[0].float()
            start = len(reply.prompt_token_ids)
            expected = F.log_softmax(logits[start - 1: -1], dim=-1).gather(
                -1, torch.tensor(reply.token_ids)[:, None])[:, 0]
            # bf16 rounding differs between one pass and token-by-token decoding, not more.
            torch.testing.assert_close(torch.tensor(reply.logprobs), expected, atol=0.1,
                                       rtol=0)
    assert model.config._attn_implementation == "sdpa"


def test_the_cache_a_pass_returns_is_read_under_the_name_transformers_gives_it(tiny):
    """A forward pass's cache comes back, the very object the pass filled, under transformers'
    current name where the output has it (reading the old name logs a deprecation notice) and
    under the old name on an output that has only that one (older transformers)."""
    model, _ = tiny
    cache = new_cache(4)
    with torch.no_grad():
        out = model(input_ids=torch.tensor([[5, 6, 7]]), use_cache=True,
                    **{cache_keyword(model): cache})
    notices: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = notices.append
    library = logging.getLogger("transformers")
    library.addHandler(handler)
    forget = getattr(getattr(logging.Logger, "warning_once", None), "cache_clear", None)
    if forget:  # transformers logs each notice once a process: forget those logged already
        forget()
    try:
        assert returned_cache(out) is cache and cache.get_seq_length() == 3
    finally:
        library.removeHandler(handler)
    assert not [n for n in notices if "deprecated" in n.getMessage()]

    class OldOutput:
        past_key_values = cache

    class NoCache:
        pass

    assert returned_cache(OldOutput()) is cache and returned_cache(NoCache()) is None
