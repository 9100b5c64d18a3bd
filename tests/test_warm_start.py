"""The behaviour-cloning warm start (gagpo.warm_start): which teacher steps become
demonstrations, that each demonstration's reply is written (EOS included) as the trained policy
writes its own, that cloning lowers the demonstrations' NLL and takes ``bc_epochs`` passes, and
that a teacher needing other environments than the training ones is refused."""

import json

import pytest
import torch

import gagpo.agents.rollout as rollout_module
import gagpo.passes as passes
from gagpo.agents.policies.base import Request
from gagpo.agents.policies.factory import env_kwargs_for
from gagpo.agents.policies.scripted import explain
from gagpo.agents.react import ReActAgent
from gagpo.distributed import Compute
from gagpo.envs import split_tasks
from gagpo.logprobs import reply_logprobs
from gagpo.train_config import TrainConfig
from gagpo.trainer import env_kwargs, make_policy, make_vec
from gagpo.warm_start import (
    behaviour_cloning,
    check_teacher_envs,
    expert_demonstrations,
    make_teacher,
)

torch.set_num_threads(1)

#: WebShop's first 6 training tasks: the expert needs 4, 3, 3, 5, 4 and 3 steps. With a
#: 4-step limit its 5-step episode is truncated and lost; the others are won.
TASKS = 6
MAX_STEPS = 4


def _tiny():
    from gagpo.agents.models import load_model

    return load_model("tiny")


def _demonstrations(cfg: TrainConfig, monkeypatch):
    """``expert_demonstrations`` as the trainer calls it, on the first :data:`TASKS` tasks;
    also returns the policy and the step table the teacher played (caught on its way out of
    ``rollout``)."""
    model, tok = _tiny()
    policy = make_policy(model, tok, cfg, temperature=cfg.temperature, seed=0)
    teacher = make_teacher(cfg)
    agent = ReActAgent(cfg.env, history_length=cfg.history_length, max_steps=cfg.max_steps)
    kwargs = env_kwargs(cfg, cfg.train_split)
    tasks = split_tasks(cfg.env, **kwargs)[:TASKS]
    tables = []
    real = rollout_module.rollout

    def recording_rollout(*args, **kw):
        tables.append(real(*args, **kw))
        return tables[-1]

    monkeypatch.setattr(rollout_module, "rollout", recording_rollout)
    with make_vec(cfg, len(tasks), 1, env_kwargs_for(teacher, kwargs)) as vec:
        demos = expert_demonstrations(cfg, policy, teacher, agent, tasks, vec)
    [table] = tables
    return policy, demos, table


def _outcomes(table) -> dict[int, bool]:
    """Whether each trajectory was won: its last step's ``won``."""
    won: dict[int, bool] = {}
    for row in table.rows:
        won[row.trajectory] = row.won
    return won


# --- which steps become demonstrations ----------------------------------------------------------


@pytest.mark.parametrize("mode", ["generate", "score"])
def test_only_the_experts_won_episodes_become_demonstrations(monkeypatch, mode):
    cfg = TrainConfig(bc_teacher="expert", mode=mode, max_steps=MAX_STEPS, history_length=2)
    policy, demos, table = _demonstrations(cfg, monkeypatch)
    won = _outcomes(table)
    assert len(won) == TASKS
    assert 0 < sum(won.values()) < TASKS, won  # the 4-step limit really lost some episodes
    lengths = {t: sum(r.trajectory == t for r in table.rows) for t in won}
    assert max(lengths[t] for t in won if not won[t]) == MAX_STEPS  # truncated, not finished
    kept = [r for r in table.rows if won[r.trajectory]]
    assert len(demos) == sum(lengths[t] for t in won if won[t]) == len(kept) < len(table.rows)
    assert [p for p, _ in demos] == [policy.prompt_ids(r.prompt) for r in kept]


@pytest.mark.parametrize("teacher, kwargs", [("rule", {}),
                                             ("rule_options", {"observation_mode": "text_rich"})])
