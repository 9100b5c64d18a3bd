"""The policy losses: ratios, clipping, KL, entropy, aggregation, and log-prob recomputation."""

import math

import numpy as np
import pytest
import torch

from gagpo.logprobs import pad_batch, reply_logprobs, right_align
from gagpo.losses import LossConfig, action_log_ratio, kl_low_var, policy_loss

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
    from gagpo.agents.models import load_model

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


def test_packed_passes_give_the_padded_passes_log_probs_entropies_and_gradients():
    """Rows sharing a prompt run as one sequence (each reply seeing the prompt and itself
    only): the same log-probs, entropies and parameter gradients as the padded pass."""
    from gagpo.agents.models import load_model

    model, tok = load_model("tiny")
    shared = [5, 6, 7, 8, 9, 10]
    prompts = [shared, [11, 12], shared, [20, 21, 22, 23], shared]
    replies = [[30, 31], [40, 41, 42, 43], [32, 33, 34], [50], [30, 35]]
    weights = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))
    out = {}
    for packed in (False, True):
        model.zero_grad()
        logp, mask, ent = reply_logprobs(model, prompts, replies, pad_id=tok.pad_token_id,
                                         temperature=0.7, with_entropy=True, packed=packed)
        ((logp * weights).sum() + (ent * mask).sum()).backward()
        grads = [p.grad.clone() for p in model.parameters()]
        out[packed] = (logp.detach(), mask, (ent * mask).detach(), grads)
    (lp, mp, ep, gp), (lq, mq, eq, gq) = out[False], out[True]
    assert torch.equal(mp, mq) and lq.shape == (5, 4)
    assert torch.allclose(lp, lq, atol=1e-5) and torch.allclose(ep, eq, atol=1e-5)
    for a, b in zip(gp, gq, strict=True):  # float32 rounding, relative to each gradient's size
        assert (a - b).abs().max() <= 1e-5 * (1 + a.abs().max())
    # Replies of one prompt do not see each other: the first reply of the shared prompt alone.
    alone = reply_logprobs(model, [shared], [replies[0]], pad_id=tok.pad_token_id,
                           temperature=0.7, packed=True)[0]
    assert torch.allclose(alone[0].detach(), lq[0, 2:], atol=1e-5)


def test_pack_replies_lays_out_positions_mask_and_predictors():
    from gagpo.logprobs import pack_replies

    ids, pos, mask, where = pack_replies([1, 2, 3], [[4, 5], [6], []])
    assert ids.tolist() == [[1, 2, 3, 4, 5, 6]] and pos.tolist() == [[0, 1, 2, 3, 4, 3]]
    assert [w.tolist() for w in where] == [[0, 1], [0], []]
    assert mask[0, 0].int().tolist() == [[1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0],
                                         [1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 0, 0],
                                         [1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 1]]
    assert pack_replies([1, 2], [[3, 4]])[2] is None  # one reply: plain causal attention
    # Two replies already need the mask: the second sees the prompt, not the first.
    _, pos, mask, where = pack_replies([1, 2], [[3], [4, 5]])
    assert pos.tolist() == [[0, 1, 2, 2, 3]] and [w.tolist() for w in where] == [[0], [0, 2]]
    assert mask[0, 0].int().tolist() == [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0],
                                         [1, 1, 0, 1, 0], [1, 1, 0, 1, 1]]


def test_packed_micro_batches_count_a_shared_prompt_once_and_keep_its_rows_together():
    from gagpo.batching import packed_micro_batches

    a, b = [1] * 10, [2] * 4
    prompts = [a, b, a, [3] * 10, a]
    replies = [[0] * 2, [0] * 3, [0] * 1, [0] * 2, [0] * 3]
    # b + reply (7); then a once with its three replies (10 + 1 + 2 + 3 = 16) fits 24 with
    # b's 7 (23); the other prompt of 10 does not.
    assert packed_micro_batches(prompts, replies, 24) == [[1, 2, 0, 4], [3]]
    assert packed_micro_batches(prompts, replies, 1) == [[1], [2], [0], [4], [3]]
    # A budget is a bound that may be met exactly (23, and 16 after a cut: a's 10 + 1 + 2 +
    # 3), and a row that opens a micro-batch brings its prompt (15: a + 3 = 13 alone).
    assert packed_micro_batches(prompts, replies, 23) == [[1, 2, 0, 4], [3]]
    assert packed_micro_batches(prompts, replies, 22) == [[1, 2, 0], [4], [3]]
    assert packed_micro_batches(prompts, replies, 16) == [[1], [2, 0, 4], [3]]
    assert packed_micro_batches(prompts, replies, 15) == [[1], [2, 0], [4], [3]]
    assert packed_micro_batches([], [], 10) == []
    # Under FSDP a micro-batch is one pass: one prompt each, however much room is left.
    assert packed_micro_batches(prompts, replies, 100, one_prompt_each=True) == [
        [1], [2, 0, 4], [3]]


