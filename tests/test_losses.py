"""The policy losses: ratios, clipping, KL, entropy, aggregation, and log-prob recomputation."""

import math

import pytest
import torch

from gagpo.losses import (
    LossConfig,
    action_log_ratio,
    kl_low_var,
    pad_batch,
    policy_loss,
    reply_logprobs,
    right_align,
)

torch.set_num_threads(1)
NO_EXTRAS = dict(kl_coef=0.0, entropy_coef=0.0, dual_clip=None)


def _batch():
    g = torch.Generator().manual_seed(0)
    logp = -torch.rand(3, 5, generator=g) * 3
    old = logp + 0.3 * torch.randn(3, 5, generator=g)
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 1]], dtype=torch.float32)
    return logp, old, mask


def test_action_level_ratio_equals_a_direct_computation():
    logp, old, mask = _batch()
    got = action_log_ratio(logp, old, mask).exp()
    for i in range(3):
        toks = [t for t in range(5) if mask[i, t]]
        direct = math.exp(sum(float(logp[i, t] - old[i, t]) for t in toks) / len(toks))
        assert got[i].item() == pytest.approx(direct, rel=1e-6)
    # In the loss, every token of an action carries that one ratio.
    adv = torch.tensor([1.0, -1.0, 0.5])
    cfg = LossConfig(ratio_level="action", clip_eps=10.0, aggregation="seq-mean", **NO_EXTRAS)
    loss, _ = policy_loss(logp, old, adv, mask, cfg)
    assert loss.item() == pytest.approx(float(-(got * adv).mean()), rel=1e-5)


def test_token_level_ratio_and_clipping_by_hand():
    logp = torch.log(torch.tensor([[0.5, 0.9]]))
    old = torch.log(torch.tensor([[0.25, 0.9]]))  # ratios 2.0 and 1.0
    mask = torch.ones(1, 2)
    cfg = LossConfig(ratio_level="token", clip_eps=0.2, **NO_EXTRAS)
    loss, stats = policy_loss(logp, old, torch.tensor([1.0]), mask, cfg)
    # token 1: -min(2 * 1, 1.2 * 1) = -1.2; token 2: -1; token-mean: -1.1
    assert loss.item() == pytest.approx(-1.1)
    assert stats["clip_frac"] == 1.0 and stats["tokens"] == 2.0
    # A negative advantage with ratio 2: -min(-2, -1.2) = 2 (the pessimistic side).
    loss, _ = policy_loss(logp, old, torch.tensor([-1.0]), mask, cfg)
    assert loss.item() == pytest.approx((2.0 + 1.0) / 2)


def test_dual_clip_caps_negative_advantages():
    logp = torch.log(torch.tensor([[0.9]]))
    old = torch.log(torch.tensor([[0.1]]))  # ratio 9
    mask = torch.ones(1, 1)
    plain = LossConfig(ratio_level="token", **NO_EXTRAS)
    dual = LossConfig(ratio_level="token", kl_coef=0.0, entropy_coef=0.0, dual_clip=3.0)
    neg = torch.tensor([-2.0])
    assert policy_loss(logp, old, neg, mask, plain)[0].item() == pytest.approx(18.0)
    assert policy_loss(logp, old, neg, mask, dual)[0].item() == pytest.approx(6.0)
    pos = torch.tensor([2.0])  # positive advantages: dual clip changes nothing
    assert policy_loss(logp, old, pos, mask, dual)[0].item() == pytest.approx(-2.4)


def test_kl_estimator_is_nonnegative_and_zero_at_equality():
    x = torch.linspace(-3, 0, 7)
    assert torch.all(kl_low_var(x, x) == 0)
    k = kl_low_var(x, x.flip(0))
    assert torch.all(k >= 0) and k.sum() > 0
    logp, old, mask = _batch()
    cfg = LossConfig(kl_coef=0.5, entropy_coef=0.0)
    with pytest.raises(ValueError):
        policy_loss(logp, old, torch.zeros(3), mask, cfg)
    loss, stats = policy_loss(logp, old, torch.zeros(3), mask, cfg, ref_logp=old)
    expected = 0.5 * float((kl_low_var(logp, old) * mask).sum() / mask.sum())
    assert loss.item() == pytest.approx(expected, rel=1e-5) and stats["kl"] > 0


def test_entropy_bonus_and_aggregations():
    logp, old, mask = _batch()
    ent = torch.full_like(logp, 2.0)
    cfg = LossConfig(kl_coef=0.0, entropy_coef=0.1)
    loss, _ = policy_loss(logp, logp, torch.zeros(3), mask, cfg, entropy=ent)
    assert loss.item() == pytest.approx(-0.2)
    # token-mean weighs tokens, seq-mean weighs actions.
    adv = torch.tensor([1.0, 0.0, 0.0])
    tm = policy_loss(logp, logp, adv, mask, LossConfig(aggregation="token-mean", **NO_EXTRAS))[0]
    sm = policy_loss(logp, logp, adv, mask, LossConfig(aggregation="seq-mean", **NO_EXTRAS))[0]
    assert tm.item() == pytest.approx(-3 / 9) and sm.item() == pytest.approx(-1 / 3)
    # A denominator passed in makes micro-batches add up to the whole batch.
    whole = policy_loss(logp, old, adv, mask, LossConfig(**NO_EXTRAS))[0]
    parts = sum(policy_loss(logp[i:i + 1], old[i:i + 1], adv[i:i + 1], mask[i:i + 1],
                            LossConfig(**NO_EXTRAS), denominator=float(mask.sum()))[0]
                for i in range(3))
    assert parts.item() == pytest.approx(whole.item(), rel=1e-6)


def test_reply_logprobs_match_one_unpadded_forward_each():
    from agents.models import load_model

    model, tok = load_model("tiny")
    prompts = [[5, 6, 7, 8, 9, 10], [11, 12], [20, 21, 22, 23]]
    replies = [[30, 31], [40, 41, 42, 43], [50]]
    logp, mask, ent = reply_logprobs(model, prompts, replies, pad_id=tok.pad_token_id,
                                     temperature=0.7, with_entropy=True)
    assert logp.shape == mask.shape == ent.shape == (3, 4)
    for i, (p, r) in enumerate(zip(prompts, replies, strict=True)):
        with torch.no_grad():
            logits = model(torch.tensor([p + r])).logits[0, len(p) - 1:-1] / 0.7
        direct = torch.log_softmax(logits, -1).gather(1, torch.tensor(r)[:, None])[:, 0]
        assert torch.allclose(logp[i, 4 - len(r):].detach(), direct, atol=1e-5)
        assert mask[i].sum() == len(r)
    ids, attn, pos, T = pad_batch(prompts, replies, 0)
    assert T == 4 and ids.shape == (3, 8) and pos[1].tolist() == [0, 0, 0, 1, 2, 3, 4, 5]
    assert right_align([[1.0], [2.0, 3.0]], 3).tolist() == [[0, 0, 1], [0, 2, 3]]