def test_every_episode_of_a_rule_teacher_becomes_demonstrations(monkeypatch, teacher, kwargs):
    cfg = TrainConfig(bc_teacher=teacher, env_kwargs=kwargs, max_steps=8, history_length=2)
    policy, demos, table = _demonstrations(cfg, monkeypatch)
    won = _outcomes(table)
    assert len(won) == TASKS
    assert 0 < sum(won.values()) < TASKS, won  # the rule baseline buys wrong products too
    assert len(demos) == len(table.rows)
    assert [p for p, _ in demos] == [policy.prompt_ids(r.prompt) for r in table.rows]
    tok = policy.tokenizer
    for (_, reply), row in zip(demos, table.rows, strict=True):
        assert reply == tok(row.reply, add_special_tokens=False)["input_ids"] + \
            [tok.eos_token_id]


# --- each reply as the policy writes its own, EOS included ----------------------------------------


def test_score_mode_replies_are_the_ids_the_scoring_policy_itself_scores(monkeypatch):
    cfg = TrainConfig(bc_teacher="expert", mode="score", max_steps=MAX_STEPS, history_length=2)
    policy, demos, table = _demonstrations(cfg, monkeypatch)
    won = _outcomes(table)
    kept = [r for r in table.rows if won[r.trajectory]]
    eos = policy.tokenizer.eos_token_id
    assert eos is not None
    for (prompt, reply), row in zip(demos, kept, strict=True):
        # The scoring policy offered this action alone: what it scores and returns for it.
        own = policy.act([Request(row.prompt, [row.action], dict(row.request.info))])[0]
        assert own.text == policy.reply_template.replace("{action}", row.action)
        assert reply == own.token_ids
        assert reply[-1] == eos and eos not in reply[:-1]
        assert prompt == own.prompt_token_ids
        # The teacher's own text (its thought, then the action) is not what a scorer writes.
        assert row.reply != own.text


def test_generate_mode_replies_are_the_teachers_text_then_one_eos_the_policy_stops_at(
        monkeypatch):
    cfg = TrainConfig(bc_teacher="expert", mode="generate", max_steps=MAX_STEPS,
                      history_length=2)
    policy, demos, table = _demonstrations(cfg, monkeypatch)
    won = _outcomes(table)
    kept = [r for r in table.rows if won[r.trajectory]]
    tok = policy.tokenizer
    assert demos
    for (_, reply), row in zip(demos, kept, strict=True):
        assert row.reply == f"<think>{explain(row.action)}</think><action>{row.action}</action>"
        assert reply[:-1] == tok(row.reply, add_special_tokens=False)["input_ids"]
        assert reply[-1] == tok.eos_token_id
        assert reply[-1] in policy.eos_ids  # generation stops there, as on the policy's own
        assert not set(reply[:-1]) & policy.eos_ids  # exactly one EOS, the last token
        assert tok.decode(reply, skip_special_tokens=True) == row.reply


# --- behaviour cloning ----------------------------------------------------------------------------


def _synthetic_demos(n: int, eos: int, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """``n`` distinct (prompt, reply) pairs of several lengths, each reply ending with EOS."""
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(3, 900, (4 + i,), generator=g).tolist(),
             torch.randint(3, 900, (2 + i % 3,), generator=g).tolist() + [eos])
            for i in range(n)]


def _nll(model, demos, pad_id) -> tuple[float, torch.Tensor]:
    """The demonstrations' token-mean NLL, and each reply's summed log-prob."""
    with torch.no_grad():
        logp, mask, _ = reply_logprobs(model, [p for p, _ in demos], [r for _, r in demos],
                                       pad_id=pad_id)
    return float(-(logp * mask).sum() / mask.sum()), (logp * mask).sum(-1)


def _bc_cfg(**kw) -> TrainConfig:
    return TrainConfig(**{"bc_lr": 1e-2, "bc_batch": 6, "seed": 0, **kw})