def test_kl_estimator_by_hand_tells_the_two_directions_apart():
    # pi = (1/2, 1/2) is the policy that sampled the tokens, ref = (1/4, 3/4) the reference.
    # k3 per token: exp(r - l) - (r - l) - 1, r = log ref(x), l = log pi(x).
    #   x = 0: r - l = log(1/2): 1/2 + ln 2 - 1 = 0.1931471805599453
    #   x = 1: r - l = log(3/2): 3/2 - ln(3/2) - 1 = 0.0945348918918356
    # E_pi[k3] = sum_x pi(x) (ref(x)/pi(x) - ln(ref(x)/pi(x)) - 1) = sum ref - 1 + KL(pi || ref)
    #   = KL(pi || ref) = 1/2 ln 2 + 1/2 ln(2/3) = 0.1438410362258904,
    # while KL(ref || pi) = 1/4 ln(1/2) + 3/4 ln(3/2) = 0.1308120359411370 (the other direction).
    # An estimator of the reverse direction, exp(l - r) - (l - r) - 1, would give
    #   x = 0: 2 - ln 2 - 1 = 0.3068528194400547 and E_pi = 0.1894922971074429.
    pi = torch.tensor([0.5, 0.5], dtype=torch.float64)
    ref = torch.tensor([0.25, 0.75], dtype=torch.float64)
    k = kl_low_var(pi.log(), ref.log())
    assert k.tolist() == pytest.approx([0.1931471805599453, 0.0945348918918356], rel=1e-12)
    assert float((pi * k).sum()) == pytest.approx(0.1438410362258904, rel=1e-12)
    # The other direction is the same estimator with the roles swapped (samples from ref).
    k_rev = kl_low_var(ref.log(), pi.log())
    assert float((ref * k_rev).sum()) == pytest.approx(0.1308120359411370, rel=1e-12)
    # Through the loss: the penalty is KL(pi || ref) with pi = logp (not ref_logp).
    logp, ref_logp = pi.log()[None], ref.log()[None]
    cfg = LossConfig(kl_coef=1.0, entropy_coef=0.0, dual_clip=None, aggregation="token-mean")
    loss, stats = policy_loss(logp, logp, torch.zeros(1, dtype=torch.float64),
                              torch.ones(1, 2), cfg, ref_logp=ref_logp)
    assert stats["kl"] == pytest.approx(0.1931471805599453 + 0.0945348918918356, rel=1e-12)
    assert loss.item() == pytest.approx((0.1931471805599453 + 0.0945348918918356) / 2,
                                        rel=1e-12)
    # d k3 / d l = 1 - exp(r - l): x = 0 -> 1 - 1/2, x = 1 -> 1 - 3/2 (times kl_coef / 2 tokens).
    lp = logp.clone().requires_grad_(True)
    policy_loss(lp, logp, torch.zeros(1, dtype=torch.float64), torch.ones(1, 2), cfg,
                ref_logp=ref_logp)[0].backward()
    assert lp.grad[0].tolist() == pytest.approx([0.25, -0.25], rel=1e-12)


