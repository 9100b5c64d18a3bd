"""PPO with a learned critic (``--algo ppo``): the critic's values and loss, and a run that
trains, checkpoints and resumes with it. (Its GAE is checked in test_advantages.py; two ranks
under FSDP in test_trainer.py.)"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from two_ranks import TWO_RANKS, run_two_ranks

from gagpo.agents.models import load_model
from gagpo.common.cpu import native_bf16
from gagpo.critic import Critic, CriticStats, ValueModel, value_loss
from gagpo.distributed import Compute, fsdp_units
from gagpo.passes import Passes
from gagpo.train_config import TrainConfig
from gagpo.trainer import train

torch.set_num_threads(1)


def _ppo_cfg(out: Path, **kw) -> TrainConfig:
    # The penalty folded into the rewards: the tiny model's malformed replies give the critic
    # returns to learn (it rarely wins).
    base = dict(invalid_penalty_target="return", model="tiny", mode="generate", algo="ppo",
                n_groups=2, group_size=2, max_steps=3, max_new_tokens=8, history_length=0,
                eval_episodes=0, lr=1e-3,
                critic_lr=1e-3, tensorboard=False, progress=False, out_dir=str(out), seed=3)
    return TrainConfig(**{**base, **kw})


def local_critic(model, tok, cfg: TrainConfig, amp: torch.dtype | None = None) -> Critic:
    """A critic on ``model`` in one CPU process (autocast to ``amp``), its passes chosen as a
    run chooses them."""
    return Critic(model, tok, cfg, tok,
                  passes=Passes.choose(model, cfg, Compute.local(tok.pad_token_id, amp=amp)))


def _prompts(tok) -> list[list[int]]:
    texts = ["search for a red shirt", "buy now", "click the second result please",
             "go to the kitchen and take the apple", "look", "open the fridge"]
    return [tok(t)["input_ids"] for t in texts]


def test_the_clipped_value_loss_is_the_larger_of_the_two_terms():
    v, old, target = torch.tensor([2.0, 0.1]), torch.tensor([0.0, 0.0]), torch.tensor([0.0, 1.0])
    loss, clipped = value_loss(v, old, target, clip=0.5)
    # Row 0: plain (2 - 0)^2 = 4, clipped (0.5 - 0)^2 = 0.25 -> 4 / 2. Row 1: plain 0.81,
    # clipped (0.1 - 1)^2 = 0.81 (within the clip: the same) -> 0.405.
    torch.testing.assert_close(loss, torch.tensor([2.0, 0.405]))
    assert clipped.tolist() == [False, False]
    # A value that moved past the clip towards its target keeps the clipped (larger) loss.
    loss, clipped = value_loss(torch.tensor([0.9]), torch.tensor([0.0]), torch.tensor([1.0]), 0.5)
    torch.testing.assert_close(loss, torch.tensor([0.125]))
    assert clipped.tolist() == [True]


def test_the_value_loss_decreases_on_a_fixed_batch():
    model, tok = load_model("tiny")
    cfg = TrainConfig(model="tiny", algo="ppo", critic_lr=3e-3, value_clip=10.0)
    critic = local_critic(model, tok, cfg)
    prompts = _prompts(tok)
    targets = np.array([1.0, -2.0, 3.0, 0.5, -1.0, 2.0])
    first = critic.values(prompts)
    assert first.tolist() == [0.0] * 6  # the head starts at zero
    losses = []
    for i in range(30):
        values = critic.values(prompts)
        losses.append(critic.update(prompts, values, targets, epoch_seed=i).value_loss)
    assert losses[0] == pytest.approx(0.5 * np.mean(targets ** 2))
    assert losses[-1] < 0.2 * losses[0], losses
    last = critic.values(prompts)
    assert np.corrcoef(last, targets)[0, 1] > 0.9  # it tells the states apart


def test_values_do_not_depend_on_the_batch_they_are_computed_in():
    """Left padding, positions counted over real tokens: a prompt's V is its own, alone or
    beside longer prompts, whatever the micro-batch budget."""
    model, tok = load_model("tiny")
    critic = local_critic(model, tok, TrainConfig(model="tiny", algo="ppo"))
    torch.nn.init.normal_(critic.model.head.weight, std=0.5)  # a head that reads the state
    prompts = _prompts(tok)
    together = critic.values(prompts)
    critic.cfg = TrainConfig(model="tiny", algo="ppo", micro_batch_tokens=1)
    alone = critic.values(prompts)
    # float32 kernels round a row differently in another batch: up to 7e-6 seen on values
    # of size 1-4, where padding read as tokens moves them by 0.1 and more.
    np.testing.assert_allclose(together, alone, atol=1e-4)
    assert len(set(np.round(together, 6))) == 6


def test_ppo_trains_checkpoints_and_resumes_bit_exact(tmp_path):
    whole, split = tmp_path / "whole", tmp_path / "split"
    train(_ppo_cfg(whole, iterations=3))
    train(_ppo_cfg(split, iterations=2))
    train(_ppo_cfg(split, iterations=3, resume=True))
    a = torch.load(whole / "checkpoint.pt", weights_only=False)
    b = torch.load(split / "checkpoint.pt", weights_only=False)
    for part in (a["model"], a["critic"]["model"]):
        other = b["model"] if part is a["model"] else b["critic"]["model"]
        assert part.keys() == other.keys() and len(part) > 0
        assert all(torch.equal(part[k], other[k]) for k in part)
    # The critic learned (its head left zero) and so did the policy.
    assert a["critic"]["model"]["head.weight"].abs().sum() > 0
    init = dict(load_model("tiny")[0].named_parameters())
    assert any(not torch.equal(init[k].detach(), a["model"][k]) for k in a["model"])
    # The step table holds the critic's V beside GAGPO's grouped V(s); the first iteration's
    # critic is the zero head.
    first = np.load(whole / "steps" / "iter_00001.npz")
    last = np.load(whole / "steps" / "iter_00003.npz")
    assert len(first["critic_value"]) == len(first["value"]) > 0
    assert (first["critic_value"] == 0).all() and (last["critic_value"] != 0).any()
    metrics = [json.loads(x) for x in (whole / "metrics.jsonl").read_text().splitlines()]
    assert all("critic/value_loss" in m and "critic/explained_variance" in m for m in metrics)
    assert metrics[0]["critic/value_mean"] == 0.0


def test_the_policy_waits_out_the_critic_warmup(tmp_path):
    train(_ppo_cfg(tmp_path, iterations=2, critic_warmup=2))
    ckpt = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    init = dict(load_model("tiny")[0].named_parameters())
    assert all(torch.equal(init[k].detach(), v) for k, v in ckpt["model"].items())
    assert ckpt["critic"]["model"]["head.weight"].abs().sum() > 0
    metrics = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["loss/grad_norm"] for m in metrics] == [0.0, 0.0]
    assert all(m["critic/grad_norm"] > 0 for m in metrics)


def test_under_lora_the_critic_trains_its_own_adapters_and_head(tmp_path):
    train(_ppo_cfg(tmp_path, iterations=1, lora_rank=4))
    ckpt = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    names = list(ckpt["critic"]["model"])
    assert {"head.weight", "head.bias"} <= set(names)
    assert all("lora_" in n or n.startswith("head.") for n in names)
    assert all("lora_" in n for n in ckpt["model"])


def test_the_critics_checkpoint_state_reads_its_weights_in_place():
    """A checkpoint is written at once from ``state()``: the weights it hands out are the
    critic's own tensors (no second copy of a model's weights at every checkpoint), all of them,
    with the optimizer's state beside them."""
    model, tok = load_model("tiny")
    critic = local_critic(model, tok, TrainConfig(model="tiny", algo="ppo"))
    state = critic.state()
    params = dict(critic.model.named_parameters())
    assert state["model"].keys() == params.keys()
    assert all(state["model"][n].data_ptr() == p.data_ptr() for n, p in params.items())
    assert set(state["optimizer"]) == {"state", "param_groups"}


