"""The transformers policy on the tiny model: a deterministic build, log-probs equal to a
separate forward pass, batched = unbatched greedy decoding, identical prompts prefilled once,
and scoring that picks the most likely admissible action."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from gagpo.agents.models import (
    TAG_TOKENS,
    build_tiny_model,
    build_tiny_tokenizer,
    fingerprint,
    load_model,
)
from gagpo.agents.policies import Policy, TransformersPolicy
from gagpo.agents.policies.base import Reply, Request
from gagpo.agents.policies.hf import draw, pack_identical, prefill_plan, trie_tokens
from gagpo.agents.react import ReActAgent

torch.set_num_threads(1)  # 2 threads are 10-25x slower for small models here (stack.md)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny", device="cpu")


def chat(text):
    return [{"role": "user", "content": text}]


def requests_of(*texts, actions=("click[buy now]",), instruction="red shoes"):
    return [Request(chat(t), list(actions), {"instruction": instruction}) for t in texts]


PROMPTS = ["hi", "find a red pair of running shoes " * 3, "what now? " * 12]


def forward_logprobs(model, prompt, reply, temperature=1.0):
    """log_softmax(logits / T) of ``reply``'s tokens after ``prompt``: one plain forward pass
    over the unpadded sequence, independent of the policy's code."""
    ids = torch.tensor([prompt + reply])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    logp = F.log_softmax(logits[len(prompt) - 1: -1] / temperature, dim=-1)
    return logp.gather(-1, torch.tensor(reply)[:, None])[:, 0]


# --- the tiny model -------------------------------------------------------------------------