@pytest.mark.parametrize("level", ["token", "action"])
def test_asymmetric_clipping_by_hand(level):
    # eps_low = 0.1, eps_high = 0.3: the ratio is clipped to [0.9, 1.3]. Per token
    # l = max(-A rho, -A clip(rho)); the gradient w.r.t. logp is -A rho where the unclipped
    # term is the max, 0 where the clipped one is (ties count as unclipped).
    #   A = +1: rho 1.5 -> max(-1.5, -1.3) = -1.3 (clipped, grad 0)
    #           rho 1.2 -> -1.2 (inside [0.9, 1.3]; with eps_high 0.1 it would clip to -1.1)
    #           rho 0.85 -> max(-0.85, -0.9) = -0.85, rho 0.5 -> -0.5 (never clipped below)
    #   A = -1: rho 1.5 -> max(1.5, 1.3) = 1.5, rho 1.2 -> 1.2 (never clipped above)
    #           rho 0.85 -> max(0.85, 0.9) = 0.9 (clipped; with eps_low 0.3 it would be 0.85)
    #           rho 0.5 -> max(0.5, 0.9) = 0.9 (clipped)
    # token-mean over 8 tokens: (-1.3 - 1.2 - 0.85 - 0.5 + 1.5 + 1.2 + 0.9 + 0.9) / 8 = 0.08125.
    ratios = torch.tensor([1.5, 1.2, 0.85, 0.5], dtype=torch.float64)
    old = torch.log(torch.tensor([0.3, 0.2, 0.4, 0.1], dtype=torch.float64))
    if level == "token":  # two actions of four tokens, one per advantage
        old = old.repeat(2, 1)
        logp = (old + ratios.log()).requires_grad_(True)
        adv = torch.tensor([1.0, -1.0], dtype=torch.float64)
    else:  # eight one-token actions: each action's ratio is its token's
        old = old.repeat(2)[:, None]
        logp = (old + ratios.repeat(2).log()[:, None]).requires_grad_(True)
        adv = torch.tensor([1.0] * 4 + [-1.0] * 4, dtype=torch.float64)
    mask = torch.ones_like(old)
    cfg = LossConfig(ratio_level=level, clip_eps=0.1, clip_eps_high=0.3, **NO_EXTRAS)
    loss, stats = policy_loss(logp, old, adv, mask, cfg)
    assert loss.item() == pytest.approx(0.08125, rel=1e-12)
    assert stats["clip_frac"] == 3.0  # A=+1 at 1.5; A=-1 at 0.85 and 0.5
    loss.backward()
    grad = [0.0, -1.2, -0.85, -0.5, 1.5, 1.2, 0.0, 0.0]
    assert logp.grad.flatten().tolist() == pytest.approx([g / 8 for g in grad], rel=1e-12)
    # The swapped ranges give another loss: A=+1 clips 1.2 at 1.1, A=-1 keeps 0.85, 0.5 -> 0.7.
    swapped = LossConfig(ratio_level=level, clip_eps=0.3, clip_eps_high=0.1, **NO_EXTRAS)
    expected = (-1.1 - 1.1 - 0.85 - 0.5 + 1.5 + 1.2 + 0.85 + 0.7) / 8
    assert policy_loss(logp, old, adv, mask, swapped)[0].item() == pytest.approx(expected)


def test_kl_per_token_is_capped_at_ten_and_finite_for_impossible_tokens():
    """A token the reference (or the policy) finds very unlikely adds at most 10, never inf
    or nan, so one such token cannot dominate or poison the batch."""
    logp = torch.tensor([0.0, -30.0, 0.0, -math.inf, -12.0], dtype=torch.float64)
    ref = torch.tensor([-30.0, 0.0, -math.inf, 0.0, 0.0], dtype=torch.float64)
    k = kl_low_var(logp, ref)
    assert k.tolist()[:4] == [10.0, 10.0, 10.0, 10.0]
    assert k[4].item() == 10.0  # exp(12) - 12 - 1 is far above the cap
    mid = kl_low_var(torch.tensor([-3.0]), torch.tensor([0.0]))  # exp(3) - 4 = 16.1: capped
    assert mid.item() == 10.0
    below = kl_low_var(torch.tensor([-2.0]), torch.tensor([0.0]))  # exp(2) - 3 = 4.389
    assert below.item() == pytest.approx(math.exp(2) - 3)


@pytest.mark.parametrize(
    ("lengths", "budget", "expected"),
    [
        ([3, 3, 3, 3], 6, [[0, 1], [2, 3]]),  # 2 x 3 fits, 3 x 3 does not
        ([1, 5, 1, 1], 10, [[0, 1], [2, 3]]),  # padded to the longest: 2 x 5
        ([2, 2, 2], 6, [[0, 1, 2]]),  # exactly the budget fits
        ([7, 1], 4, [[0], [1]]),  # a reply over the budget still gets a micro-batch
        ([], 4, []),
    ],
)
def test_micro_batches_stay_within_the_padded_budget(lengths, budget, expected):
    from gagpo.batching import micro_batches

    batches = micro_batches(lengths, budget)
    assert batches == expected
    assert [i for b in batches for i in b] == list(range(len(lengths)))


