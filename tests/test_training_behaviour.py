"""The trainer trains forwards, on the data it says it trains on.

Corridor-v0 (tests/corridor.py) is a two-step text task with one right action per state, where
learning is certain: every estimator must raise the share of right actions within a few
iterations, and the same run with its advantages reversed must lower it. Around that: the
update receives the step table's saved advantages row for row, its log-probs are those of the
sampling distribution (ratio 1 on the first epoch, at any temperature), its gradient does not
depend on the micro-batches, the KL term's reference is the starting policy (the base model or
the warm-started one, with and without LoRA), and the copies of a group share task and seed.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import corridor  # noqa: E402  (registers Corridor-v0)

import gagpo.passes as passes  # noqa: E402
import gagpo.policy_update as policy_update  # noqa: E402
import gagpo.trainer as trainer  # noqa: E402
from gagpo.advantages import compute_advantages  # noqa: E402
from gagpo.agents.models import load_model  # noqa: E402
from gagpo.distributed import Compute  # noqa: E402
from gagpo.logprobs import reply_logprobs  # noqa: E402
from gagpo.policy_update import reference_weights  # noqa: E402
from gagpo.train_config import TrainConfig  # noqa: E402

torch.set_num_threads(1)
CORRIDOR = "corridor:Corridor-v0"


def _cfg(out: Path, **kw) -> TrainConfig:
    base = dict(env=CORRIDOR, model="tiny", mode="score", n_groups=4, group_size=4,
                history_length=0, eval_episodes=0, lr=1e-2, kl_coef=0.0, tensorboard=False,
                progress=False, out_dir=str(out), seed=1, save_every=0, iterations=3)
    return TrainConfig(**{**base, **kw})


def _table(out: Path, iteration: int) -> dict[str, np.ndarray]:
    with np.load(out / "steps" / f"iter_{iteration:05d}.npz") as t:
        return {k: t[k] for k in t.files}


def _metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _right_share(out: Path, iteration: int) -> float:
    """Share of the iteration's steps that took the right action."""
    return float(np.mean(_table(out, iteration)["action"] == corridor.FORWARD))


@pytest.fixture
def reversed_advantages(monkeypatch):
    """Make the trainer use minus the estimator's advantages (a trainer that trains
    backwards)."""
    estimate = trainer.advantages_of

    def minus(*args, **kwargs):
        adv, details = estimate(*args, **kwargs)
        return -adv, details

    def apply() -> None:
        monkeypatch.setattr(trainer, "advantages_of", minus)

    return apply


@pytest.mark.parametrize("algo", ["gagpo", "gigpo", "grpo", "rloo"])
def test_each_estimator_learns_and_reversed_advantages_unlearn(tmp_path, algo,
                                                                reversed_advantages):
    forward, backward = tmp_path / "forward", tmp_path / "backward"
    trainer.train(_cfg(forward, algo=algo))
    reversed_advantages()
    trainer.train(_cfg(backward, algo=algo))
    # The first rollouts are the untrained model's, the same in both runs.
    start = _right_share(forward, 1)
    assert _right_share(backward, 1) == start and 0.05 < start < 0.7
    assert _right_share(forward, 3) > 0.9 and _right_share(backward, 3) < 0.1
    success = {name: [m["train/success"] for m in _metrics(out)]
               for name, out in (("forward", forward), ("backward", backward))}
    assert success["forward"][-1] > 0.9 > success["forward"][0]
    assert success["backward"][-1] == 0.0


def test_the_update_gets_the_saved_advantages_row_for_row(tmp_path, monkeypatch):
    """What the update trains on is the step table the run saves: each step's reply tokens,
    sampling log-probs and advantage, in row order; and the saved advantages are the
    estimator's on the saved rewards."""
    batches = []
    update = trainer.update

    def spy(model, ref_model, optimizer, batch, cfg, **kw):
        batches.append(dataclasses.asdict(batch))  # (a frozen UpdateBatch)
        return update(model, ref_model, optimizer, batch, cfg, **kw)

    monkeypatch.setattr(trainer, "update", spy)
    cfg = _cfg(tmp_path, iterations=2, lam=0.9, gamma=0.8, lr=1e-5, seed=3)  # both mixed
    trainer.train(cfg)
    assert len(batches) == 2
    for it, batch in enumerate(batches, start=1):
        t = _table(tmp_path, it)
        # (saved as float32: the batch's float64 values rounded alike, bit for bit)
        saved = t["advantage"]
        assert np.asarray(batch["adv"], saved.dtype).tolist() == saved.tolist()
        assert np.abs(t["advantage"]).max() > 0
        assert [len(r) for r in batch["reply"]] == t["n_tokens"].tolist()
        assert [sum(lp) for lp in batch["old_logp"]] == pytest.approx(t["logprob_sum"].tolist())
        adv = compute_advantages(
            "gagpo", group=t["group"], trajectory=t["trajectory"], step=t["t"],
            key=t["state_key"].astype(object), reward=t["reward"], gamma=0.8, lam=0.9,
            norm=cfg.norm, penalty=t["penalty"])
        assert t["advantage"] == pytest.approx(adv)
        # Rewards: reward_scale x won at an episode's last step, the invalid penalty apart.
        expected = np.where(t["done"], cfg.reward_scale * t["won"], 0.0)
        assert t["reward"].tolist() == expected.tolist()