def test_critic_settings_are_checked():
    with pytest.raises(ValueError, match="critic_lr"):
        TrainConfig(algo="ppo", critic_lr=0.0)
    with pytest.raises(ValueError, match="value_clip"):
        TrainConfig(algo="ppo", value_clip=-1.0)
    with pytest.raises(ValueError, match="critic_warmup"):
        TrainConfig(algo="ppo", critic_warmup=-1)


def test_a_critic_model_with_another_tokenizer_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"tokenises text differently .*\btokens, so it needs "
                                         r"the policy's tokenizer$"):
        train(_ppo_cfg(tmp_path, iterations=1, critic_model="smollm2-135m"))


def test_the_critic_steps_at_its_own_learning_rate_and_weight_decay():
    """``--critic-lr`` and ``--weight-decay`` reach the critic's optimizer (not AdamW's
    defaults, 1e-3 and 0.01)."""
    model, tok = load_model("tiny")
    cfg = TrainConfig(model="tiny", algo="ppo", critic_lr=3e-5, weight_decay=0.2)
    (group,) = local_critic(model, tok, cfg).optimizer.param_groups
    assert (group["lr"], group["weight_decay"]) == (3e-5, 0.2)


def test_the_value_reads_the_prompt_to_its_last_token():
    """V(s) is read at the prompt's last token, which has seen the whole prompt: two prompts
    that differ only in their last token get different values."""
    model, tok = load_model("tiny")
    vm = ValueModel(model).eval()
    torch.nn.init.normal_(vm.head.weight, std=0.5)
    with torch.no_grad():
        v = vm([[5, 6, 7, 8], [5, 6, 7, 9]], pad_id=tok.pad_token_id, amp=None)
    assert abs(float(v[0] - v[1])) > 1e-3