def test_seq_mean_micro_batches_add_up_to_the_whole_batch():
    """With a row denominator, per-row micro-batches (one row each, too) sum to the loss of the
    whole batch under seq-mean, as under token-mean."""
    logp, old, mask = _batch()
    adv = torch.tensor([1.0, -0.5, 2.0])
    cfg = LossConfig(aggregation="seq-mean", **NO_EXTRAS)
    whole = policy_loss(logp, old, adv, mask, cfg)[0]
    parts = sum(policy_loss(logp[i:i + 1], old[i:i + 1], adv[i:i + 1], mask[i:i + 1], cfg,
                            denominator=3.0)[0] for i in range(3))
    assert parts.item() == pytest.approx(whole.item(), rel=1e-6)
    # One row alone is its own mean.
    one = policy_loss(logp[:1], logp[:1], adv[:1], mask[:1], cfg)[0]
    assert one.item() == pytest.approx(-1.0)


def test_unknown_ratio_level_or_aggregation_is_named():
    logp, old, mask = _batch()
    with pytest.raises(ValueError, match="ratio level must be one of .*not 'sequence'"):
        policy_loss(logp, old, torch.zeros(3), mask, LossConfig(ratio_level="sequence"))
    with pytest.raises(ValueError, match="aggregation must be one of .*not 'sum'"):
        policy_loss(logp, old, torch.zeros(3), mask, LossConfig(aggregation="sum"))


def test_broken_rows_give_a_finite_loss():
    """A stale or broken row (a log-prob far off, or -inf on a padding token) must not turn the
    whole batch's loss or statistics into inf or nan: the log ratio is clamped before exp."""
    logp, old, mask = _batch()
    adv = torch.tensor([-1.0, -1.0, 0.5])
    stale = old.clone()
    stale[1, 0] = -1e4  # a real token: the action's mean log ratio is about 2000
    padded = old.clone()
    padded[0, 0] = -math.inf  # padding (mask 0), per-token ratios only
    for level, old_logp in (("token", stale), ("action", stale), ("token", padded)):
        cfg = LossConfig(ratio_level=level, **NO_EXTRAS)
        loss, stats = policy_loss(logp, old_logp, adv, mask, cfg)
        assert math.isfinite(loss.item()) and math.isfinite(stats["ratio"]), level


@pytest.mark.parametrize("level", ["token", "action"])
def test_padding_holding_minus_inf_or_nan_takes_no_part(level):
    """-inf log-probs (or a nan entropy) on padding change nothing: not the loss, its gradient
    or the statistics. At the action level ``(logp - old) * mask`` made them nan (inf * 0)."""
    logp, old, mask = _batch()
    adv = torch.tensor([-1.0, 1.0, 0.5])
    ref = logp + 0.2 * torch.randn(3, 5, generator=torch.Generator().manual_seed(1))
    entropy = torch.rand(3, 5, generator=torch.Generator().manual_seed(2))
    cfg = LossConfig(ratio_level=level, kl_coef=0.1, entropy_coef=0.01)
    pad = mask == 0

    def run(fill: float, entropy_fill: float):
        x = torch.where(pad, fill, logp).requires_grad_()
        loss, stats = policy_loss(x, torch.where(pad, fill, old), adv, mask, cfg,
                                  ref_logp=torch.where(pad, fill, ref),
                                  entropy=torch.where(pad, entropy_fill, entropy))
        loss.backward()
        return loss, stats, x.grad

    loss, stats, grad = run(0.0, 0.0)
    bad_loss, bad_stats, bad_grad = run(-math.inf, math.nan)
    assert bad_loss.item() == pytest.approx(loss.item(), rel=1e-6)
    assert bad_stats == pytest.approx(stats, rel=1e-6)
    assert torch.equal(bad_grad, grad) and not grad[pad].any()
    # The action's mean log ratio on its own, too.
    got = action_log_ratio(torch.where(pad, -math.inf, logp), torch.where(pad, -math.inf, old),
                           mask)
    assert torch.allclose(got, action_log_ratio(logp, old, mask))


def test_the_loss_keeps_the_policy_dtype():
    """float64 advantages or masks do not silently upcast a float32 policy's loss."""
    logp, old, mask = _batch()
    loss, _ = policy_loss(logp, old, torch.ones(3, dtype=torch.float64), mask.double(),
                          LossConfig(**NO_EXTRAS))
    assert loss.dtype == torch.float32