@pytest.mark.parametrize("mode, temperature", [("generate", 0.0), ("generate", 0.6),
                                               ("generate", 1.0), ("generate", 1.7),
                                               ("score", 0.5)])
@pytest.mark.parametrize("recompute", [False, True])
def test_first_epoch_ratio_is_one_at_the_sampling_temperature(tmp_path, mode, temperature,
                                                              recompute):
    """On the first epoch pi_theta = pi_old: the update scores the replies with the
    distribution they were sampled from (log_softmax(logits / T) in generate mode, the raw
    model's when greedy (T = 0); the raw model in score mode, whose temperature acts on whole
    replies' scores), so the ratio is 1 and nothing is clipped."""
    trainer.train(_cfg(tmp_path, mode=mode, temperature=temperature, iterations=1,
                       max_new_tokens=6, n_groups=2, group_size=2,
                       recompute_old_logp=recompute, clip_eps=0.01, kl_coef=0.05))
    [m] = _metrics(tmp_path)
    assert m["loss/ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    assert m["loss/clip_frac"] == 0.0
    assert m["loss/kl"] == pytest.approx(0.0, abs=1e-6)  # the reference, scored alike
    if recompute:
        assert m["rollout/logprob_gap"] == pytest.approx(0.0, abs=1e-4)


def _random_batch(tok, n: int = 6, seed: int = 0) -> dict:
    """Replies of different lengths, with advantages of both signs and old log-probs off the
    model's (so ratios differ from 1 and some are clipped)."""
    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(5, 200, (int(k),), generator=g).tolist()
               for k in torch.randint(3, 12, (n,), generator=g)]
    replies = [torch.randint(5, 200, (int(k),), generator=g).tolist()
               for k in torch.randint(1, 7, (n,), generator=g)]
    model = load_model("tiny")[0]
    with torch.no_grad():
        logp, mask, _ = reply_logprobs(model, prompts, replies, pad_id=tok.pad_token_id)
    old = [(logp[i, mask.shape[1] - len(r):] + 0.3 * torch.randn(len(r), generator=g)).tolist()
           for i, r in enumerate(replies)]
    adv = (torch.randn(n, generator=g) * 2).tolist()
    return {"prompt": prompts, "reply": replies, "old_logp": old, "adv": adv}


@pytest.mark.parametrize("algo, aggregation", [("gagpo", None), ("grpo", None),
                                               ("grpo", "seq-mean")])
def test_the_gradient_does_not_depend_on_the_micro_batches(algo, aggregation):
    """One micro-batch or one per reply: the same gradient (compared through one SGD step of
    learning rate 1, which moves every parameter by exactly minus its gradient)."""
    tok = load_model("tiny")[1]
    batch = _random_batch(tok)
    ref = load_model("tiny")[0]
    with torch.no_grad():
        for p in ref.parameters():  # a reference off the model, so the KL term has a gradient
            p.add_(0.01 * torch.randn_like(p))
    moved, logged = [], []
    for budget in (10**6, 1):
        model = load_model("tiny")[0]
        cfg = TrainConfig(algo=algo, aggregation=aggregation, kl_coef=0.1, entropy_coef=0.01,
                          micro_batch_tokens=budget, max_grad_norm=0.0, clip_eps=0.1)
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        stats = trainer.update(model, ref, opt, batch, cfg,
                               compute=Compute.local(tok.pad_token_id), epoch_seed=0)
        moved.append({n: p.detach() - before[n] for n, p in model.named_parameters()})
        assert 0 < stats.clip_frac < 1 and stats.kl > 0
        logged.append(stats)
    assert any(d.abs().max() > 0 for d in moved[0].values())
    for name, step in moved[0].items():
        torch.testing.assert_close(moved[1][name], step, rtol=1e-3, atol=2e-6)
    # ... and the same statistics, summed over the micro-batches.
    for field in ("pg_loss", "kl", "entropy", "clip_frac", "ratio_mean"):
        assert getattr(logged[1], field) == pytest.approx(getattr(logged[0], field),
                                                          rel=1e-4), field


def _probe_ids() -> torch.Tensor:
    return torch.tensor([[5, 17, 42, 8, 99, 23, 61, 7]])


def _logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(_probe_ids()).logits.float()