def test_rows_sharing_a_prompt_run_once_and_train_the_critic_as_separate_rows_do():
    """Packed passes (--pack-prompts on): the copies of a task in one state share a prompt,
    and the critic runs it once for all of them. Their values are the padded passes', and the
    update moves the critic as the padded update does (each row's loss still counts)."""
    model, tok = load_model("tiny")
    prompts = _prompts(tok)
    shared = [prompts[0], prompts[2], prompts[0], prompts[4], prompts[2], prompts[0], []]
    targets = np.array([1.0, -2.0, 0.5, 3.0, -1.0, 2.0, 0.0])
    start = local_critic(model, tok, TrainConfig(model="tiny", algo="ppo")).model
    torch.nn.init.normal_(start.head.weight, std=0.5)  # a head that passes gradients back
    start = {k: v.clone() for k, v in start.state_dict().items()}
    results = {}
    for pack in ("off", "on"):
        cfg = TrainConfig(model="tiny", algo="ppo", pack_prompts=pack, value_clip=10.0,
                          ppo_epochs=1, num_minibatches=1, micro_batch_tokens=24)
        critic = local_critic(load_model("tiny")[0], tok, cfg)
        critic.model.load_state_dict(start)
        params = [p for p in critic.model.parameters() if p.requires_grad]
        critic.optimizer = torch.optim.SGD(params, lr=0.05)  # moves as the gradients do
        rows: list[int] = []
        hook = critic.model.backbone.register_forward_hook(
            lambda _m, _a, kw, _o, rows=rows: rows.append(kw["input_ids"].shape[0]),
            with_kwargs=True)
        values = critic.values(shared)
        seen_by_values = sum(rows)
        rows.clear()
        critic.update(shared, values, targets, epoch_seed=0)
        hook.remove()
        results[pack] = (critic.model.state_dict(), values, seen_by_values, sum(rows))
    (off, v_off, values_off, update_off), (on, v_on, values_on, update_on) = results.values()
    assert (values_off, update_off) == (6, 6)  # every row with a prompt, the empty one not
    assert (values_on, update_on) == (3, 3)  # each distinct prompt once
    np.testing.assert_allclose(v_on, v_off, atol=1e-4)  # rounding (see above)
    assert v_on[0] == v_on[2] == v_on[5] != v_on[1] and v_on[6] == 0.0
    for name, weight in off.items():
        torch.testing.assert_close(on[name], weight, atol=2e-5, rtol=1e-4, msg=name)
    assert max(float((off[k] - start[k]).abs().max()) for k in start) > 1e-3  # it moved


# ---------------------------------------------------------------------------------------------
# What the critic hands back and what it regresses on, against references computed here.