def test_stats_are_sums_over_the_real_tokens():
    """What a trainer logs: sums over unmasked tokens (padding never counts), the surrogate as
    the loss itself, and zero KL and entropy when they are off."""
    logp, old, mask = _batch()
    adv = torch.tensor([1.0, -0.5, 2.0])
    cfg = LossConfig(ratio_level="token", clip_eps=0.1, **NO_EXTRAS)
    loss, stats = policy_loss(logp, old, adv, mask, cfg, denominator=20.0)
    assert set(stats) == {"pg", "kl", "entropy", "clip_frac", "ratio", "tokens"}
    assert stats["kl"] == 0.0 and stats["entropy"] == 0.0
    assert stats["pg"] == pytest.approx(loss.item())  # with the same denominator
    ratio_sum, clipped = 0.0, 0
    for b in range(3):
        for t in range(5):
            if mask[b, t]:
                rho = math.exp(logp[b, t].item() - old[b, t].item())
                ratio_sum += rho
                a = adv[b].item()
                clipped += -a * min(max(rho, 0.9), 1.1) > -a * rho
    assert stats["ratio"] == pytest.approx(ratio_sum, rel=1e-5)
    assert stats["clip_frac"] == clipped and 0 < clipped < 9
    assert stats["tokens"] == 9.0
    # The ratio of a broken row is capped at e^20.
    stale = old.clone()
    stale[1, 0] = -1e4
    _, stats = policy_loss(logp, stale, adv, mask, cfg)
    assert stats["ratio"] == pytest.approx(math.exp(20), rel=1e-6)  # float32 sum


def test_dual_clip_leaves_positive_advantages_alone():
    logp, old, mask = _batch()
    adv = torch.tensor([0.5, 0.25, 0.75])  # positive, below 1
    plain = policy_loss(logp, old, adv, mask, LossConfig(**NO_EXTRAS))[0]
    dual = policy_loss(logp, old, adv, mask,
                       LossConfig(kl_coef=0.0, entropy_coef=0.0, dual_clip=3.0))[0]
    assert dual.item() == pytest.approx(plain.item(), rel=1e-7)


@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean"])
def test_kl_and_entropy_terms_of_micro_batches_add_up_too(aggregation):
    logp, old, mask = _batch()
    g = torch.Generator().manual_seed(1)
    ref = logp + 0.5 * torch.randn(3, 5, generator=g)
    ent = torch.rand(3, 5, generator=g) * 2
    adv = torch.tensor([1.0, -0.5, 2.0])
    cfg = LossConfig(kl_coef=0.3, entropy_coef=0.2, aggregation=aggregation)
    whole, stats = policy_loss(logp, old, adv, mask, cfg, ref_logp=ref, entropy=ent)
    n = float(mask.sum()) if aggregation == "token-mean" else 3.0
    parts = sum(policy_loss(logp[i:i + 1], old[i:i + 1], adv[i:i + 1], mask[i:i + 1], cfg,
                            ref_logp=ref[i:i + 1], entropy=ent[i:i + 1], denominator=n)[0]
                for i in range(3))
    assert parts.item() == pytest.approx(whole.item(), rel=1e-6)
    # The logged KL and entropy are sums over the real tokens only.
    assert stats["kl"] == pytest.approx(float((kl_low_var(logp, ref) * mask).sum()), rel=1e-6)
    assert stats["entropy"] == pytest.approx(float((ent * mask).sum()), rel=1e-6)


def test_kl_without_reference_log_probs_is_a_clear_error():
    logp, old, mask = _batch()
    with pytest.raises(ValueError, match="^kl_coef > 0 needs ref_logp$"):
        policy_loss(logp, old, torch.zeros(3), mask, LossConfig(kl_coef=0.1))


def test_micro_batches_of_empty_replies_cost_nothing():
    from gagpo.batching import micro_batches

    assert micro_batches([0, 0, 0], 1) == [[0, 1, 2]]
    assert micro_batches([5, 0, 0], 1) == [[0], [1, 2]]


def test_pad_batch_gives_integer_tensors_and_refuses_unpaired_lists():
    ids, attn, positions, T = pad_batch([[1, 2], [3]], [[4], [5]], pad_id=9)
    assert ids.dtype == attn.dtype == positions.dtype == torch.long  # they index embeddings
    assert ids.tolist() == [[1, 2, 4], [9, 3, 5]] and T == 1
    assert attn.tolist() == [[1, 1, 1], [0, 1, 1]]
    assert positions.tolist() == [[0, 1, 2], [0, 0, 1]]
    with pytest.raises(ValueError):
        pad_batch([[1], [2]], [[3]], pad_id=0)


def test_right_align_puts_values_on_the_given_device():
    out = right_align([[0.5], [1.0, 2.0]], 3, device="meta")
    assert out.device.type == "meta" and out.shape == (2, 3)
    out = right_align([[0.5], [1.0, 2.0]], 3)
    assert out.device.type == "cpu" and out.dtype == torch.float32
    assert out.tolist() == [[0.0, 0.0, 0.5], [0.0, 1.0, 2.0]]