@pytest.mark.parametrize(("lora_rank", "lora_embeddings"), [(0, False), (4, False), (4, True)])
@pytest.mark.parametrize("warm_start", [False, True])
def test_the_kl_reference_is_the_starting_policy(tmp_path, monkeypatch, lora_rank,
                                                 lora_embeddings, warm_start):
    """With ``kl_coef > 0``: the KL is 0 before the weights move and above 0 after; the
    reference the update uses is the policy training started from: the base model, or the
    model as the warm start left it (its weights: the same outputs), with and without LoRA,
    and with LoRA beside embeddings trained in full (``--lora-embeddings``)."""
    start: list[torch.Tensor] = []
    cloning = trainer.behaviour_cloning

    def warm(model, *args, **kwargs):
        nll = cloning(model, *args, **kwargs)
        start.append(_logits(model))
        return nll

    seen: list[tuple[torch.Tensor, torch.Tensor]] = []
    update = trainer.update

    def spy(model, ref_model, *args, **kwargs):
        if not start:
            start.append(_logits(model))
        with reference_weights(model, ref_model) as ref:
            reference = _logits(ref)
        stats = update(model, ref_model, *args, **kwargs)
        seen.append((reference, _logits(model)))
        return stats

    monkeypatch.setattr(trainer, "behaviour_cloning", warm)
    monkeypatch.setattr(trainer, "update", spy)
    cfg = _cfg(tmp_path, iterations=2, kl_coef=0.05, lora_rank=lora_rank,
               lora_embeddings=lora_embeddings, bc_episodes=2 if warm_start else 0, bc_lr=1e-2)
    trainer.train(cfg)
    base = _logits(load_model("tiny")[0])
    if warm_start:
        assert not torch.allclose(start[0], base, atol=1e-3)  # the warm start moved it
    else:
        torch.testing.assert_close(start[0], base)
    for reference, after in seen:
        torch.testing.assert_close(reference, start[0], rtol=1e-5, atol=1e-5)
        assert not torch.allclose(after, start[0], atol=1e-4)  # the update moved the policy
    kl = [m["loss/kl"] for m in _metrics(tmp_path)]
    assert kl[0] == pytest.approx(0.0, abs=1e-6) and kl[1] > 1e-5


def test_the_reference_in_the_autocast_dtype_gives_the_float32_copys_logprobs():
    """Under bf16 autocast the frozen reference keeps its linear weights in bf16 (half their
    memory) and still gives a float32 copy's reply log-probs bit for bit; the tied embedding
    and the norms stay float32. Without autocast it is a plain float32 copy."""
    model, tok = load_model("tiny")
    full = copy.deepcopy(model).eval().requires_grad_(False)
    ref = policy_update.frozen_reference(model, torch.bfloat16)
    embedding = ref.get_input_embeddings().weight
    linear = [m for m in ref.modules() if type(m) is torch.nn.Linear]
    assert embedding.dtype == torch.float32 and ref.lm_head.weight is embedding
    assert [m.weight.dtype for m in linear if m.weight is not embedding] == \
        [torch.bfloat16] * (len(linear) - 1)
    assert all(not p.requires_grad for p in ref.parameters())
    nbytes = sum(p.numel() * p.element_size() for p in ref.parameters())
    assert nbytes < 0.75 * sum(p.numel() * p.element_size() for p in full.parameters())
    prompts, replies = [[5, 17, 42, 8, 99], [23, 61]], [[7, 3, 12], [44]]
    with torch.no_grad():
        a = reply_logprobs(full, prompts, replies, pad_id=tok.pad_token_id,
                           autocast_dtype=torch.bfloat16)[0]
        b = reply_logprobs(ref, prompts, replies, pad_id=tok.pad_token_id,
                           autocast_dtype=torch.bfloat16)[0]
    assert torch.equal(a, b)
    plain = policy_update.frozen_reference(model, None)
    assert {p.dtype for p in plain.parameters()} == {torch.float32}


def test_a_resumed_run_frees_its_checkpoint_before_it_trains(tmp_path, monkeypatch):
    """A resume loads the checkpoint's weights and optimizer state and keeps no second copy:
    during the update, of the tensors the checkpoint held only the optimizer's own moments
    (loaded in place, not copied) are alive."""
    import gc
    import weakref

    cfg = _cfg(tmp_path, iterations=1, save_every=1, kl_coef=0.05, bc_episodes=2)
    trainer.train(cfg)
    loaded: list[weakref.ref] = []
    load = torch.load

    def spy_load(*args, **kwargs):
        state = load(*args, **kwargs)
        for part in ("model", "reference"):
            loaded.extend(weakref.ref(t) for t in state[part].values())
        loaded.extend(weakref.ref(t) for s in state["optimizer"]["state"].values()
                      for t in s.values() if torch.is_tensor(t) and t.dim() > 0)
        return state

    alive: list[int] = []
    moments: list[int] = []
    update = trainer.update

    def spy_update(model, ref_model, optimizer, *args, **kwargs):
        gc.collect()
        alive.extend(id(r()) for r in loaded if r() is not None)
        moments.extend(id(t) for s in optimizer.state.values() for t in s.values()
                       if torch.is_tensor(t) and t.dim() > 0)
        return update(model, ref_model, optimizer, *args, **kwargs)

    monkeypatch.setattr(trainer.torch, "load", spy_load)
    monkeypatch.setattr(trainer, "update", spy_update)
    trainer.train(_cfg(tmp_path, iterations=2, save_every=1, kl_coef=0.05, bc_episodes=2,
                       resume=True))
    assert len(loaded) > len(moments) > 0  # weights, the reference and the moments
    assert sorted(alive) == sorted(moments)