@pytest.mark.parametrize("micro_batch_tokens", [16384, 1])
def test_behaviour_cloning_lowers_the_nll_and_raises_every_demonstrated_reply(
        micro_batch_tokens):
    """One batch of all 6 demonstrations: one epoch is one optimizer step, whose returned
    NLL is the one measured before it; a second epoch's is the NLL after the first step.
    (``micro_batch_tokens=1``: one demonstration per forward, gradients accumulated.)"""
    model, tok = _tiny()
    pad = tok.pad_token_id
    demos = _synthetic_demos(6, tok.eos_token_id)
    before, before_lp = _nll(model, demos, pad)

    model.train()
    once = behaviour_cloning(model, demos, _bc_cfg(micro_batch_tokens=micro_batch_tokens),
                             compute=Compute.local(pad))
    after_one, after_lp = _nll(model, demos, pad)
    assert once == pytest.approx(before, rel=1e-4)  # the last batch's NLL, before its step
    assert after_one < before - 0.05  # cloning, not training backwards
    assert bool((after_lp > before_lp).all()), (before_lp, after_lp)

    twice_model = _tiny()[0].train()
    twice = behaviour_cloning(twice_model, demos,
                              _bc_cfg(micro_batch_tokens=micro_batch_tokens, bc_epochs=2),
                              compute=Compute.local(pad))
    after_two, after_two_lp = _nll(twice_model, demos, pad)
    assert twice == pytest.approx(after_one, rel=1e-4)  # measured after the first step
    assert twice < before
    assert after_two < after_one
    assert bool((after_two_lp > before_lp).all())


def test_micro_batches_accumulate_to_the_whole_batchs_gradient(monkeypatch):
    """Cut into one-demonstration micro-batches, the step is the whole batch's: every
    micro-batch's loss is over the whole batch's token count, and the gradients add up."""
    grads: list[dict[int, torch.Tensor]] = []

    class RecordingAdamW(torch.optim.AdamW):
        def step(self, *args, **kw):
            grads.append({i: p.grad.clone() for g in self.param_groups
                          for i, p in enumerate(g["params"])})
            return super().step(*args, **kw)

    monkeypatch.setattr(torch.optim, "AdamW", RecordingAdamW)
    _, tok = _tiny()
    demos = _synthetic_demos(6, tok.eos_token_id)
    for budget in (16384, 1):
        behaviour_cloning(_tiny()[0].train(), demos, _bc_cfg(micro_batch_tokens=budget),
                          compute=Compute.local(tok.pad_token_id))
    whole, cut = grads
    assert whole.keys() == cut.keys()
    for i, g in whole.items():
        assert g.abs().max() > 0
        torch.testing.assert_close(cut[i], g, rtol=1e-4, atol=1e-6)

    # ... and that step's gradient is the token-mean NLL's, clipped to norm 1.
    model = _tiny()[0].train()
    logp, mask, _ = reply_logprobs(model, [p for p, _ in demos], [r for _, r in demos],
                                   pad_id=tok.pad_token_id)
    (-(logp * mask).sum() / mask.sum()).backward()
    raw = [p.grad for p in model.parameters()]
    norm = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g)
                                                       for g in raw])))
    assert norm > 1.5  # so that clipping shows
    for i, g in enumerate(raw):
        torch.testing.assert_close(whole[i], g / norm, rtol=1e-3, atol=1e-6)


def test_a_one_token_reply_is_its_own_nll():
    """A batch of one demonstration whose reply is EOS alone: the returned NLL is that
    token's, -log pi(EOS | prompt)."""
    model, tok = _tiny()
    demos = [([5, 6, 7, 8], [tok.eos_token_id])]
    before, _ = _nll(model, demos, tok.pad_token_id)
    nll = behaviour_cloning(model.train(), demos, _bc_cfg(bc_batch=1),
                            compute=Compute.local(tok.pad_token_id))
    assert nll == pytest.approx(before, rel=1e-5)