@pytest.mark.parametrize("c", [1.0, 0.5, 0.0, -3.0, float("nan")])
def test_dual_clip_of_one_or_less_is_refused_clearly(c):
    with pytest.raises(ValueError, match="dual_clip must be above 1 .*no gradient"):
        LossConfig(dual_clip=c)


def test_dual_clip_above_one_or_off_is_accepted():
    assert LossConfig(dual_clip=1.01).dual_clip == 1.01
    assert LossConfig(dual_clip=None).dual_clip is None


# -- packed passes in any row order, with the odd rows; micro-batches by their contract -------

# Rows that share a prompt (given apart) and rows alone, an empty reply in the shared group and
# one alone, one-token replies, and prompts that differ from the shared one by their last token
# or extend it (a later step's): each distinct prompt is one packed pass.
_SHARED = [5, 6, 7, 8, 9, 10]
_ROWS = [(_SHARED, [30, 31, 32]), ([11, 12], [40]), (_SHARED, []), ([20, 21, 22], [50, 51]),
         (_SHARED, [33]), ([11, 12], [41, 42, 43, 44]), ([13], []), ([14, 15], [60]),
         ([*_SHARED, 11], [36, 37]), ([*_SHARED[:-1], 99], [38])]


def test_packed_passes_give_each_row_back_in_the_callers_order_whatever_it_is():
    """The same rows shuffled: the packed pass gives row j the log-probs, mask and entropies
    that the padded pass gives that row in the original order, for rows sharing a prompt and
    rows alone, an empty reply (all mask 0) and a one-token reply; one row alone is that row's
    own."""
    from gagpo.agents.models import load_model

    model, tok = load_model("tiny")
    prompts, replies = [p for p, _ in _ROWS], [r for _, r in _ROWS]
    with torch.no_grad():
        want, want_mask, want_ent = reply_logprobs(model, prompts, replies,
                                                   pad_id=tok.pad_token_id, temperature=0.7,
                                                   with_entropy=True)
        assert want.shape == (len(_ROWS), 4)
        assert want_mask[2].sum() == want_mask[6].sum() == 0 and want_mask[1].sum() == 1
        g = torch.Generator().manual_seed(0)
        orders = [list(range(len(_ROWS))), list(reversed(range(len(_ROWS))))]
        orders += [torch.randperm(len(_ROWS), generator=g).tolist() for _ in range(3)]
        for order in orders:
            logp, mask, ent = reply_logprobs(model, [prompts[i] for i in order],
                                             [replies[i] for i in order],
                                             pad_id=tok.pad_token_id, temperature=0.7,
                                             with_entropy=True, packed=True)
            assert torch.equal(mask, want_mask[order]), order
            torch.testing.assert_close(logp, want[order], atol=1e-5, rtol=0, msg=str(order))
            torch.testing.assert_close(ent * mask, want_ent[order] * want_mask[order],
                                       atol=1e-5, rtol=0, msg=str(order))
        for i in (0, 1, 3):  # a row alone: its own reply's length, its own values
            n = len(replies[i])
            logp, mask, _ = reply_logprobs(model, [prompts[i]], [replies[i]],
                                           pad_id=tok.pad_token_id, temperature=0.7,
                                           packed=True)
            assert logp.shape == mask.shape == (1, n) and mask.sum() == n
            torch.testing.assert_close(logp[0], want[i, 4 - n:], atol=1e-5, rtol=0)
        logp, mask, _ = reply_logprobs(model, [prompts[2]], [[]], pad_id=tok.pad_token_id,
                                       packed=True)
        assert logp.shape == mask.shape == (1, 0)


def test_a_padded_pass_of_empty_replies_gives_empty_rows_as_the_packed_one_does():
    from gagpo.agents.models import load_model

    model, tok = load_model("tiny")
    for packed in (True, False):
        logp, mask, _ = reply_logprobs(model, [[5, 6, 7], [8, 9]], [[], []],
                                       pad_id=tok.pad_token_id, packed=packed)
        assert logp.shape == mask.shape == (2, 0), packed


def _packed_cost(prompts, replies, batch) -> int:
    return (sum(len(p) for p in {tuple(prompts[i]) for i in batch})
            + sum(len(replies[i]) for i in batch))