def test_copies_of_a_task_share_its_task_and_seed(tmp_path):
    """Corridor's start depends on the reset's seed (its lamps, its actions' order): the G
    copies of a group start in one state, groups drawn with other seeds in others."""
    trainer.train(_cfg(tmp_path, iterations=1, n_groups=6, group_size=3))
    t = _table(tmp_path, 1)
    first = t["t"] == 0
    starts = {}
    for g in range(6):
        rows = first & (t["group"] == g)
        assert rows.sum() == 3
        assert len(set(t["task_id"][rows])) == 1 and len(set(t["state_key"][rows])) == 1
        starts[g] = (t["task_id"][rows][0], t["state_key"][rows][0])
    assert len({key for _, key in starts.values()}) > 2  # the groups' seeds differ


def _lengths(batch: dict) -> list[int]:
    """Prompt plus reply tokens of each row."""
    return [len(p) + len(r) for p, r in zip(batch["prompt"], batch["reply"], strict=True)]


def _padded_sizes(monkeypatch) -> list[int]:
    """Record the padded tokens of every forward pass the trainer makes from now on."""
    sizes: list[int] = []
    forward = passes.reply_logprobs  # every pass of the update goes through gagpo.passes

    def spy(model, prompts, replies, **kwargs):
        if kwargs.get("packed"):  # each distinct prompt once, every reply, no padding
            sizes.append(sum(len(p) for p in {tuple(p) for p in prompts})
                         + sum(len(r) for r in replies))
        else:
            sizes.append(len(prompts) * max(_lengths({"prompt": prompts, "reply": replies})))
        return forward(model, prompts, replies, **kwargs)

    monkeypatch.setattr(passes, "reply_logprobs", spy)
    return sizes


@pytest.mark.parametrize("amp", [None, torch.bfloat16])
def test_recomputed_log_probs_are_the_models_and_the_gap_is_per_token(monkeypatch, amp):
    """``--recompute-old-logp``: pi_old becomes the trained model's own log-probs (at the
    sampling temperature, under the run's autocast), and the gap it reports is the sum of
    |sampler - trainer| over the tokens compared; forward passes keep to the micro-batch
    budget."""
    tok = load_model("tiny")[1]
    batch = _random_batch(tok)
    model = load_model("tiny")[0]
    with torch.no_grad():
        logp, mask, _ = reply_logprobs(model, batch["prompt"], batch["reply"],
                                       pad_id=tok.pad_token_id, temperature=0.7,
                                       autocast_dtype=amp)
    truth = [logp[i, mask.shape[1] - len(r):].tolist() for i, r in enumerate(batch["reply"])]
    batch["old_logp"] = [[x + 0.25 for x in lp] for lp in truth]
    batch["old_logp"][2] = batch["old_logp"][2][:-1]  # a sampler that lost a token: not compared
    given = copy.deepcopy(batch)
    sizes = _padded_sizes(monkeypatch)
    cfg = TrainConfig(mode="generate", temperature=0.7, micro_batch_tokens=24)
    new, (gap, compared) = trainer.recompute_old_logprobs(
        model, batch, cfg, compute=Compute.local(tok.pad_token_id, amp=amp))
    assert batch == given  # a new batch: the one given is left as it was
    same = trainer.UpdateBatch.of(given)
    assert (new.prompt, new.reply, new.adv) == (same.prompt, same.reply, same.adv)
    batch = dataclasses.asdict(new)
    tokens = sum(len(r) for i, r in enumerate(batch["reply"]) if i != 2)
    # The gap is against what the trainer recomputed, which is the model's log-probs to bf16's
    # precision under autocast (a micro-batch's padding moves them: by up to 0.024 at -11.7
    # where bf16 products are emulated, on AVX2).
    sampled = [[x + 0.25 for x in lp] for lp in truth]
    expected = sum(abs(s - m) for i, (row, mine) in enumerate(zip(sampled, batch["old_logp"],
                                                                  strict=True)) if i != 2
                   for s, m in zip(row, mine, strict=True))
    assert compared == tokens and gap == pytest.approx(expected, abs=1e-4)
    for mine, true in zip(batch["old_logp"], truth, strict=True):
        assert mine == (pytest.approx(true, abs=1e-4) if amp is None
                        else pytest.approx(true, rel=2**-7, abs=2e-2))
    assert len(sizes) > 1 and all(s <= 24 or s == max(_lengths(batch)) for s in sizes)