def test_tiny_build_is_deterministic(tiny):
    tok_a, tok_b = build_tiny_tokenizer(), build_tiny_tokenizer()
    state = torch.get_rng_state()
    model_a, model_b = build_tiny_model(tok_a), build_tiny_model(tok_b)
    assert torch.equal(state, torch.get_rng_state())  # the caller's RNG is left alone
    assert fingerprint(model_a, tok_a) == fingerprint(model_b, tok_b)
    # The cached copy loads as the same model and tokenizer.
    model, tok = tiny
    for name, tensor in model_a.state_dict().items():
        assert torch.equal(tensor, model.state_dict()[name]), name
    text = "<|im_start|>user\nsearch[red shoes] <think>hm</think><action>look</action><|im_end|>"
    assert tok(text)["input_ids"] == tok_a(text)["input_ids"]
    # Another process (its own hash seed, its own RNG) builds the very same thing.
    code = ("from gagpo.agents.models import build_tiny_model as m, build_tiny_tokenizer as t, "
            "fingerprint; k = t(); print(fingerprint(m(k), k))")
    env = {**os.environ, "PYTHONHASHSEED": "12345", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == fingerprint(model_a, tok_a)


def test_tiny_tokenizer(tiny):
    _, tok = tiny
    assert tok.padding_side == "left"
    assert tok.pad_token_id is not None and tok.pad_token_id != tok.eos_token_id
    for tag in TAG_TOKENS:  # the reply format's tags are single tokens
        assert len(tok(tag, add_special_tokens=False)["input_ids"]) == 1
    text = tok.apply_chat_template(chat("hello"), tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
    batch = tok(["a", "a b c d"], padding=True)
    assert batch["attention_mask"][0][0] == 0  # padded on the left
    assert tok.decode(tok("Café › 12 oz")["input_ids"]) == "Café › 12 oz"  # byte-level


def test_policy_keeps_the_interface(tiny):
    # Policy's contract: one Reply per request, in the requests' order, in both modes.
    for mode in ("generate", "score"):
        policy = TransformersPolicy(*tiny, mode=mode, temperature=0, max_new_tokens=8,
                                    batch_size=2)
        assert isinstance(policy, Policy) and policy.act([]) == []
        reqs = requests_of(*PROMPTS, actions=["click[buy now]", "click[back to search]"])
        forward, backward = policy.act(reqs), policy.act(reqs[::-1])
        assert len(forward) == len(reqs)
        assert [r.token_ids for r in backward] == [r.token_ids for r in forward][::-1]
        for req, reply in zip(reqs, forward, strict=True):
            assert isinstance(reply, Reply) and reply.token_ids
            assert reply.prompt_token_ids == policy.prompt_ids(req.messages)
            assert len(reply.logprobs) == len(reply.token_ids)
            if mode == "score":
                assert reply.text.endswith(("click[buy now]</action>",
                                            "click[back to search]</action>"))
    with pytest.raises(ValueError):
        TransformersPolicy(*tiny, mode="beam")
    with pytest.raises(ValueError):
        TransformersPolicy(*tiny, top_p=0.0)


# --- generation -----------------------------------------------------------------------------

@pytest.mark.parametrize("temperature, top_p", [(1.0, 1.0), (0.7, 0.9), (0.0, 1.0)])
def test_generation_logprobs_equal_a_separate_forward_pass(tiny, temperature, top_p):
    model, tok = tiny
    policy = TransformersPolicy(model, tok, temperature=temperature, top_p=top_p,
                                max_new_tokens=24, batch_size=3, seed=0)
    replies = policy.act(requests_of(*PROMPTS))
    for req, reply in zip(requests_of(*PROMPTS), replies, strict=True):
        assert reply.prompt_token_ids == policy.prompt_ids(req.messages)
        assert 0 < len(reply.token_ids) <= 24 and len(reply.logprobs) == len(reply.token_ids)
        expected = forward_logprobs(model, reply.prompt_token_ids, reply.token_ids,
                                    temperature or 1.0)
        torch.testing.assert_close(torch.tensor(reply.logprobs), expected, atol=1e-4, rtol=0)
        assert reply.text == tok.decode(reply.token_ids, skip_special_tokens=True)
        # Nothing after the first end-of-sequence token.
        eos = [i for i, t in enumerate(reply.token_ids) if t == tok.eos_token_id]
        assert eos in ([], [len(reply.token_ids) - 1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_generation_on_cuda_matches_a_forward_pass():
    model, tok = load_model("tiny", device="cuda")
    policy = TransformersPolicy(model, tok, temperature=0.8, max_new_tokens=16, seed=0)
    a, b = policy.act(requests_of(*PROMPTS)), TransformersPolicy(
        model, tok, temperature=0.8, max_new_tokens=16, seed=0).act(requests_of(*PROMPTS))
    assert [r.token_ids for r in a] == [r.token_ids for r in b]
    cpu = model.to("cpu")
    for reply in a:
        expected = forward_logprobs(cpu, reply.prompt_token_ids, reply.token_ids, 0.8)
        torch.testing.assert_close(torch.tensor(reply.logprobs), expected, atol=1e-3, rtol=0)
    scored = TransformersPolicy(cpu.to("cuda"), tok, mode="score", temperature=1.0, seed=0).act(
        requests_of("hi", actions=["click[a]", "click[b]"]))
    assert scored[0].text.endswith(("click[a]</action>", "click[b]</action>"))


def test_batched_greedy_equals_unbatched(tiny):
    policy = TransformersPolicy(*tiny, temperature=0, max_new_tokens=20, batch_size=8)
    reqs = requests_of(*PROMPTS, "x", "y " * 40)
    batched = policy.act(reqs)
    for req, reply in zip(reqs, batched, strict=True):
        (alone,) = policy.act([req])
        assert alone.token_ids == reply.token_ids and alone.text == reply.text
        torch.testing.assert_close(torch.tensor(alone.logprobs), torch.tensor(reply.logprobs),
                                   atol=1e-5, rtol=0)


def test_sampling_is_seeded(tiny):
    reqs = requests_of(*PROMPTS)
    a = TransformersPolicy(*tiny, seed=7, max_new_tokens=16).act(reqs)
    b = TransformersPolicy(*tiny, seed=7, max_new_tokens=16).act(reqs)
    c = TransformersPolicy(*tiny, seed=8, max_new_tokens=16).act(reqs)
    assert [r.token_ids for r in a] == [r.token_ids for r in b]
    assert [r.token_ids for r in a] != [r.token_ids for r in c]


def test_draw_picks_each_index_as_often_as_its_weight_and_never_a_zero_weight():
    """The sampler's draw: per row, index i with probability w_i / sum(w), rows independent,
    zero weights (top-p's cut, padding of a row's end) never drawn; a seed draws the same."""
    weights = torch.tensor([[0.0, 0.5, 0.0, 0.3, 0.2, 0.0],   # zeros between and at the end
                            [4.0, 0.0, 0.0, 0.0, 0.0, 1.0]])  # unnormalised
    rows = weights.repeat(20_000, 1)
    picks = draw(rows, torch.rand(40_000, generator=torch.Generator().manual_seed(0))
                 ).view(20_000, 2)
    for r in range(2):
        counts = torch.bincount(picks[:, r], minlength=6).float()
        expected = weights[r] / weights[r].sum() * 20_000
        assert torch.all(counts[weights[r] == 0] == 0)
        # within 5 standard deviations of the binomial count
        sd = (expected * (1 - expected / 20_000)).sqrt()
        assert torch.all((counts - expected).abs() <= 5 * sd + 1e-6), (r, counts, expected)
    again = draw(rows, torch.rand(40_000, generator=torch.Generator().manual_seed(0))
                 ).view(20_000, 2)
    assert torch.equal(picks, again)
    # A row whose whole mass sits on its last index, or on its first.
    ends = torch.tensor([[0.0, 0.0, 1e-30], [1.0, 0.0, 0.0]]).repeat(1000, 1)
    assert draw(ends, torch.rand(2000)).tolist() == [2, 0] * 1000
    # The uniform picks the index: the first whose cumulative share passes it.
    quarters = torch.tensor([[1.0, 1.0, 1.0, 1.0]]).repeat(4, 1)
    assert draw(quarters, torch.tensor([0.0, 0.26, 0.5, 0.99])).tolist() == [0, 1, 2, 3]


def test_top_p_keeps_draws_in_the_nucleus(tiny):
    model, tok = tiny
    prompt = TransformersPolicy(model, tok).prompt_ids(chat("hi"))
    with torch.no_grad():
        probs = model(input_ids=torch.tensor([prompt])).logits[0, -1].softmax(-1)
    top = int(probs.argmax())
    # A nucleus smaller than the most likely token's mass holds that token alone.
    policy = TransformersPolicy(model, tok, top_p=float(probs[top]) / 2, max_new_tokens=1, seed=0)
    draws = {policy.generate_ids([prompt])[0][0][0] for _ in range(20)}
    assert draws == {top}
    wide = TransformersPolicy(model, tok, top_p=1.0, max_new_tokens=1, seed=0)
    assert len({wide.generate_ids([prompt])[0][0][0] for _ in range(20)}) > 1


def test_stop_strings_end_the_reply(tiny):
    model, tok = tiny
    free = TransformersPolicy(model, tok, temperature=0, max_new_tokens=30).act(
        requests_of("hi"))[0]
    assert len(free.token_ids) > 6
    stop = tok.decode(free.token_ids[4:6], skip_special_tokens=True)
    stopped = TransformersPolicy(model, tok, temperature=0, max_new_tokens=30, stop=[stop]).act(
        requests_of("hi"))[0]
    assert stopped.token_ids == free.token_ids[: len(stopped.token_ids)]
    assert stop in stopped.text and stop not in tok.decode(stopped.token_ids[:-1])
    assert len(stopped.token_ids) <= 6


# --- shared prefill -------------------------------------------------------------------------

def test_identical_prompts_are_prefilled_once_and_sampled_independently(tiny):
    model, tok = tiny
    policy = TransformersPolicy(model, tok, temperature=0.7, max_new_tokens=16, batch_size=8,
                                seed=0)
    replies = policy.act(requests_of(*[PROMPTS[1]] * 8))
    stats = policy.stats
    assert (stats.prompts, stats.prefills, stats.shared_prompts) == (8, 1, 8)
    assert stats.prefill_tokens * 8 == stats.prompt_tokens
    assert stats.new_tokens == sum(len(r.token_ids) for r in replies)
    # Each copy samples its own reply from its own copy of the cache.
    assert len({tuple(r.token_ids) for r in replies}) > 4
    for reply in replies:
        expected = forward_logprobs(model, reply.prompt_token_ids, reply.token_ids, 0.7)
        torch.testing.assert_close(torch.tensor(reply.logprobs), expected, atol=1e-4, rtol=0)


def test_a_batch_mixing_shared_and_unique_prompts(tiny):
    # Prompts of different lengths (left padding), shared and not, more than one batch: every
    # reply answers its own request, with log-probs of a plain forward pass.
    model, tok = tiny
    texts = [PROMPTS[0], PROMPTS[2], PROMPTS[0], "x", PROMPTS[1], PROMPTS[2], PROMPTS[0]]
    policy = TransformersPolicy(model, tok, temperature=1.0, max_new_tokens=12, batch_size=3,
                                seed=1)
    replies = policy.act(requests_of(*texts))
    for req, reply in zip(requests_of(*texts), replies, strict=True):
        assert reply.prompt_token_ids == policy.prompt_ids(req.messages)
        expected = forward_logprobs(model, reply.prompt_token_ids, reply.token_ids)
        torch.testing.assert_close(torch.tensor(reply.logprobs), expected, atol=1e-4, rtol=0)
    # Batches of 3: [hi x3] [what now x2, x] [shoes]: 4 distinct prompts prefilled once each.
    assert (policy.stats.prompts, policy.stats.prefills, policy.stats.shared_prompts) == (7, 4, 5)
    # Greedy decoding is the same with and without sharing, request for request.
    greedy = [TransformersPolicy(model, tok, temperature=0, max_new_tokens=12, batch_size=3,
                                 share_prefill=share).act(requests_of(*texts))
              for share in (True, False)]
    assert [r.token_ids for r in greedy[0]] == [r.token_ids for r in greedy[1]]
    for a, b in zip(*greedy, strict=True):
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs),
                                   atol=1e-5, rtol=0)


def assert_same_greedy_replies(model, these, those):
    """Two ways of prefilling gave the same greedy replies, with the log-probs of one plain
    forward pass (up to rounding)."""
    assert [r.token_ids for r in these] == [r.token_ids for r in those]
    for a, b in zip(these, those, strict=True):
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs),
                                   atol=1e-5, rtol=0)
        expected = forward_logprobs(model, a.prompt_token_ids, a.token_ids)
        torch.testing.assert_close(torch.tensor(a.logprobs), expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize("fast_decode", [True, False])
def test_prompts_prefilled_alone_decode_as_one_padded_batch_does(tiny, fast_decode):
    # On a CPU each distinct prompt is prefilled unpadded in a pass of its own and the caches
    # are joined, left-padded, to decode together: the same replies and log-probs as one
    # padded pass, and no padding computed.
    model, tok = tiny
    texts = [PROMPTS[0], PROMPTS[2], PROMPTS[0], "x", PROMPTS[1], "y " * 40]
    policies = [TransformersPolicy(model, tok, temperature=0, max_new_tokens=12, batch_size=8,
                                   fast_decode=fast_decode, prefill_alone=alone)
                for alone in (True, False)]
    alone, padded = (p.act(requests_of(*texts)) for p in policies)
    assert_same_greedy_replies(model, alone, padded)
    stats = [p.stats for p in policies]
    assert stats[0].prefill_tokens == stats[1].prefill_tokens == stats[0].padded_tokens
    assert stats[1].padded_tokens == 5 * max(len(r.prompt_token_ids) for r in alone)
    # The default: alone on a CPU with the fast decoding, one padded pass without it.
    assert TransformersPolicy(model, tok).prefill_alone
    assert not TransformersPolicy(model, tok, fast_decode=False).prefill_alone


def test_shared_prefill_samples_as_separate_prefills_do(tiny):
    # When packing keeps the request order, the shared path makes the same draws from the same
    # distributions as prefilling every prompt for itself: the same replies for one seed.
    texts = [PROMPTS[1], PROMPTS[1], PROMPTS[1], "x", "x"]
    shared, alone = (TransformersPolicy(*tiny, max_new_tokens=16, batch_size=5, seed=3,
                                        share_prefill=share).act(requests_of(*texts))
                     for share in (True, False))
    assert [r.token_ids for r in shared] == [r.token_ids for r in alone]
    assert len({tuple(r.token_ids) for r in shared[:3]}) == 3


def test_shared_prefill_is_reproducible_under_a_seed(tiny):
    texts = [PROMPTS[0]] * 4 + [PROMPTS[2]] * 3 + [PROMPTS[1]]
    a, b, c = (TransformersPolicy(*tiny, seed=seed, max_new_tokens=16, batch_size=4).act(
        requests_of(*texts)) for seed in (7, 7, 8))
    assert [r.token_ids for r in a] == [r.token_ids for r in b]
    assert [r.token_ids for r in a] != [r.token_ids for r in c]


def test_prefill_plan_computes_each_shared_start_once():
    head, a, b = list(range(40)), list(range(100, 140)), list(range(200, 203))
    prompts = [head + a + [1], head + a + [2, 3], head + b, [9] * 50, head[:10] + [5],
               head + a]  # the last is the start of the first two: it keeps a token its own
    plan = prefill_plan(prompts, min_shared=32)
    # Every prompt is completed once, by a pass that ends where the prompt does, and every
    # pass's tokens are those of each prompt below it in the tree.
    assert sorted(s.completes for s in plan if s.completes is not None) == list(range(6))
    below = {k: set() for k in range(len(plan))}
    for k, step in enumerate(plan):
        if step.completes is not None:
            assert step.end == len(prompts[step.completes])
            j = k
            while j is not None:
                below[j].add(step.completes)
                j = plan[j].parent
        if step.parent is not None:
            assert plan[step.parent].end == step.start and step.parent < k
        else:
            assert step.start == 0
    for k, step in enumerate(plan):
        piece = prompts[step.source][step.start:step.end]
        assert piece and all(prompts[i][step.start:step.end] == piece for i in below[k])
        assert step.completes is not None or step.end - step.start >= 32
    # head (40) once, then all of a but its last token (39) once for the three prompts that
    # share it (the third ends there and keeps a token for its own pass), then each prompt's
    # rest (1, 2, 3 and b's 3); the prompt sharing only 10 tokens goes alone.
    assert sum(s.end - s.start for s in plan) == 40 + 39 + (1 + 2 + 3) + 3 + 50 + 11 == 149
    # A prefix tree of every token holds 12 fewer: the 10-token start (under min_shared) and
    # a's last token, which the three prompts that end in it each compute.
    assert trie_tokens(prompts) == 40 + 40 + 1 + 2 + 3 + 50 + 1 == 149 - 12
    assert sum(s.end - s.start for s in prefill_plan(prompts, min_shared=200)) == \
        sum(map(len, prompts))


def test_prompts_that_share_a_start_prefill_it_once_and_decode_the_same(tiny):
    model, tok = tiny
    task = "find a red pair of running shoes for the customer, size 9, under 60 dollars. " * 2
    texts = [task + "now: the search page", task + "now: a product page", task + "now: " * 9,
             PROMPTS[1], task + "now: the search page"]
    policies = [TransformersPolicy(model, tok, temperature=0, max_new_tokens=12, batch_size=8,
                                   share_starts=share) for share in (True, False)]
    shared, whole = (p.act(requests_of(*texts)) for p in policies)
    assert_same_greedy_replies(model, shared, whole)
    distinct = list({tuple(r.prompt_token_ids) for r in shared})
    with_starts, without = (p.stats for p in policies)
    assert without.prefill_tokens == sum(map(len, distinct))
    # The three distinct prompts of the task prefill their common start (the template, the
    # task, "now:") once instead of three times.
    start = len(os.path.commonprefix([r.prompt_token_ids for r in shared[:3]]))
    assert start >= 32
    assert with_starts.prefill_tokens == without.prefill_tokens - 2 * start
    assert with_starts.prefill_tokens == with_starts.padded_tokens
    assert with_starts.prefills == without.prefills == 4


def test_pack_identical_keeps_identical_prompts_together():
    def check(prompts, size, expected_prefills):
        batches = pack_identical(prompts, size)
        assert sorted(i for b in batches for i in b) == list(range(len(prompts)))
        assert all(0 < len(b) <= size for b in batches)
        assert len(batches) == -(-len(prompts) // size)  # no more batches than request order
        assert sum(len({tuple(prompts[i]) for i in b}) for b in batches) == expected_prefills
        return batches

    a, b, c, d = [1], [2], [3, 4], [5]
    assert check([a] * 8 + [b] * 8, 8, 2) == [list(range(8)), list(range(8, 16))]
    # Copies interleaved with other requests are gathered: one prefill per distinct prompt.
    check([a, b, a, c, b, a, d, c], 4, 4)
    check([a, b, c, a, b, c, a, d], 3, 4)
    # A group larger than a batch is cut: one prefill per piece.
    check([a] * 10 + [b], 4, 4)
    # Groups of 5, 5, 5 and 1 in batches of 8: packing them whole would take 3 batches, so the
    # groups are laid end to end and one straddles the cut (prefilled in both batches).
    check([a] * 5 + [b] * 5 + [c] * 5 + [d], 8, 5)
    assert pack_identical([], 4) == []


def test_pack_identical_under_a_token_budget_bounds_each_batchs_cache():
    """With ``tokens``, a batch's rows x (its longest prompt + reserve) stay within the budget
    (one over-long prompt alone excepted); identical prompts still share; all are served."""
    def check(prompts, size, tokens, reserve):
        batches = pack_identical(prompts, size, tokens, reserve)
        assert sorted(i for b in batches for i in b) == list(range(len(prompts)))
        for b in batches:
            longest = max(len(prompts[i]) for i in b)
            assert 0 < len(b) <= size
            assert len(b) == 1 or len(b) * (longest + reserve) <= tokens
        return batches

    long, short = list(range(100)), [7] * 10
    # 16 rows of 100 + 20: 4 fit a budget of 500 (not 16): 4 batches, copies together.
    batches = check([long] * 8 + [long[::-1]] * 8, 16, 500, 20)
    assert len(batches) == 4 and [len({i < 8 for i in b}) for b in batches] == [1, 1, 1, 1]
    # Short prompts fill a batch to ``size``; long ones share fewer rows.
    batches = check([short] * 6 + [long, long[1:], long[2:]], 6, 300, 20)
    assert sorted(len(b) for b in batches) == [1, 2, 6]
    # A prompt longer than the budget goes alone rather than nowhere.
    assert check([long, short, short], 4, 50, 10) == [[0], [1, 2]]
    # No budget: the batches of size alone.
    assert pack_identical([long] * 5, 4) == pack_identical([long] * 5, 4, None, 20)


@pytest.mark.parametrize("share", [True, False])
def test_a_token_budget_changes_batching_not_greedy_replies(tiny, share):
    model, tok = tiny
    texts = [PROMPTS[0], PROMPTS[2], PROMPTS[0], "x", PROMPTS[1], "y " * 40]
    sizes: list[int] = []
    free, bounded = (TransformersPolicy(model, tok, temperature=0, max_new_tokens=12,
                                        batch_size=8, batch_tokens=budget, share_prefill=share)
                     for budget in (None, 120))
    generate = bounded.generate_ids

    def spy(prompts, uniforms=None):
        sizes.append(len(prompts) * (max(map(len, prompts)) + 12))
        return generate(prompts, uniforms)

    bounded.generate_ids = spy
    a, b = (p.act(requests_of(*texts)) for p in (free, bounded))
    # Prompts of 12, 48, 12, 11, 33 and 90 tokens, 12 reserved: one pass of 6 x 102 positions
    # without a budget; within 120, packed: [90], [48, 33], [12, 12, 11]; in request order:
    # [12, 48], [12, 11], [33], [90].
    assert sorted(sizes) == ([72, 102, 120] if share else [45, 48, 102, 120])
    assert [r.token_ids for r in a] == [r.token_ids for r in b]
    with pytest.raises(ValueError, match="batch_tokens"):
        TransformersPolicy(model, tok, batch_tokens=0)


def test_a_seed_samples_the_same_replies_however_requests_are_batched(tiny):
    """Changing the passes a rollout is cut into (``batch_size``, a ``batch_tokens`` budget,
    shared prefill or not) leaves a seed's sampled replies as they were: a user may bound the
    memory of generation without changing the episodes a seed plays."""
    model, tok = tiny
    texts = [PROMPTS[0], PROMPTS[2], PROMPTS[0], "x", PROMPTS[1], "y " * 40]
    ways = [{}, {"batch_tokens": 120}, {"batch_size": 2}, {"share_prefill": False},
            {"batch_size": 1, "share_prefill": False}]
    # A stop string common in the tiny model's text, so that replies end at unlike lengths
    # and finished rows leave their pass.
    replies = [TransformersPolicy(model, tok, temperature=1.0, max_new_tokens=12, seed=5,
                                  stop=("e",), **{"batch_size": 8, **way}
                                  ).act(requests_of(*texts))
               for way in ways]
    for other in replies[1:]:
        assert [r.token_ids for r in other] == [r.token_ids for r in replies[0]]
        for a, b in zip(replies[0], other, strict=True):
            torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs),
                                       atol=1e-5, rtol=0)
    # Sampled, not greedy: the two requests of one prompt drew other replies.
    assert replies[0][0].token_ids != replies[0][2].token_ids
    assert len({len(r.token_ids) for r in replies[0]}) > 2