def test_bc_epochs_is_the_number_of_passes_over_every_demonstration(monkeypatch):
    """5 demonstrations in batches of 2: 3 optimizer steps a pass (the last batch holds one),
    each demonstration once a pass; ``bc_epochs=2`` takes twice the steps, at ``bc_lr``."""

    optimizers = []

    class CountingAdamW(torch.optim.AdamW):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            self.steps = 0
            optimizers.append(self)

        def step(self, *args, **kw):
            self.steps += 1
            return super().step(*args, **kw)

    batches: list[list[tuple[int, ...]]] = []
    real = passes.reply_logprobs

    def recording(model, prompts, replies, **kw):
        # One micro-batch a step: every step starts from zeroed gradients.
        assert all(p.grad is None or not p.grad.any() for p in model.parameters())
        batches.append([tuple(r) for r in replies])
        return real(model, prompts, replies, **kw)

    monkeypatch.setattr(torch.optim, "AdamW", CountingAdamW)
    monkeypatch.setattr(passes, "reply_logprobs", recording)
    _, tok = _tiny()
    demos = _synthetic_demos(5, tok.eos_token_id)
    replies = sorted(tuple(r) for _, r in demos)
    for epochs in (1, 2):
        batches.clear()
        model = _tiny()[0].train()
        frozen = model.get_input_embeddings().weight
        frozen.requires_grad_(False)
        kept = frozen.detach().clone()
        cfg = _bc_cfg(bc_batch=2, bc_epochs=epochs, bc_lr=3e-3)
        behaviour_cloning(model, demos, cfg, compute=Compute.local(tok.pad_token_id))
        opt = optimizers[-1]
        assert opt.steps == 3 * epochs
        assert [len(b) for b in batches] == [2, 2, 1] * epochs
        for e in range(epochs):
            assert sorted(r for b in batches[3 * e:3 * e + 3] for r in b) == replies
        assert [(g["lr"], g["weight_decay"]) for g in opt.param_groups] == [(3e-3, 0.0)]
        assert all(p.requires_grad for g in opt.param_groups for p in g["params"])
        assert torch.equal(frozen, kept)  # only trainable parameters are trained


# --- teachers -------------------------------------------------------------------------------------


def test_make_teacher_builds_the_named_scripted_policy():
    from gagpo.agents.policies.scripted import ExpertPolicy, RuleBaselinePolicy

    for mode in ("generate", "score"):
        expert = make_teacher(TrainConfig(bc_teacher="expert", mode=mode))
        assert isinstance(expert, ExpertPolicy) and expert.needs_expert_action
        assert expert.search_with_instruction  # a policy never knows the goal's title
    for name, options in (("rule", False), ("rule_options", True)):
        teacher = make_teacher(TrainConfig(bc_teacher=name))
        assert isinstance(teacher, RuleBaselinePolicy) and teacher.options is options


def test_rule_options_needs_text_rich_training_environments():
    with pytest.raises(ValueError) as refused:
        check_teacher_envs(TrainConfig(bc_teacher="rule_options"))
    message = str(refused.value)
    assert "--bc-teacher rule_options" in message
    assert "{'observation_mode': 'text_rich'}" in message
    assert f"--env-kwargs '{json.dumps({'observation_mode': 'text_rich'})}'" in message

    # Other env kwargs are kept in the suggested flag; another observation mode is refused too.
    for given in ({"num_products": 50}, {"observation_mode": "text"}):
        with pytest.raises(ValueError) as refused:
            check_teacher_envs(TrainConfig(bc_teacher="rule_options", env_kwargs=given))
        assert f"--env-kwargs '{json.dumps({**given, 'observation_mode': 'text_rich'})}'" \
            in str(refused.value)

    text_rich = {"observation_mode": "text_rich"}
    check_teacher_envs(TrainConfig(bc_teacher="rule_options", env_kwargs=text_rich))
    check_teacher_envs(TrainConfig(bc_teacher="rule_options",
                                   env_kwargs={**text_rich, "num_products": 50}))
    for teacher in ("expert", "rule"):
        for kwargs in ({}, text_rich, {"observation_mode": "text"}):
            check_teacher_envs(TrainConfig(bc_teacher=teacher, env_kwargs=kwargs))


# --- what the warm start leaves alone, and how it runs ----------------------------------------