@pytest.mark.parametrize("pack", ["off", "on"])
def test_the_update_keeps_to_the_micro_batch_budget(monkeypatch, pack):
    """Memory: every forward pass of the update holds at most ``micro_batch_tokens`` tokens,
    padded or packed (a longer sequence alone excepted)."""
    tok = load_model("tiny")[1]
    batch = _random_batch(tok, n=8)
    batch["prompt"][5] = batch["prompt"][2]  # two copies of a task in one state
    sizes = _padded_sizes(monkeypatch)
    model = load_model("tiny")[0]
    cfg = TrainConfig(micro_batch_tokens=30, kl_coef=0.0, pack_prompts=pack)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    trainer.update(model, None, opt, batch, cfg,
                   compute=Compute.local(tok.pad_token_id), epoch_seed=0)
    assert len(sizes) > 2 and all(s <= 30 or s == max(_lengths(batch)) for s in sizes)
    shared = len(batch["prompt"][2])
    assert sum(sizes) >= sum(_lengths(batch)) - (shared if pack == "on" else 0)


def _rows(*rows: tuple[int, int, str, str, float]):
    """A step table of (trajectory, t, state key, observation, won at the end) rows, one
    group, each trajectory's last row done."""
    from types import SimpleNamespace

    from gagpo.agents.rollout import StepTable

    last = {tr: max(t for tr2, t, *_ in rows if tr2 == tr) for tr, *_ in rows}
    return StepTable(rows=[SimpleNamespace(
        group=0, trajectory=tr, t=t, state_key=key, observation=obs, won=won, score=won,
        done=t == last[tr], well_formed=True, action_valid=True)
        for tr, t, key, obs, won in rows], num_envs=2, group_size=2)


def test_advantages_group_steps_by_state_key_or_by_observation_as_asked():
    """``state_grouping``: the env's state key (text compared exactly, as Python compares it:
    keys that differ in a trailing NUL are two states), or the observation text (GiGPO)."""
    table = _rows((0, 0, "s0", "same page", 0.0), (0, 1, "k", "page A", 0.0),
                  (1, 0, "s0", "same page", 1.0), (1, 1, "k\0", "page A", 1.0))
    for grouping, shared_second in (("state_key", False), ("observation", True)):
        cfg = TrainConfig(algo="gagpo", state_grouping=grouping)
        rewards, penalty = trainer.rewards_and_penalties(table, cfg)
        _, details = trainer.advantages_of(table, rewards, cfg, penalty)
        sizes = details["state_group_size"].tolist()
        assert sizes == ([2, 2, 2, 2] if shared_second else [2, 1, 2, 1]), grouping


@pytest.mark.parametrize("lora_rank", [0, 4])
def test_gradient_checkpointing_changes_memory_not_results(tmp_path, lora_rank):
    """A resume may switch ``gradient_checkpointing`` (RESUME_MAY_CHANGE): the backward pass
    recomputes the very activations it would have kept, so the parameters come out equal."""
    params = {}
    for setting in ("off", "on"):
        out = tmp_path / setting
        trainer.train(_cfg(out, iterations=2, gradient_checkpointing=setting, lora_rank=lora_rank,
                           mode="generate", max_new_tokens=6, n_groups=2, group_size=2))
        params[setting] = torch.load(out / "checkpoint.pt", weights_only=False)["model"]
    assert params["on"].keys() == params["off"].keys()
    for name, value in params["off"].items():
        torch.testing.assert_close(params["on"][name], value, rtol=0, atol=0)