# --- scoring --------------------------------------------------------------------------------

SHOP = ["search[<query>]", "click[back to search]", "click[buy now]", "click[b0abc12345]",
        "click[x-large]"]


def test_scoring_picks_the_most_likely_candidate(tiny):
    model, tok = tiny
    policy = TransformersPolicy(model, tok, mode="score", temperature=0, batch_size=2)
    reqs = requests_of(*PROMPTS, actions=SHOP, instruction="red running shoes")
    replies = policy.act(reqs)
    for req, reply in zip(reqs, replies, strict=True):
        prompt = policy.prompt_ids(req.messages)
        assert reply.prompt_token_ids == prompt
        scored = {}
        for action in policy.candidates(req):
            text = f"<think></think><action>{action}</action>"
            ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            scored[text] = (ids, forward_logprobs(model, prompt, ids))
        assert "<think></think><action>search[red running shoes]</action>" in scored
        best = max(scored, key=lambda t: float(scored[t][1].sum()))
        assert reply.text == best
        ids, logprobs = scored[best]
        assert reply.token_ids == ids
        torch.testing.assert_close(torch.tensor(reply.logprobs), logprobs, atol=1e-4, rtol=0)


def test_scoring_with_temperature_samples_candidates(tiny):
    reqs = requests_of("hi", actions=SHOP) * 30
    a = TransformersPolicy(*tiny, mode="score", temperature=50.0, seed=1).act(reqs)
    b = TransformersPolicy(*tiny, mode="score", temperature=50.0, seed=1).act(reqs)
    assert [r.text for r in a] == [r.text for r in b]
    assert len({r.text for r in a}) > 1  # a flat softmax visits several candidates