def _shuffled_prompts(tok) -> list[list[int]]:
    """Prompts of many lengths in no length order, with steps that gave no prompt (an empty
    one first, so that positions among the rows with prompts are not row ids)."""
    p = _prompts(tok)
    return [[], p[3], p[1], p[5], [], p[0], p[2], p[4], p[3]]


@pytest.mark.parametrize("amp", [None, torch.bfloat16])
@pytest.mark.parametrize("pack", ["off", "on"])
@pytest.mark.parametrize("budget", [16384, 24])
def test_values_are_each_rows_own_in_the_callers_order(pack, budget, amp):
    """``values`` sorts and packs prompts into micro-batches; what it returns is row i's V at
    position i: each prompt's V computed alone by the value model, 0 where no prompt, at the
    precision asked for (bf16 and float32 values differ by about 0.05 here)."""
    model, tok = load_model("tiny")
    cfg = TrainConfig(model="tiny", algo="ppo", pack_prompts=pack, micro_batch_tokens=budget)
    critic = local_critic(model, tok, cfg, amp)
    torch.nn.init.normal_(critic.model.head.weight, std=0.5)  # a head that reads the state
    prompts = _shuffled_prompts(tok)
    got = critic.values(prompts)
    critic.model.eval()
    with torch.no_grad():
        alone = [float(critic.model([p], pad_id=tok.pad_token_id, amp=amp)[0]) if p else 0.0
                 for p in prompts]
    # Rounding: see the test above. Emulated bf16 (no AVX512-BF16 or AMX) rounds a product by
    # the shape of its pass: a row batched and alone differ by up to about two bf16 steps
    # (0.028 at 2.8 seen), far below the rows' own differences (0.6 or more), so each row's
    # place is still pinned there, its precision only where bf16 is native.
    rtol, atol = (2e-2, 1e-2) if amp is not None and not native_bf16() else (0.0, 1e-4)
    np.testing.assert_allclose(got, alone, rtol=rtol, atol=atol)
    assert got[0] == got[4] == 0.0 and got[1] == pytest.approx(got[8], rel=rtol, abs=atol)
    assert len({round(v, 5) for v in got[1:4]}) == 3  # the rows differ: their order shows


def test_padded_passes_group_prompts_of_like_length():
    """Where prompts are padded (not packed), the critic's micro-batches take them sorted by
    length, so that a pass pads little: three short and three long prompts, interleaved, under a
    budget of 36 padded positions, run as one pass of the short and one of the long (42
    positions read), not as two mixed passes padded to the long length (72)."""
    model, tok = load_model("tiny")
    cfg = TrainConfig(model="tiny", algo="ppo", pack_prompts="off", micro_batch_tokens=36)
    critic = local_critic(model, tok, cfg)
    prompts = [[5, 6], [7] * 12, [8, 9], [10] * 12, [11, 12], [13] * 12]
    shapes: list[tuple[int, ...]] = []
    hook = critic.model.backbone.register_forward_pre_hook(
        lambda module, args, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)),
        with_kwargs=True)
    critic.values(prompts)
    critic.update(prompts, np.zeros(6), np.ones(6), epoch_seed=0)
    hook.remove()
    assert sorted(shapes) == [(3, 2), (3, 2), (3, 12), (3, 12)]  # values, then the update


@pytest.mark.parametrize("pack", ["off", "on"])
def test_the_update_scores_each_row_against_its_own_target(pack):
    """One optimizer step, so the loss is taken at V = V_old: value_loss is 1/2 mean (V_old -
    R)^2 over the rows with a prompt, each against its own R; the explained variance and the
    mean value are those rows' too (an empty prompt first shifts positions from row ids)."""
    model, tok = load_model("tiny")
    cfg = TrainConfig(model="tiny", algo="ppo", pack_prompts=pack, value_clip=10.0,
                      ppo_epochs=1, num_minibatches=1, micro_batch_tokens=24)
    critic = local_critic(model, tok, cfg)
    torch.nn.init.normal_(critic.model.head.weight, std=0.5)
    torch.nn.init.constant_(critic.model.head.bias, 0.3)
    prompts = _shuffled_prompts(tok)
    old = critic.values(prompts)
    targets = np.array([9.0, 1.0, -2.0, 3.0, -7.0, 0.5, -1.0, 2.0, 4.0])  # 9, -7: no prompt
    stats = critic.update(prompts, old, targets, epoch_seed=0)
    rows = [i for i, p in enumerate(prompts) if p]
    v, r = old[rows], targets[rows]
    assert stats.value_loss == pytest.approx(0.5 * np.mean((v - r) ** 2), rel=1e-4)
    assert stats.explained_variance == pytest.approx(1 - np.var(r - v) / np.var(r), rel=1e-6)
    assert stats.value_mean == pytest.approx(np.mean(v), rel=1e-6)
    assert stats.clip_frac == 0.0  # V = V_old: the clipped term equals the plain one