@pytest.mark.parametrize("settings, amp", [
    (dict(ratio_level="token", clip_eps=0.05, clip_eps_high=0.3, dual_clip=1.2,
          entropy_coef=0.05, kl_coef=0.1, aggregation="seq-mean"), None),
    (dict(ratio_level="action", clip_eps=0.1, clip_eps_high=None, dual_clip=None,
          entropy_coef=0.0, kl_coef=0.0, aggregation="token-mean"), None),
    (dict(ratio_level="token", clip_eps=0.05, clip_eps_high=0.3, dual_clip=1.2,
          entropy_coef=0.05, kl_coef=0.1, aggregation="seq-mean"), torch.bfloat16),
])
@pytest.mark.parametrize("pack", ["off", "on"])
def test_the_update_applies_every_loss_setting(settings, amp, pack):
    """The update's gradient is that of ``policy_loss`` under the run's own settings (ratio
    level, both clip ranges, dual clip, KL and entropy weights, aggregation), computed here by
    hand on the same batch; and it counts the padded tokens its forward passes ran on. Under
    bf16 autocast (``--bf16``) the policy's and the reference's forward passes both run in
    bf16, as the hand computation does: float32 passes would give other figures. Packed
    passes (``--pack-prompts on``) give the same gradient, computed by hand packed as well
    (under bf16 the two layouts round differently)."""
    from gagpo.logprobs import right_align
    from gagpo.losses import LossConfig, policy_loss

    tok = load_model("tiny")[1]
    batch = _random_batch(tok, seed=1)
    batch["prompt"][4] = batch["prompt"][1]  # two copies of a task in one state
    batch["old_logp"] = [[x + 0.4 * (-1) ** k for k, x in enumerate(lp)]
                         for lp in batch["old_logp"]]  # ratios far from 1: clipping binds
    ref = load_model("tiny")[0]
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.01 * torch.randn_like(p))
    clip = 1e6 if settings["kl_coef"] else 0.0  # a norm clip that never binds, or none
    cfg = TrainConfig(**settings, micro_batch_tokens=10**6, max_grad_norm=clip,
                      pack_prompts=pack)
    # By hand: one forward pass over the whole batch, the loss over its global denominator.
    model = load_model("tiny")[0]
    logp, mask, ent = reply_logprobs(model, batch["prompt"], batch["reply"],
                                     pad_id=tok.pad_token_id, with_entropy=True,
                                     autocast_dtype=amp, packed=pack == "on")
    with torch.no_grad():
        ref_logp = reply_logprobs(ref, batch["prompt"], batch["reply"],
                                  pad_id=tok.pad_token_id, autocast_dtype=amp,
                                  packed=pack == "on")[0]
    denominator = float(mask.sum()) if settings["aggregation"] == "token-mean" else len(mask)
    loss, parts = policy_loss(logp, right_align(batch["old_logp"], mask.shape[1]),
                          torch.tensor(batch["adv"]), mask, LossConfig(**settings),
                          ref_logp=ref_logp if settings["kl_coef"] else None, entropy=ent,
                          denominator=denominator)
    loss.backward()
    expected = {n: -p.grad for n, p in model.named_parameters()}
    # The trainer's update: one SGD step of learning rate 1 moves each parameter by -grad.
    model = load_model("tiny")[0]
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    stats = trainer.update(model, ref, torch.optim.SGD(model.parameters(), lr=1.0), batch, cfg,
                           compute=Compute.local(tok.pad_token_id, amp=amp), epoch_seed=0)
    for name, p in model.named_parameters():
        moved = p.detach() - before[name]
        if amp is None:
            torch.testing.assert_close(moved, expected[name], rtol=1e-3, atol=2e-6)
        else:  # the update orders its rows by length, which moves a few bf16 roundings:
            # within 1e-4 of each parameter's step here, while float32 forward passes in
            # place of bf16 ones move every parameter's by more than 1e-2
            err = (moved - expected[name]).norm() / expected[name].norm().clamp_min(1e-12)
            assert float(err) < 1e-3, name
    longest_prompt = max(len(p) for p in batch["prompt"])
    if pack == "off":
        assert stats.padded_tokens == len(batch["adv"]) * (mask.shape[1] + longest_prompt)
    else:  # the shared prompt once
        assert stats.padded_tokens == sum(_lengths(batch)) - len(batch["prompt"][1])
    # The logged statistics: per token of the batch, the loss's own figures.
    tokens = parts["tokens"]
    assert stats.pg_loss == pytest.approx(parts["pg"] * denominator / tokens, rel=1e-5)
    for field, key in (("kl", "kl"), ("entropy", "entropy"), ("clip_frac", "clip_frac"),
                       ("ratio_mean", "ratio")):
        assert getattr(stats, field) == pytest.approx(parts[key] / tokens, rel=1e-5), field
    assert stats.clip_frac > 0 and stats.entropy > 0
    norm = float(torch.sqrt(sum((g ** 2).sum() for g in expected.values())))
    assert stats.grad_norm == (pytest.approx(norm, rel=1e-4) if clip else 0.0)