def test_scoring_edge_cases(tiny):
    policy = TransformersPolicy(*tiny, mode="score", temperature=0)
    (empty,) = policy.act([Request(chat("hi"), [], {})])
    assert empty.text == "" and empty.token_ids == []
    # The search template is skipped when there is no instruction to fill it with.
    req = Request(chat("hi"), ["search[<query>]", "click[buy now]"], {})
    assert policy.candidates(req) == ["click[buy now]"]
    (only,) = policy.act([req])
    assert only.text == "<think></think><action>click[buy now]</action>"


def test_scoring_agent_plays_webshop(tiny):
    """Every step of a scored episode is well-formed and admissible."""
    import gymnasium as gym

    import gagpo.envs  # noqa: F401

    env = gym.make("WebShop-v0")
    agent = ReActAgent("WebShop-v0", max_prompt_tokens=2048, tokenizer=tiny[1])
    policy = TransformersPolicy(*tiny, mode="score", temperature=0)
    obs, info = env.reset(options={"task": 5})
    for _ in range(4):
        requests = agent.requests([obs], [info])
        (reply,) = policy.act(requests)
        (parsed,) = agent.parse_replies([reply], requests)
        assert parsed.well_formed and parsed.admissible, reply.text
        agent.observe(0, obs, parsed.action)
        obs, _, done, _, info = env.step(parsed.action)
        assert info["action_valid"]
        if done:
            break
    env.close()


def test_tiny_model_config_is_what_docs_say(tiny):
    model, _ = tiny
    config = json.loads(model.config.to_json_string())
    assert config["model_type"] == "llama" and config["num_hidden_layers"] == 2
    # The README and the demo say "134k parameters": a 943-token vocabulary x 64 (embeddings
    # tied with the output layer), 2 layers of attention (q, o 64x64; k, v 64x32), MLP
    # (3 x 64x128) and two norms, and the final norm.
    assert config["vocab_size"] == 943 and config["tie_word_embeddings"]
    layer = 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64
    assert sum(p.numel() for p in model.parameters()) == 943 * 64 + 2 * layer + 64 == 134_400