def _lambda_returns(table: dict, value: np.ndarray, gamma: float, lam: float) -> np.ndarray:
    """R_t = A_t + V(s_t), A_t = delta_t + gamma lam A_{t+1}, delta_t = r_t + gamma V(s_{t+1})
    - V(s_t) (V = 0 after the last step), one trajectory at a time, in the table's rows."""
    out = np.zeros(len(value))
    for traj in set(table["trajectory"].tolist()):
        rows = sorted(np.flatnonzero(table["trajectory"] == traj), key=lambda i: table["t"][i])
        next_value = next_adv = 0.0
        for i in reversed(rows):
            delta = float(table["reward"][i]) + gamma * next_value - float(value[i])
            next_adv = delta + gamma * lam * next_adv
            next_value = float(value[i])
            out[i] = next_adv + value[i]
    return out


def test_the_trainer_regresses_the_critic_on_the_lambda_return_of_its_values(tmp_path):
    """A PPO run's second iteration, replayed from its step table: the critic's explained
    variance and mean value are those of the lambda-return R = GAE(gamma, lam) + V on the
    critic values the table saved (not the discounted return, not the advantage), with
    gamma and lam chosen apart so that each wrong target gives another figure."""
    gamma, lam = 0.8, 0.3
    train(_ppo_cfg(tmp_path, iterations=2, gamma=gamma, lam=lam, max_steps=4,
                   critic_lr=3e-2))
    metrics = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    with np.load(tmp_path / "steps" / "iter_00002.npz") as f:
        table = {k: f[k] for k in f.files}
    v = table["critic_value"].astype(np.float64)
    assert len(set(table["trajectory"].tolist())) == 4 and (v != 0).all()
    assert (table["t"] > 0).any()  # episodes of several steps: lam and gamma both matter
    R = _lambda_returns(table, v, gamma, lam)
    second = metrics[1]
    assert second["critic/explained_variance"] == pytest.approx(
        1 - np.var(R - v) / np.var(R), rel=1e-4, abs=1e-5)
    assert second["critic/value_mean"] == pytest.approx(np.mean(v), rel=1e-5)
    # The other candidates give other figures: the check can tell them apart.
    G = _lambda_returns(table, np.zeros_like(v), gamma, 1.0)
    assert abs(1 - np.var(G - v) / np.var(G) - second["critic/explained_variance"]) > 1e-3