def test_minibatches_shuffle_from_the_seed_and_micro_batches_pack_by_length():
    """With several minibatches, which rows share an optimizer step comes from the update's
    own seed (the same result whatever torch's global stream holds, which it leaves alone);
    inside a minibatch, rows are packed in order of length, so a micro-batch pads little.
    (Padded passes: the layout on a GPU; packed passes pad nothing.)"""
    from gagpo.batching import micro_batches

    tok = load_model("tiny")[1]
    batch = _random_batch(tok, n=8, seed=2)
    cfg = TrainConfig(num_minibatches=2, ppo_epochs=2, micro_batch_tokens=40, kl_coef=0.0,
                      pack_prompts="off")
    results = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        state = torch.get_rng_state()
        model = load_model("tiny")[0]
        stats = trainer.update(model, None, torch.optim.SGD(model.parameters(), lr=0.1), batch,
                               cfg, compute=Compute.local(tok.pad_token_id), epoch_seed=5)
        assert torch.equal(torch.get_rng_state(), state)
        results.append(({n: p.detach().clone() for n, p in model.named_parameters()}, stats))
    (first, stats), (second, _) = results
    assert all(torch.equal(first[n], second[n]) for n in first)
    # The padded tokens are those of packing each minibatch's rows shortest first.
    expected = 0
    for epoch in range(2):
        order = torch.randperm(8, generator=torch.Generator().manual_seed(5 + epoch)).numpy()
        for mb in np.array_split(order, 2):
            mb = sorted(mb, key=lambda i: _lengths(batch)[i])
            for idx in micro_batches([_lengths(batch)[i] for i in mb], 40):
                rows = [mb[j] for j in idx]
                expected += len(rows) * (max(len(batch["reply"][i]) for i in rows)
                                         + max(len(batch["prompt"][i]) for i in rows))
    assert stats.padded_tokens == expected


@pytest.mark.parametrize("algo, settings", [
    ("gigpo", dict(norm="mean", omega=0.5, invalid_penalty_target="step")),
    ("gagpo", dict(norm="mean_std", gamma=0.7, lam=0.3, invalid_penalty_target="step")),
])
def test_advantages_use_every_estimator_setting_and_the_step_penalty(algo, settings):
    """``advantages_of`` hands the estimator the run's settings (normalisation, GiGPO's omega,
    gamma, lambda) and the invalid penalty charged to each step, and the update trains on
    what it returns."""
    table = _rows((0, 0, "s0", "o0", 0.0), (0, 1, "k", "o1", 0.0),
                  (1, 0, "s0", "o0", 1.0), (1, 1, "k", "o1", 1.0), (1, 2, "z", "o2", 1.0))
    table.rows[1].well_formed = False  # a malformed reply: penalised
    cfg = TrainConfig(algo=algo, **settings)
    rewards, penalty = trainer.rewards_and_penalties(table, cfg)
    assert penalty.tolist() == [0.0, cfg.invalid_penalty, 0.0, 0.0, 0.0]
    adv, _ = trainer.advantages_of(table, rewards, cfg, penalty)
    expected = compute_advantages(
        algo, group=table.column("group"), trajectory=table.column("trajectory"),
        step=table.column("t"), key=table.column("state_key", object), reward=rewards,
        penalty=penalty, episode_stats=cfg.episode_stats,
        **{k: getattr(cfg, k) for k in ("gamma", "lam", "norm", "omega")})
    assert adv.tolist() == pytest.approx(expected.tolist())
    default = compute_advantages(
        algo, group=table.column("group"), trajectory=table.column("trajectory"),
        step=table.column("t"), key=table.column("state_key", object), reward=rewards)
    assert adv.tolist() != pytest.approx(default.tolist())


def test_only_steps_with_prompt_and_reply_tokens_are_trained_on():
    """Rows of a policy that gave no tokens (a scripted teacher, a server without token ids)
    or no prompt tokens cannot be scored again: the batch leaves them out, keeping row order."""
    from types import SimpleNamespace

    from gagpo.agents.rollout import StepTable

    rows = [SimpleNamespace(prompt_token_ids=p, token_ids=r, logprobs=[-1.0] * len(r))
            for p, r in (([1, 2], [3]), (None, [4]), ([5], []), ([6, 7], [8, 9]))]
    batch = trainer.training_batch(StepTable(rows=rows, num_envs=4, group_size=1),
                                   np.array([0.5, 1.0, 2.0, -1.0]))
    assert batch == trainer.UpdateBatch(prompt=[[1, 2], [6, 7]], reply=[[3], [8, 9]],
                                        old_logp=[[-1.0], [-1.0, -1.0]], adv=[0.5, -1.0])


def test_the_update_batch_is_frozen_whole_and_its_rows_agree():
    """Nothing changes an update batch in place: its fields are tuples of tuples, copied from
    what it was made of; its fields hold one row each per action."""
    from types import SimpleNamespace

    from gagpo.agents.rollout import StepTable

    logprobs = [-1.0, -2.0]
    rows = [SimpleNamespace(prompt_token_ids=[1, 2], token_ids=[3, 4], logprobs=logprobs)]
    batch = trainer.training_batch(StepTable(rows=rows, num_envs=1, group_size=1),
                                   np.array([0.5]))
    logprobs[0] = 0.0  # the step table's row changes: the batch does not
    assert batch.old_logp == ((-1.0, -2.0),) and batch.prompt == ((1, 2),)
    assert type(batch.adv[0]) is float
    with pytest.raises(dataclasses.FrozenInstanceError):
        batch.adv = (1.0,)
    with pytest.raises(TypeError):
        batch.old_logp[0][0] = 0.0  # type: ignore[index]
    assert trainer.UpdateBatch.of(batch) is batch
    assert trainer.UpdateBatch.of(dataclasses.asdict(batch)) == batch
    assert batch.with_old_logp([[0.0, 0.0]]).old_logp == ((0.0, 0.0),)
    assert batch.old_logp == ((-1.0, -2.0),)
    with pytest.raises(ValueError, match="row counts"):
        trainer.UpdateBatch(prompt=[[1]], reply=[[2]], old_logp=[], adv=[1.0])