def test_packed_micro_batches_keep_every_row_once_within_the_budget():
    """Random rows (prompts drawn from a few, some shared, empty replies too) and budgets:
    every row in exactly one micro-batch; a micro-batch over the budget is one row alone; a
    micro-batch is cut only where the next row would not fit (or, ``one_prompt_each``, where
    its prompt changes), and ``one_prompt_each`` holds one prompt per micro-batch."""
    from gagpo.batching import packed_micro_batches

    rng = np.random.default_rng(0)
    for _ in range(300):
        pool = [list(rng.integers(0, 50, rng.integers(1, 9))) for _ in range(4)]
        n = int(rng.integers(0, 12))
        prompts = [pool[k] for k in rng.integers(0, len(pool), n)]
        replies = [list(range(int(k))) for k in rng.integers(0, 7, n)]
        budget = int(rng.integers(1, 40))
        for one in (False, True):
            cut = packed_micro_batches(prompts, replies, budget, one_prompt_each=one)
            case = (prompts, replies, budget, one, cut)
            assert sorted(i for b in cut for i in b) == list(range(n)), case
            assert all(cut), case
            for b in cut:
                assert _packed_cost(prompts, replies, b) <= budget or len(b) == 1, case
                if one:
                    assert len({tuple(prompts[i]) for i in b}) == 1, case
            for b, after in zip(cut, cut[1:], strict=False):
                joined = b + after[:1]
                assert _packed_cost(prompts, replies, joined) > budget or (
                    one and len({tuple(prompts[i]) for i in joined}) > 1), case


def test_padded_micro_batches_keep_consecutive_rows_once_within_the_budget():
    """Random lengths and budgets: consecutive runs covering every row once, each of rows x
    longest within the budget unless it is one row, cut only where the next row would not
    fit."""
    from gagpo.batching import micro_batches

    rng = np.random.default_rng(1)
    for _ in range(300):
        lengths = [int(k) for k in rng.integers(0, 12, rng.integers(0, 12))]
        budget = int(rng.integers(1, 40))
        cut = micro_batches(lengths, budget)
        case = (lengths, budget, cut)
        assert [i for b in cut for i in b] == list(range(len(lengths))), case
        for b in cut:
            assert len(b) * max(lengths[i] for i in b) <= budget or len(b) == 1, case
        for b, after in zip(cut, cut[1:], strict=False):
            assert (len(b) + 1) * max(lengths[i] for i in b + after[:1]) > budget, case


# -- what reply_logprobs computes: defaults, temperature, autocast, positions -----------------

_PROMPTS = [[5, 6, 7, 8, 9, 10], [11, 12], [5, 6, 7, 8, 9, 10], [20, 21, 22, 23]]
_REPLIES = [[30, 31], [40, 41, 42, 43], [32, 33, 34], [50]]


def _alone(model, prompts, replies, temperature=1.0, autocast_dtype=None):
    """Each row's log-probs and entropies from a forward pass of that row alone (no padding,
    no packing), ``log_softmax(logits / temperature)``, under autocast in ``autocast_dtype``
    when one is given."""
    out = []
    for p, r in zip(prompts, replies, strict=True):
        with torch.no_grad(), torch.autocast("cpu", dtype=autocast_dtype or torch.bfloat16,
                                             enabled=autocast_dtype is not None):
            logits = model(torch.tensor([p + r])).logits[0, len(p) - 1:-1]
        logp_all = torch.log_softmax(logits.float() / temperature, -1)
        out.append((logp_all.gather(1, torch.tensor(r)[:, None])[:, 0],
                    -(logp_all.exp() * logp_all).sum(-1)))
    return out


def _assert_rows_match(logp, mask, ent, alone, atol):
    """``[B, T]`` right-aligned values against each row's own ``(logp, entropy)``."""
    T = logp.shape[1]
    for i, (want, want_ent) in enumerate(alone):
        n = len(want)
        assert mask[i].tolist() == [0.0] * (T - n) + [1.0] * n, i
        torch.testing.assert_close(logp[i, T - n:], want, atol=atol, rtol=0, msg=str(i))
        if ent is not None:
            torch.testing.assert_close(ent[i, T - n:], want_ent, atol=atol, rtol=0, msg=str(i))