@pytest.mark.parametrize("amp", [None, torch.bfloat16])
@pytest.mark.parametrize("pack", ["off", "on"])
def test_the_update_clips_each_row_against_the_value_its_advantages_used(pack, amp):
    """V_old is the value the advantages used, not the critic's value now (it may have moved
    since): with a tight clip, each row's loss is 1/2 max((V - R)^2, (V_old + clip(V - V_old)
    - R)^2) and the clip fraction the share of rows where the clipped term is larger, over
    several micro-batches; the gradient is that of their mean (one optimizer step: its norm
    before clipping is the one logged), at the update's precision."""
    model, tok = load_model("tiny")
    clip = 0.1
    cfg = TrainConfig(model="tiny", algo="ppo", pack_prompts=pack, value_clip=clip,
                      ppo_epochs=1, num_minibatches=1, micro_batch_tokens=24)
    critic = local_critic(model, tok, cfg, amp)
    torch.nn.init.normal_(critic.model.head.weight, std=0.5)
    torch.nn.init.constant_(critic.model.head.bias, 0.3)
    prompts = _shuffled_prompts(tok)
    now = critic.values(prompts)
    old = now + np.array([0.0, 0.5, -0.5, 0.02, 0.0, -0.3, 0.4, 0.01, -0.6])
    targets = np.array([9.0, 1.0, -2.0, 3.0, -7.0, 0.5, -1.0, 2.0, 4.0])
    rows = [i for i, p in enumerate(prompts) if p]
    # The gradient of the mean loss, by autograd on one padded pass (the update's passes
    # come out the same: a prompt's V does not depend on its batch).
    critic.model.train()
    v = critic.model([prompts[i] for i in rows], pad_id=tok.pad_token_id, amp=amp)
    loss, _ = value_loss(v, torch.tensor(old[rows], dtype=torch.float32),
                         torch.tensor(targets[rows], dtype=torch.float32), clip)
    params = [p for p in critic.model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss.mean(), params)
    want_norm = float(torch.sqrt(sum((g.double() ** 2).sum() for g in grads)))
    stats = critic.update(prompts, old, targets, epoch_seed=0)
    v, o, r = now[rows], old[rows], targets[rows]
    plain, clipped = (v - r) ** 2, (o + np.clip(v - o, -clip, clip) - r) ** 2
    # (bf16 values are a prompt's own to 1e-6 whatever the batch; float32's are 0.1 away.)
    assert stats.value_loss == pytest.approx(0.5 * np.mean(np.maximum(plain, clipped)),
                                             rel=1e-4)
    assert 0 < stats.clip_frac < 1
    assert stats.clip_frac == pytest.approx(np.mean(clipped > plain))
    assert stats.grad_norm == pytest.approx(want_norm, rel=1e-3 if amp is None else 5e-2)


def test_a_minibatch_of_one_row_steps_on_that_rows_own_loss():
    """The loss is divided by the rows of the minibatch, however few: one row, one loss."""
    model, tok = load_model("tiny")
    cfg = TrainConfig(model="tiny", algo="ppo", value_clip=10.0)
    critic = local_critic(model, tok, cfg)
    torch.nn.init.normal_(critic.model.head.weight, std=0.5)
    prompts = [[], _prompts(tok)[2]]
    old, target = np.array([0.0, 0.2]), np.array([0.0, 1.5])
    critic.model.train()
    v = critic.model([prompts[1]], pad_id=tok.pad_token_id, amp=None)
    loss, _ = value_loss(v, torch.tensor([0.2]), torch.tensor([1.5]), 10.0)
    params = [p for p in critic.model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss.sum(), params)
    want = float(torch.sqrt(sum((g.double() ** 2).sum() for g in grads)))
    stats = critic.update(prompts, old, target, epoch_seed=0)
    assert stats.value_loss == pytest.approx(float(loss), rel=1e-5)
    assert stats.grad_norm == pytest.approx(want, rel=1e-3)


def test_the_logged_gradient_norm_is_the_mean_over_the_updates_optimizer_steps():
    """Two epochs of two minibatches: four optimizer steps, and ``grad_norm`` is the mean of
    their gradient norms (before clipping; the clip is out of reach here), as each step saw
    them."""
    model, tok = load_model("tiny")
    cfg = TrainConfig(model="tiny", algo="ppo", value_clip=10.0, ppo_epochs=2,
                      num_minibatches=2, max_grad_norm=1e9)
    critic = local_critic(model, tok, cfg)
    torch.nn.init.normal_(critic.model.head.weight, std=0.5)
    params = [p for p in critic.model.parameters() if p.requires_grad]
    norms: list[float] = []
    critic.optimizer.register_step_pre_hook(lambda *_: norms.append(float(torch.sqrt(sum(
        (p.grad.double() ** 2).sum() for p in params if p.grad is not None)))))
    prompts = _prompts(tok)
    old = critic.values(prompts)
    stats = critic.update(prompts, old, np.array([1.0, -2.0, 3.0, 0.5, -1.0, 2.0]), epoch_seed=0)
    assert len(norms) == 4 and len(set(norms)) == 4
    assert stats.grad_norm == pytest.approx(np.mean(norms), rel=1e-6)