def test_demonstrations_carry_no_special_token_but_the_final_eos(monkeypatch):
    """With a tokenizer that adds a beginning-of-sequence token by default (Llama's do), a
    demonstration's reply still starts with the reply's own first token, as the policy's
    replies do: the reply continues the chat-formatted prompt."""
    from tokenizers import processors

    def with_bos(tok):
        bos = tok.convert_tokens_to_ids(tok.bos_token or tok.eos_token)
        tok._tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{tok.convert_ids_to_tokens(bos)} $A",
            special_tokens=[(tok.convert_ids_to_tokens(bos), bos)])
        assert tok("x")["input_ids"][0] == bos  # the default adds it now
        return tok

    import gagpo.agents.models as models

    load = models.load_model
    monkeypatch.setattr(models, "load_model", lambda *a, **k: (lambda m, t: (m, with_bos(t)))(
        *load(*a, **k)))
    for mode in ("score", "generate"):
        cfg = TrainConfig(bc_teacher="expert", mode=mode, max_steps=MAX_STEPS)
        policy, demos, table = _demonstrations(cfg, monkeypatch)
        tok = policy.tokenizer
        won = _outcomes(table)
        for (_, reply), row in zip(demos, [r for r in table.rows if won[r.trajectory]],
                                   strict=True):
            text = policy.reply_template.replace("{action}", row.action) \
                if mode == "score" else row.reply
            assert reply == tok(text, add_special_tokens=False)["input_ids"] + [
                tok.eos_token_id]


def test_behaviour_cloning_is_reproducible_and_leaves_the_global_random_streams_alone():
    """The demonstrations' order comes from the run's seed: the same seed gives the same
    model whatever the global RNG holds, and torch's global stream (which sampling may use)
    is not moved."""
    model, tok = _tiny()
    demos = _synthetic_demos(7, tok.eos_token_id)
    results = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        state = torch.get_rng_state()
        m = _tiny()[0].train()
        behaviour_cloning(m, demos, _bc_cfg(bc_batch=2), compute=Compute.local(tok.pad_token_id))
        assert torch.equal(torch.get_rng_state(), state)
        results.append({n: p.detach().clone() for n, p in m.named_parameters()})
    assert all(torch.equal(results[0][n], results[1][n]) for n in results[0])


def test_no_demonstrations_is_a_nan_nll_and_no_step():
    model, tok = _tiny()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    nll = behaviour_cloning(model.train(), [], _bc_cfg(), compute=Compute.local(tok.pad_token_id))
    assert isinstance(nll, float) and nll != nll  # nan
    assert all(torch.equal(before[n], p) for n, p in model.named_parameters())


@pytest.mark.parametrize("amp", [None, torch.bfloat16])
def test_behaviour_cloning_keeps_to_the_budget_and_the_runs_autocast(monkeypatch, amp):
    """Memory and speed: every forward pass holds at most ``micro_batch_tokens`` padded tokens
    (a longer pair alone excepted) and runs under the run's autocast dtype."""

    model, tok = _tiny()
    demos = _synthetic_demos(8, tok.eos_token_id)
    calls = []
    forward = passes.reply_logprobs

    def spy(net, prompts, replies, **kwargs):
        calls.append((len(prompts) * max(len(p) + len(r) for p, r in
                                         zip(prompts, replies, strict=True)),
                      kwargs.get("autocast_dtype")))
        return forward(net, prompts, replies, **kwargs)

    monkeypatch.setattr(passes, "reply_logprobs", spy)
    behaviour_cloning(model.train(), demos, _bc_cfg(bc_batch=8, micro_batch_tokens=20),
                      compute=Compute.local(tok.pad_token_id, amp=amp))
    longest = max(len(p) + len(r) for p, r in demos)
    assert len(calls) > 2 and all(size <= 20 or size <= longest for size, _ in calls)
    assert sum(size for size, _ in calls) >= sum(len(p) + len(r) for p, r in demos)
    assert {dtype for _, dtype in calls} == {amp}