def test_an_empty_batch_updates_nothing_and_logs_zeros():
    model, tok = load_model("tiny")
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    stats = trainer.update(model, None, torch.optim.SGD(model.parameters(), lr=1.0),
                           {"prompt": [], "reply": [], "old_logp": [], "adv": []},
                           TrainConfig(max_grad_norm=0.0),
                           compute=Compute.local(tok.pad_token_id), epoch_seed=0)
    assert stats == trainer.UpdateStats(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    assert all(torch.equal(before[n], p) for n, p in model.named_parameters())


def test_a_one_token_batch_logs_that_tokens_figures():
    """The logged statistics are per reply token, also when the batch holds one token: its
    ratio at the first epoch is 1, its entropy the model's at that position."""
    model, tok = load_model("tiny")
    batch = {"prompt": [[5, 6, 7]], "reply": [[9]], "adv": [1.0]}
    with torch.no_grad():
        logp, _, ent = reply_logprobs(model, batch["prompt"], batch["reply"],
                                      pad_id=tok.pad_token_id, with_entropy=True)
    batch["old_logp"] = [[float(logp[0, -1])]]
    stats = trainer.update(model, None, torch.optim.SGD(model.parameters(), lr=0.0), batch,
                           TrainConfig(kl_coef=0.0, max_grad_norm=0.0),
                           compute=Compute.local(tok.pad_token_id), epoch_seed=0)
    assert stats.ratio_mean == pytest.approx(1.0, abs=1e-6)
    assert stats.entropy == pytest.approx(float(ent[0, -1]), rel=1e-5)
    assert stats.pg_loss == pytest.approx(-1.0, abs=1e-6)  # -A * ratio, A = 1


def test_the_logged_gradient_norm_is_the_mean_over_the_optimizer_steps(monkeypatch):
    """``loss/grad_norm``: each optimizer step's norm before clipping (clipped to
    ``max_grad_norm`` whenever that is above 0), averaged over the epochs' minibatches."""
    norms = []
    clip = policy_update.grad_norm_clip

    def spy(params, max_norm):
        norms.append(clip(params, max_norm))
        return norms[-1]

    monkeypatch.setattr(policy_update, "grad_norm_clip", spy)
    tok = load_model("tiny")[1]
    batch = _random_batch(tok, n=8, seed=3)
    model = load_model("tiny")[0]
    stats = trainer.update(model, None, torch.optim.SGD(model.parameters(), lr=0.01), batch,
                           TrainConfig(ppo_epochs=2, num_minibatches=2, max_grad_norm=0.5,
                                       kl_coef=0.0),
                           compute=Compute.local(tok.pad_token_id), epoch_seed=0)
    assert len(norms) == 4 and stats.grad_norm == pytest.approx(sum(norms) / 4)


def test_gagpo_train_runs_the_default_variant_and_a_lost_group_teaches_only_the_penalty():
    """``gagpo train`` with no flags trains on the default GAGPO (its variant's lambda and
    normalisation): in a group with no win, a malformed step gets exactly -penalty and every
    valid step 0. ``--gagpo-variant paper`` (the literal reading) instead pays each valid step
    as if it had won: the walking that ALFWorld's run learned."""
    table = _rows((0, 0, "s0", "o0", 0.0), (0, 1, "a", "o1", 0.0), (0, 2, "b", "o2", 0.0),
                  (1, 0, "s0", "o0", 0.0), (1, 1, "c", "o3", 0.0), (1, 2, "d", "o4", 0.0))
    table.rows[1].well_formed = False
    cfg = TrainConfig()
    assert (cfg.algo, cfg.gagpo_variant, cfg.credit().lam_norm()) == (
        "gagpo", "shared-2-flat", (0.5, "mean"))
    rewards, penalty = trainer.rewards_and_penalties(table, cfg)
    adv, _ = trainer.advantages_of(table, rewards, cfg, penalty)
    assert adv.tolist() == pytest.approx([0.0, -cfg.invalid_penalty, 0.0, 0.0, 0.0, 0.0])
    paper = TrainConfig(gagpo_variant="paper")
    adv, _ = trainer.advantages_of(table, rewards, paper, penalty)
    assert min(adv[i] for i in (0, 2, 3, 4, 5)) > 0.3 and adv[1] < -1.0