def test_an_update_with_nothing_to_explain_logs_zeros_not_nans():
    """No step with a prompt (a rank dealt only empty ones), or returns that do not vary: the
    explained variance and the mean value are 0, not NaN, and numpy warns of nothing."""
    model, tok = load_model("tiny")
    critic = local_critic(model, tok, TrainConfig(model="tiny", algo="ppo"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stats = critic.update([[], []], np.zeros(2), np.array([1.0, 2.0]), epoch_seed=0)
        assert stats == CriticStats(value_loss=0.0, clip_frac=0.0, explained_variance=0.0,
                                    value_mean=0.0, grad_norm=0.0)
        prompts = _prompts(tok)[:3]
        stats = critic.update(prompts, np.array([0.5, 0.5, 0.5]), np.full(3, 2.0), epoch_seed=0)
    assert stats.explained_variance == 0.0  # Var(R) = 0: nothing to explain
    assert stats.value_mean == 0.5


def test_fsdp_shards_the_critic_one_transformer_block_at_a_time():
    """The critic's value model keeps its language model's list of transformer blocks, so
    FSDP gathers one block at a time, as for the policy, rather than the whole backbone."""
    model, _ = load_model("tiny")
    blocks = list(model.get_decoder().layers)
    assert len(blocks) == model.config.num_hidden_layers > 1
    assert [id(m) for m in fsdp_units(model)] == [id(m) for m in blocks]
    assert [id(m) for m in fsdp_units(ValueModel(model))] == [id(m) for m in blocks]


def test_the_critic_computes_in_bf16_whatever_the_devices_autocast_default():
    """``amp=bfloat16`` is bf16 on every device: CUDA's autocast defaults to float16, so the
    dtype is named, not left to the device. Simulated by making float16 the CPU's default."""
    model, tok = load_model("tiny")
    vm = ValueModel(model).eval()
    torch.nn.init.normal_(vm.head.weight, std=0.5)
    prompts = _prompts(tok)
    before = torch.get_autocast_dtype("cpu")
    with torch.no_grad():
        want = vm(prompts, pad_id=tok.pad_token_id, amp=torch.bfloat16)
        torch.set_autocast_dtype("cpu", torch.float16)
        try:
            got = vm(prompts, pad_id=tok.pad_token_id, amp=torch.bfloat16)
            with torch.autocast("cpu"):  # what the device's default gives: other values
                other = vm.head(vm.backbone(input_ids=torch.tensor([prompts[0]]), use_cache=False
                                            ).last_hidden_state[:, -1].float()).squeeze(-1)
        finally:
            torch.set_autocast_dtype("cpu", before)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert abs(float(other[0]) - float(want[0])) > 1e-4


@TWO_RANKS
@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
def test_critic_over_two_ranks_updates_like_one_process_on_all_rows(tmp_path, parallel):
    """The critic's update with its rows split unevenly over 2 gloo ranks moves the value
    model, and measures the gradient, as one process updating on all the rows: each loss
    divided by the global row count, gradients summed over ranks, FSDP's padding passes (the
    rank with fewer micro-batches) adding nothing."""
    from distributed_critic import critic, start_weights, update

    c = critic("ddp")
    grad_norm = update(c, [0, 1, 2, 3, 4, 5])
    whole = {k: v.detach() for k, v in c.model.state_dict().items()}
    saved = run_two_ranks("distributed_critic.py", parallel, tmp_path)
    assert saved["grad_norm"] == pytest.approx(grad_norm, rel=1e-4)
    start = start_weights()
    assert saved["params"].keys() == whole.keys() == start.keys()
    assert max(float((whole[k] - start[k]).abs().max()) for k in whole
               if not k.startswith("head")) > 1e-4  # the backbone moved, not only the head
    for k in whole:
        torch.testing.assert_close(saved["params"][k], whole[k], atol=2e-5, rtol=1e-4, msg=k)
    if parallel == "ddp":  # every rank's critic starts from rank 0's weights, not its own
        from distributed_update import policy

        rank0 = ValueModel(policy()[0]).state_dict()
        assert len(saved["starts"]) == 2
        for held in saved["starts"]:
            for k, v in rank0.items():
                torch.testing.assert_close(held[k], v, rtol=0, atol=0, msg=k)