def test_reply_logprobs_by_default_are_the_padded_passes_at_temperature_one_without_entropy():
    """A caller that asks for nothing else gets ``log_softmax(logits)`` (temperature 1), no
    entropies (None, in either pass) and the padded pass: exactly ``packed=False``'s values,
    and unpaired prompts and replies refused as :func:`pad_batch` refuses them."""
    from gagpo.agents.models import load_model

    model, tok = load_model("tiny")
    with torch.no_grad():
        logp, mask, ent = reply_logprobs(model, _PROMPTS, _REPLIES, pad_id=tok.pad_token_id)
        assert ent is None
        _assert_rows_match(logp, mask, None, _alone(model, _PROMPTS, _REPLIES), atol=1e-5)
        padded = reply_logprobs(model, _PROMPTS, _REPLIES, pad_id=tok.pad_token_id,
                                packed=False)
        assert torch.equal(logp, padded[0]) and torch.equal(mask, padded[1])
        packed = reply_logprobs(model, _PROMPTS, _REPLIES, pad_id=tok.pad_token_id,
                                packed=True)
        assert packed[2] is None
        torch.testing.assert_close(packed[0], logp, atol=1e-5, rtol=0)
        unpaired = (r"^\d prompts for \d replies: a reply needs its own prompt "
                    r"\(repeat a shared one\)$")
        # Unpaired lists, in either pass (the packed one broadcast one prompt's log-probs
        # under three replies' masks, or failed with an IndexError).
        for prompts, replies in (([[5, 6], [7, 8]], [[9]]), ([[5, 6]], [[9], [10], [11]])):
            for pack in (False, True):
                with pytest.raises(ValueError, match=unpaired):
                    reply_logprobs(model, prompts, replies, pad_id=tok.pad_token_id,
                                   packed=pack)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("temperature", [2.0, 0.5])
def test_log_probs_at_a_temperature_are_those_of_the_logits_divided_by_it(temperature, packed):
    """Any temperature other than 1 (2 included) divides the logits before the softmax: the
    log-probs and entropies of ``softmax(logits / T)``, in the padded and the packed pass."""
    from gagpo.agents.models import load_model

    model, tok = load_model("tiny")
    with torch.no_grad():
        logp, mask, ent = reply_logprobs(model, _PROMPTS, _REPLIES, pad_id=tok.pad_token_id,
                                         temperature=temperature, with_entropy=True,
                                         packed=packed)
    alone = _alone(model, _PROMPTS, _REPLIES, temperature=temperature)
    _assert_rows_match(logp, mask, ent, alone, atol=1e-5)
    plain = _alone(model, _PROMPTS, _REPLIES)  # the test tells the two apart
    assert max((a - b).abs().max() for (a, _), (b, _) in zip(alone, plain, strict=True)) > 0.1


@pytest.mark.parametrize("packed", [False, True])
def test_autocast_runs_the_forward_pass_in_the_dtype_asked_for(packed):
    """``autocast_dtype``: the model runs under autocast in that dtype, bf16 or fp16 (both run
    on a CPU), in the padded and the packed pass: each row's log-probs are those of its own
    forward pass under that autocast, not float32's nor the other half precision's."""
    from gagpo.agents.models import load_model

    model, tok = load_model("tiny")
    got = {}
    for dtype in (torch.bfloat16, torch.float16):
        with torch.no_grad():
            logp, mask, ent = reply_logprobs(model, _PROMPTS, _REPLIES, pad_id=tok.pad_token_id,
                                             with_entropy=True, autocast_dtype=dtype,
                                             packed=packed)
        assert logp.dtype == ent.dtype == torch.float32
        _assert_rows_match(logp, mask, ent,
                           _alone(model, _PROMPTS, _REPLIES, autocast_dtype=dtype), atol=1e-3)
        got[dtype] = logp
    # The three precisions give log-probs apart by more than that tolerance (by 6e-3 at least
    # here): a pass in another one would not pass for the one asked for.
    with torch.no_grad():
        full = reply_logprobs(model, _PROMPTS, _REPLIES, pad_id=tok.pad_token_id,
                              packed=packed)[0]
    for a, b in ((got[torch.bfloat16], got[torch.float16]), (got[torch.float16], full),
                 (got[torch.bfloat16], full)):
        assert (a - b).abs().max() > 1e-3


def test_a_padded_row_keeps_the_positions_it_has_alone_under_absolute_position_embeddings():
    """Left padding must not shift a row's positions: under learned absolute position
    embeddings (GPT-2's; the tiny Llama's rotary ones see only relative positions), a padded
    batch of rows of different lengths gives each row the log-probs of its own forward pass."""
    from transformers import GPT2Config, GPT2LMHeadModel

    with torch.random.fork_rng():  # random weights, the same each run
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2,
                                           n_head=2, bos_token_id=0, eos_token_id=0)).eval()
    prompts, replies = [[5, 6, 7, 8, 9, 10], [11, 12], [20, 21, 22, 23]], [[30, 31], [40], [50]]
    with torch.no_grad():
        logp, mask, ent = reply_logprobs(model, prompts, replies, pad_id=0, with_entropy=True)
    _assert_rows_match(logp, mask, ent, _alone(model, prompts, replies), atol=1e-5)
