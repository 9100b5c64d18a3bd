"""LoRA folded into the weights where nothing trains: a LoRA run's rollouts sample from the
model it trains (folded for the rollout, the frozen weights untouched after), and its
``final/`` adapters load as the model it trained. On a CPU its update's passes skip the casts
that change no value under autocast, and in float32 run each adapted layer as one folded
product, with the same result."""

import contextlib

import pytest
import torch
from peft import LoraConfig, get_peft_model

from gagpo.agents.models import TinySpec, load_model, tiny_model_folder
from gagpo.common.lora import folded_for_sampling, folded_lora_update
from gagpo.distributed import Compute

IDS = torch.tensor([[5, 6, 7, 8, 9, 10, 11]])


def _lora_model():
    # init_lora_weights=False: adapters that change the outputs, as after training.
    return get_peft_model(load_model(tiny_model_folder(TinySpec()))[0], LoraConfig(
        r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False))


def test_folded_sampling_computes_the_lora_models_outputs_and_leaves_its_weights():
    model = _lora_model()
    frozen = {n: p for n, p in model.named_parameters() if not p.requires_grad}
    before = {n: p.detach().clone() for n, p in frozen.items()}
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    plain = load_model(tiny_model_folder(TinySpec()))[0]
    with torch.no_grad():
        want = model(input_ids=IDS).logits
        assert not torch.allclose(want, plain(input_ids=IDS).logits)  # the adapters matter
        with folded_for_sampling(model):
            folded = model(input_ids=IDS).logits
            # one product per layer: no adapter runs inside
            assert all(m._disable_adapters for m in model.modules() if hasattr(m, "lora_A"))
        torch.testing.assert_close(folded, want, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(model(input_ids=IDS).logits, want)  # adapters on again
    after = dict(model.named_parameters())
    for n, p in frozen.items():
        assert after[n] is p and torch.equal(p, before[n]), n  # the very tensor, unchanged
    assert {n for n, p in after.items() if p.requires_grad} == trainable


def test_folded_weights_are_cast_once_per_autocast_region():
    """Autocast caches its low-precision copy of a leaf that requires grad, for the whole
    region; a frozen weight would be cast again at every call, every decoding step: the
    folded layers' and the weights LoRA froze outside them (the tied embedding, which is the
    output layer), given back frozen after."""
    model = _lora_model()
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert any("embed_tokens" in n for n in frozen)
    with torch.no_grad(), folded_for_sampling(model):
        bases = [m.get_base_layer() for m in model.modules() if hasattr(m, "lora_A")]
        assert bases and all(b.weight.requires_grad and b.weight.is_leaf for b in bases)
        assert all(p.requires_grad for p in model.parameters())
    assert {n for n, p in model.named_parameters() if not p.requires_grad} == frozen


def test_a_model_without_adapters_is_left_as_it_is():
    model = load_model(tiny_model_folder(TinySpec()))[0]
    weights = dict(model.named_parameters())
    with torch.no_grad(), folded_for_sampling(model):
        model(input_ids=IDS)
    assert dict(model.named_parameters()) == weights


def test_a_lora_runs_adapter_folder_loads_as_the_model_it_trained(tmp_path):
    model = _lora_model()
    model.save_pretrained(tmp_path)  # what a LoRA run's final/ holds, with its tokenizer
    load_model(tiny_model_folder(TinySpec()))[1].save_pretrained(tmp_path)
    assert (tmp_path / "adapter_config.json").exists() and not (tmp_path / "config.json").exists()
    loaded, _ = load_model(str(tmp_path))
    assert not any(getattr(m, "merged", True) is False for m in loaded.modules()
                   if hasattr(m, "lora_A"))  # folded for good
    # Every weight requires grad, as in a model loaded without adapters: autocast casts each
    # once per region (peft had frozen all but the adapters, the output layer among them).
    assert all(p.requires_grad for p in loaded.parameters())
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=IDS).logits, model(input_ids=IDS).logits,
                                   atol=1e-5, rtol=1e-4)


def test_a_lora_runs_held_out_evaluation_plays_the_folded_model(tmp_path):
    """The trainer's evaluations sample as its rollouts do: every call of a LoRA layer while
    a LoRA run evaluates runs its base layer alone, on the folded weight."""
    from peft.tuners.lora import LoraLayer

    from gagpo.train_config import TrainConfig
    from gagpo.trainer import train

    calls: list[bool] = []

    def record(module, args, output):
        if isinstance(module, LoraLayer):
            calls.append(module._disable_adapters)

    hook = torch.nn.modules.module.register_module_forward_hook(record)
    try:
        train(TrainConfig(model="tiny", lora_rank=4, iterations=0, eval_episodes=2,
                          eval_batch=2, max_steps=2, max_new_tokens=4, history_length=0,
                          tensorboard=False, progress=False, out_dir=str(tmp_path)))
    finally:
        hook.remove()
    assert calls and all(calls), f"{calls.count(False)} of {len(calls)} calls unfolded"


def test_a_lora_models_rollout_projects_only_the_last_prompt_position_onto_the_vocabulary():
    """peft's model takes ``*args, **kwargs``: the policy reads the arguments its forward pass
    takes (``logits_to_keep``, the cache's keyword) on the model that runs it. Read on the
    wrapper, a LoRA run's prefill computed the whole vocabulary's logits at every position."""
    from gagpo.agents.policies import TransformersPolicy
    from gagpo.agents.policies.base import Request
    from gagpo.agents.policies.kv_cache import cache_keyword

    plain, tokenizer = load_model(tiny_model_folder(TinySpec()))
    model = _lora_model()
    assert cache_keyword(model) == cache_keyword(plain)
    request = Request([{"role": "user", "content": "find a red pair of running shoes " * 4}],
                      ["click[buy now]"], {})
    for m in (plain, model):
        positions: list[int] = []
        head = m.get_output_embeddings().register_forward_hook(
            lambda module, args, output, seen=positions: seen.append(args[0].shape[1]))
        policy = TransformersPolicy(m, tokenizer, temperature=1.0, max_new_tokens=4, seed=0)
        try:
            with torch.no_grad(), folded_for_sampling(m):
                reply, = policy.act([request])
        finally:
            head.remove()
        assert len(reply.prompt_token_ids) > 30 and reply.token_ids
        assert positions and max(positions) == 1, positions  # prefill and decoding alike


def _update_batch() -> dict[str, list]:
    """Four rows for one update: two prompts, each shared by two replies."""
    prompts = [[5, 6, 7, 8, 9]] * 2 + [[11, 12, 13]] * 2
    replies = [[40, 41, 42], [43, 44], [45, 46, 47, 48], [49]]
    return {"prompt": prompts, "reply": replies, "adv": [1.0, -1.0, 0.5, -0.5],
            "old_logp": [[-3.0] * len(r) for r in replies]}


def _lora_update(monkeypatch, hold: bool):
    """One LoRA update of the tiny model under bf16 autocast on a CPU: the adapters after it,
    the casts counted during it, and how many frozen LoRA weights it has."""
    from torch.utils._python_dispatch import TorchDispatchMode

    import gagpo.passes as passes
    import gagpo.policy_update as policy_update
    from gagpo.train_config import TrainConfig

    if not hold:  # the update as it was: every cast made at every pass
        monkeypatch.setattr(passes, "lora_update_passes",
                            lambda model, cfg, compute: contextlib.nullcontext())
    torch.manual_seed(3)
    model = _lora_model()
    bases = [m.get_base_layer() for m in model.modules() if hasattr(m, "lora_A")]
    weights = [b.weight for b in bases]
    shapes = {tuple(w.shape) for w in weights}

    class Casts(TorchDispatchMode):
        frozen_weights = 0
        activations_up = 0  # bfloat16 activations to float32

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten._to_copy.default:
                if tuple(args[0].shape) in shapes:
                    Casts.frozen_weights += 1
                elif args[0].dim() == 3 and args[0].dtype == torch.bfloat16:
                    Casts.activations_up += 1
            return func(*args, **(kwargs or {}))

    batch = _update_batch()
    cfg = TrainConfig(lr=1e-2, kl_coef=0.0, lora_rank=4, micro_batch_tokens=16)
    trained = [p for p in model.parameters() if p.requires_grad]
    with Casts():
        policy_update.update(model, None, torch.optim.SGD(trained, lr=1e-2), batch, cfg,
                             compute=Compute.local(0, amp=torch.bfloat16), epoch_seed=0)
    assert [b.weight for b in bases] == weights  # the very fp32 tensors, back after the update
    assert all(w.dtype == torch.float32 and not w.requires_grad for w in weights)
    adapters = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    return adapters, Casts, len(weights)


def test_a_lora_update_on_a_cpu_skips_the_casts_that_change_no_value_and_moves_as_before(
        monkeypatch):
    """Autocast casts a frozen weight again at every call (it caches the casts of weights that
    require grad only), and peft casts a bfloat16 input up to its adapters' float32 for
    autocast to cast it back: a LoRA update holds the frozen weights in its autocast dtype for
    its passes (each cast once for the whole update, not at every pass) and turns peft's cast
    off, and its adapters move exactly as when every pass made those casts."""
    held, held_casts, n_weights = _lora_update(monkeypatch, hold=True)
    monkeypatch.undo()
    cast, casts, _ = _lora_update(monkeypatch, hold=False)
    # 3 passes of 16 tokens
    assert held_casts.frozen_weights == n_weights and casts.frozen_weights == 3 * n_weights
    assert held_casts.activations_up < casts.activations_up
    assert held.keys() == cast.keys()
    for name in held:
        assert torch.equal(held[name], cast[name]), name
    torch.manual_seed(3)
    start = {n: p for n, p in _lora_model().named_parameters() if p.requires_grad}
    assert any(not torch.equal(held[n], start[n]) for n in held)  # the update moved them


def _adapters(model) -> dict[str, torch.Tensor]:
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


def _loss(model, ids=IDS) -> torch.Tensor:
    # Weighted so that every position's gradient differs.
    logits = model(input_ids=ids).logits
    return (logits.log_softmax(-1) * torch.linspace(-1, 1, logits.shape[-1])).sum()


def test_a_folded_lora_update_gives_peft_s_log_probs_and_gradients():
    """In float32 each adapted layer runs as one product with ``W + s B A`` and computes its
    adapters' gradients itself: the loss and every adapter's gradient are peft's, and on exit
    the layers run peft's own forward again."""
    torch.manual_seed(0)
    model = _lora_model()
    loss = _loss(model)
    loss.backward()
    want = {n: p.grad.clone() for n, p in _adapters(model).items()}
    model.zero_grad(set_to_none=True)
    layers = [m for m in model.modules() if hasattr(m, "lora_A")]
    with folded_lora_update(model):
        assert all("forward" in vars(m) for m in layers)
        folded = _loss(model)
        folded.backward()
    assert not any("forward" in vars(m) for m in layers)
    torch.testing.assert_close(folded, loss, rtol=1e-5, atol=1e-4)
    got = {n: p.grad for n, p in _adapters(model).items()}
    assert got.keys() == want.keys() and any("lora_A" in n for n in got)
    for n in want:
        # rounding: the products are summed in another order
        torch.testing.assert_close(got[n], want[n], rtol=1e-4,
                                   atol=1e-5 * float(want[n].abs().max()), msg=n)


def test_a_folded_lora_update_folds_again_after_each_optimizer_step():
    """Several optimizer steps in one update (PPO epochs, minibatches): each pass after a step
    runs the adapters as they are now, not as they were folded."""
    torch.manual_seed(0)
    model = _lora_model()
    optimizer = torch.optim.SGD(_adapters(model).values(), lr=0.5)
    with folded_lora_update(model):
        for _ in range(2):
            optimizer.zero_grad()
            _loss(model).backward()
            optimizer.step()
        with torch.no_grad():
            folded = model(input_ids=IDS).logits
    with torch.no_grad():
        torch.testing.assert_close(folded, model(input_ids=IDS).logits, rtol=1e-5, atol=1e-5)


def test_a_folded_lora_update_leaves_the_reference_pass_and_other_layers_to_peft():
    """With the adapters disabled (the KL reference pass) the base model runs; a layer with
    dropout is left as peft runs it."""
    torch.manual_seed(0)
    model = _lora_model()
    plain = load_model(tiny_model_folder(TinySpec()))[0]
    with torch.no_grad(), folded_lora_update(model), model.disable_adapter():
        torch.testing.assert_close(model(input_ids=IDS).logits, plain(input_ids=IDS).logits)
    dropped = get_peft_model(load_model(tiny_model_folder(TinySpec()))[0], LoraConfig(
        r=4, lora_alpha=8, lora_dropout=0.1, target_modules="all-linear"))
    with folded_lora_update(dropped):
        assert not any("forward" in vars(m) for m in dropped.modules() if hasattr(m, "lora_A"))


def _peft_then_folded(model, ids=IDS) -> list[tuple[torch.Tensor, dict]]:
    """The loss of one pass of ``model`` and its adapters' gradients (None where none came),
    as peft's layers compute them, then inside :func:`folded_lora_update`."""
    runs = []
    for fold in (False, True):
        model.zero_grad(set_to_none=True)
        with folded_lora_update(model) if fold else contextlib.nullcontext():
            loss = _loss(model, ids)
            loss.backward()
        runs.append((loss.detach(), {n: p.grad for n, p in _adapters(model).items()}))
    return runs


def _assert_left_to_peft(model) -> None:
    """Inside :func:`folded_lora_update` the loss and every adapter's gradient are peft's own,
    bit for bit: the layers ran as peft runs them."""
    (want, want_grads), (got, got_grads) = _peft_then_folded(model)
    assert torch.equal(got, want)
    assert got_grads.keys() == want_grads.keys()
    for n, g in want_grads.items():
        assert (got_grads[n] is None) == (g is None), n
        assert g is None or torch.equal(got_grads[n], g), n


def test_a_folded_lora_update_adds_a_biased_layers_bias_as_peft_does():
    """Qwen2.5's query, key and value projections have biases: folded, such a layer computes
    ``x (W + s B A)^T + bias``, so the loss and the adapters' gradients are peft's (up to
    rounding) with the bias added once, as peft's base layer adds it."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    base = Qwen2ForCausalLM(Qwen2Config(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2)).eval()
    with torch.no_grad():  # biases as after training (initialised to zero)
        for name, p in base.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0, 1.0)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear",
                                            init_lora_weights=False))
    layers = [m for m in model.modules() if hasattr(m, "lora_A")]
    assert sum(m.get_base_layer().bias is not None for m in layers) == 3  # q, k and v
    with folded_lora_update(model):
        assert all("forward" in vars(m) for m in layers)  # the biased layers folded too
    (want, want_grads), (got, got_grads) = _peft_then_folded(model)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
    for n, g in want_grads.items():
        torch.testing.assert_close(got_grads[n], g, rtol=1e-4,
                                   atol=1e-5 * float(g.abs().max()), msg=n)


def test_a_folded_lora_update_leaves_several_active_adapters_to_peft():
    """Two adapters active at once (peft sums both in every layer): folding one of them would
    drop the other, so the layers run as peft runs them, loss and gradients peft's own."""
    torch.manual_seed(0)
    model = _lora_model()
    model.add_adapter("other", LoraConfig(r=4, lora_alpha=8, target_modules="all-linear",
                                          init_lora_weights=False))
    with torch.no_grad():
        one = model(input_ids=IDS).logits
    model.base_model.set_adapter(["default", "other"])
    with torch.no_grad():
        assert not torch.allclose(model(input_ids=IDS).logits, one)  # the second one counts
    _assert_left_to_peft(model)


def test_a_folded_lora_update_leaves_merged_adapters_to_peft():
    """Adapters merged into the frozen weights (``merge_adapter``) are in ``W`` already:
    folding ``W + s B A`` would add them twice, so the merged model runs as peft runs it
    (its base layers alone, the same logits bit for bit, nothing to train)."""
    torch.manual_seed(0)
    model = _lora_model()
    with torch.no_grad():
        unmerged = model(input_ids=IDS).logits
    model.merge_adapter()
    want = model(input_ids=IDS).logits
    torch.testing.assert_close(want, unmerged, atol=1e-5, rtol=1e-4)
    with folded_lora_update(model):
        got = model(input_ids=IDS).logits
    assert torch.equal(got, want) and not got.requires_grad


@pytest.mark.parametrize("variant", [{"use_dora": True}, {"alora_invocation_tokens": [7, 8]}],
                         ids=["dora", "alora"])
def test_a_folded_lora_update_leaves_lora_variants_to_peft(variant):
    """A LoRA variant is not ``W + s B A``: DoRA rescales each output by a learned magnitude,
    aLoRA adapts only the positions from its invocation tokens on. Its layers run as peft
    runs them, loss and gradients peft's own."""
    torch.manual_seed(0)
    model = get_peft_model(load_model(tiny_model_folder(TinySpec()))[0], LoraConfig(
        r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False, **variant))
    with torch.no_grad():  # a variant's own parameters as after training
        for n, p in _adapters(model).items():
            if "lora_magnitude_vector" in n:
                p.mul_(1.5)
    _assert_left_to_peft(model)


def _float32_lora_update(fold: str) -> tuple[dict[str, torch.Tensor], int]:
    """One float32 LoRA update of the tiny model on a CPU: its adapters after, and how many
    matrix products its passes ran."""
    from torch.utils._python_dispatch import TorchDispatchMode

    import gagpo.policy_update as policy_update
    from gagpo.train_config import TrainConfig

    class Products(TorchDispatchMode):
        count = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default,
                        torch.ops.aten.bmm.default):
                Products.count += 1
            return func(*args, **(kwargs or {}))

    torch.manual_seed(3)
    model = _lora_model()
    batch = _update_batch()
    cfg = TrainConfig(lr=1e-2, kl_coef=0.0, lora_rank=4, micro_batch_tokens=16,
                      num_minibatches=2, fold_lora=fold)
    with Products():
        policy_update.update(model, None, torch.optim.SGD(_adapters(model).values(), lr=1e-2),
                             batch, cfg, compute=Compute.local(0), epoch_seed=0)
    return {n: p.detach().clone() for n, p in _adapters(model).items()}, Products.count


def test_a_float32_lora_update_on_a_cpu_folds_its_adapters_and_moves_as_before():
    """``--fold-lora auto`` (the default) on a CPU in float32: fewer products, the same
    adapters after two optimizer steps up to rounding; ``off`` runs peft's layers."""
    folded, folded_products = _float32_lora_update("auto")
    unfolded, products = _float32_lora_update("off")
    assert folded_products < products
    assert folded.keys() == unfolded.keys()
    for n in folded:
        torch.testing.assert_close(folded[n], unfolded[n], rtol=1e-5, atol=1e-6, msg=n)
    torch.manual_seed(3)
    start = _adapters(_lora_model())
    assert any(not torch.equal(folded[n], start[n]) for n in folded)  # the update moved them


def test_lora_on_the_last_layers_only_runs_no_backward_below_them(tmp_path):
    """``--lora-layers 1`` on the tiny model's two layers: adapters in the last layer only,
    the first layer's output carries no graph (its backward pass, the saving, never runs),
    and the run's adapters load as the model it trained."""
    import pytest

    from gagpo.distributed import save_pretrained
    from gagpo.logprobs import reply_logprobs
    from gagpo.train_config import TrainConfig
    from gagpo.trainer import build_model

    model, tok = build_model(TrainConfig(model="tiny", lora_rank=4, lora_layers=1),
                             torch.device("cpu"))
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(".layers.1." in n and "lora_" in n for n in trainable)
    # Every linear layer of the last decoder layer is adapted, as "all-linear" would.
    plain = [n for n, m in load_model("tiny")[0].named_modules()
             if isinstance(m, torch.nn.Linear) and ".layers.1." in n]
    assert {n.split(".lora_A.")[0].rsplit(".", 1)[-1] for n, p in model.named_parameters()
            if ".lora_A." in n} == {n.rsplit(".", 1)[-1] for n in plain}
    graph: dict[str, bool] = {}
    layers = model.get_base_model().model.layers
    hooks = [layer.register_forward_hook(
        lambda m, a, out, i=i: graph.__setitem__(i, (out[0] if isinstance(out, tuple)
                                                     else out).requires_grad))
             for i, layer in enumerate(layers)]
    with torch.no_grad():  # adapters that change the outputs, as after training
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.1)
    logp, mask, _ = reply_logprobs(model, [[5, 6, 7]], [[8, 9]], pad_id=0)
    for h in hooks:
        h.remove()
    assert graph == {0: False, 1: True}
    (logp * mask).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0
               for n, p in model.named_parameters() if p.requires_grad)
    save_pretrained(model, tok, tmp_path, rank=0)  # as the trainer writes final/
    loaded, _ = load_model(str(tmp_path))
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=IDS).logits, model(input_ids=IDS).logits,
                                   atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="2 decoder layers"):
        build_model(TrainConfig(model="tiny", lora_rank=4, lora_layers=3), torch.device("cpu"))
    with pytest.raises(ValueError, match="lora-rank"):
        TrainConfig(model="tiny", lora_layers=1)


def _lora_run_final(model_name: str, folder) -> torch.Tensor:
    """What a LoRA run on ``model_name`` leaves in ``final/`` (trainer's model, adapters that
    change the outputs, written as the trainer writes it); returns its logits on IDS."""
    from gagpo.distributed import save_pretrained
    from gagpo.train_config import TrainConfig
    from gagpo.trainer import build_model

    model, tok = build_model(TrainConfig(model=model_name, lora_rank=4), torch.device("cpu"))
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.1)
        logits = model(input_ids=IDS).logits
    save_pretrained(model, tok, folder, rank=0)
    return logits


def _base_named(folder) -> str:
    import json

    return json.loads((folder / "adapter_config.json").read_text())["base_model_name_or_path"]


def test_a_lora_runs_folder_loads_on_another_machine_by_its_base_models_name(
        tmp_path, monkeypatch):
    """A LoRA run on a built-in model names it in ``final/adapter_config.json`` ("tiny"), not
    this machine's cache folder: with that folder gone and another cache (another machine's),
    the adapters load over the model built there, as the model the run trained, and no
    adapter layer is left in it."""
    import shutil

    from peft.tuners.lora import LoraLayer

    monkeypatch.setenv("GAGPO_CACHE", str(tmp_path / "here"))
    want = _lora_run_final("tiny", tmp_path / "final")
    assert _base_named(tmp_path / "final") == "tiny"
    shutil.rmtree(tmp_path / "here")
    monkeypatch.setenv("GAGPO_CACHE", str(tmp_path / "there"))
    loaded, _ = load_model(str(tmp_path / "final"), device="cpu")
    assert not any(isinstance(m, LoraLayer) for m in loaded.modules())
    assert not hasattr(loaded, "peft_config")
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=IDS).logits, want, atol=1e-5, rtol=1e-4)


def test_a_lora_run_started_from_another_lora_runs_folder_loads_as_the_model_it_trained(
        tmp_path):
    """``gagpo train --model A/final --lora-rank 4`` where A was a LoRA run: B's adapters are
    over A's model (A's adapters folded in), and B's ``final/`` loads as that: A's adapters,
    then B's. A folder whose base is missing, or leads back to itself, is a clear error."""
    import json

    import pytest

    from gagpo.agents.models import MissingBaseModel

    first = _lora_run_final("tiny", tmp_path / "a")
    second = _lora_run_final(str(tmp_path / "a"), tmp_path / "b")
    assert not torch.allclose(first, second)  # B's adapters change A's model
    assert _base_named(tmp_path / "b") == str(tmp_path / "a")
    loaded, _ = load_model(str(tmp_path / "b"), device="cpu")
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=IDS).logits, second, atol=1e-5, rtol=1e-4)

    config = tmp_path / "a" / "adapter_config.json"
    settings = json.loads(config.read_text())
    config.write_text(json.dumps({**settings, "base_model_name_or_path": str(tmp_path / "no")}))
    with pytest.raises(MissingBaseModel, match="adapter_config.json") as missing:
        load_model(str(tmp_path / "b"), device="cpu")
    assert str(tmp_path / "a") in str(missing.value)  # the folder to edit
    config.write_text(json.dumps({**settings, "base_model_name_or_path": str(tmp_path / "b")}))
    with pytest.raises(ValueError, match="lead back to themselves"):
        load_model(str(tmp_path / "b"), device="cpu")


def test_a_folder_whose_adapters_retrain_some_tokens_loads_with_those_tokens_trained(tmp_path):
    """peft's ``trainable_token_indices``: a few rows of the (tied) embedding trained beside the
    adapters. The folder loads as the model it trained, those rows merged into the embedding,
    which is its output layer again, and no peft wrapper left."""
    from peft.utils.other import AuxiliaryTrainingWrapper

    torch.manual_seed(0)
    base, tokenizer = load_model(tiny_model_folder(TinySpec()))
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear",
                                            init_lora_weights=False,
                                            trainable_token_indices=[6, 8, 10]))
    with torch.no_grad():
        without = model(input_ids=IDS).logits
        for n, p in _adapters(model).items():
            if "trainable_tokens_delta" in n:
                p.normal_(0, 1.0)  # the trained rows
        want = model(input_ids=IDS).logits
    assert not torch.allclose(want, without)  # the trained rows matter
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded, _ = load_model(str(tmp_path))
    assert not any(isinstance(m, AuxiliaryTrainingWrapper) for m in loaded.modules())
    assert loaded.get_output_embeddings().weight is loaded.get_input_embeddings().weight
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=IDS).logits, want, atol=1e-5, rtol=1e-4)


def test_adapters_load_over_a_model_whose_embeddings_transformers_left_untied(tmp_path):
    """A checkpoint whose config asks for tied embeddings but holds two different matrices:
    transformers loads it untied (with a warning), and its adapters load over it as the model
    they trained, the output layer still its own (nothing was unwrapped to tie again)."""
    import json

    base, tokenizer = load_model(tiny_model_folder(TinySpec()))
    torch.manual_seed(0)
    head = base.get_output_embeddings()
    head.weight = torch.nn.Parameter(head.weight.detach() + torch.randn_like(head.weight))
    base.config.tie_word_embeddings = False
    base.save_pretrained(tmp_path / "base")
    tokenizer.save_pretrained(tmp_path / "base")
    config = tmp_path / "base" / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "tie_word_embeddings": True}))
    untied, _ = load_model(str(tmp_path / "base"))
    assert untied.config.tie_word_embeddings
    assert untied.get_output_embeddings().weight is not untied.get_input_embeddings().weight
    model = get_peft_model(untied, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear",
                                              init_lora_weights=False))
    with torch.no_grad():
        want = model(input_ids=IDS).logits
    model.save_pretrained(tmp_path / "final")
    tokenizer.save_pretrained(tmp_path / "final")
    loaded, _ = load_model(str(tmp_path / "final"))
    assert loaded.get_output_embeddings().weight is not loaded.get_input_embeddings().weight
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=IDS).logits, want, atol=1e-4, rtol=1e-4)


def test_a_module_trained_in_full_loads_where_the_config_names_no_tied_embeddings(tmp_path):
    """Some architectures' configs have no ``tie_word_embeddings`` at all (Ergo's): a folder
    whose adapters trained a module in full (peft's ``modules_to_save``, here the output
    layer) loads over such a model as the model it trained."""
    import transformers

    if not hasattr(transformers, "ErgoConfig"):
        pytest.skip("an older transformers, without Ergo")
    tokenizer = load_model(tiny_model_folder(TinySpec()))[1]
    torch.manual_seed(0)
    config = transformers.ErgoConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, first_dense_intermediate_size=64,
        num_dense_blocks=1)  # one dense layer: no experts
    assert not hasattr(config, "tie_word_embeddings")
    transformers.ErgoForCausalLM(config).save_pretrained(tmp_path / "base")
    tokenizer.save_pretrained(tmp_path / "base")
    model = get_peft_model(load_model(str(tmp_path / "base"))[0], LoraConfig(
        r=4, lora_alpha=8, target_modules=["qkv_proj"], init_lora_weights=False,
        modules_to_save=["lm_head"]))
    with torch.no_grad():
        for n, p in _adapters(model).items():
            if ".modules_to_save." in n:
                p.add_(torch.randn_like(p))  # the output layer as after training
        want = model(input_ids=IDS).logits
    model.save_pretrained(tmp_path / "final")
    tokenizer.save_pretrained(tmp_path / "final")
    loaded, _ = load_model(str(tmp_path / "final"))
    assert not hasattr(loaded, "peft_config")
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=IDS).logits, want, atol=1e-5, rtol=1e-4)


def test_lora_embeddings_train_the_tied_embedding_beside_the_adapters(tmp_path):
    """``--lora-embeddings``: the token embedding, which the tiny model ties to its output
    layer as SmolLM2 does, trains in full beside the adapters as one matrix (full fine-tuning
    moves it; LoRA's ``all-linear`` leaves it frozen); the KL reference pass (adapters off)
    is the model the run started from; ``final/`` loads as the model it trained, tied again."""
    import pytest
    from peft.utils.other import AuxiliaryTrainingWrapper

    from gagpo.distributed import save_pretrained
    from gagpo.logprobs import reply_logprobs
    from gagpo.train_config import TrainConfig
    from gagpo.trainer import build_model

    torch.manual_seed(0)
    model, tok = build_model(TrainConfig(model="tiny", lora_rank=4, lora_embeddings=True),
                             torch.device("cpu"))
    full = [(n, p) for n, p in model.named_parameters() if p.requires_grad and "lora_" not in n]
    assert [n for n, _ in full] == ["base_model.model.model.embed_tokens.modules_to_save."
                                    "default.weight"]
    embedding = full[0][1]
    assert model.get_output_embeddings().weight is embedding  # tied, as full fine-tuning's
    with torch.no_grad():
        start = model(input_ids=IDS).logits
    logp, mask, _ = reply_logprobs(model, [[5, 6, 7]], [[8, 9]], pad_id=0)
    (logp * mask).sum().backward()
    assert embedding.grad is not None and embedding.grad.abs().sum() > 0
    torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1).step()
    with torch.no_grad():
        trained = model(input_ids=IDS).logits
        assert not torch.allclose(trained, start)
        with model.disable_adapter():
            torch.testing.assert_close(model(input_ids=IDS).logits, start)
    save_pretrained(model, tok, tmp_path, rank=0)  # as the trainer writes final/
    loaded, _ = load_model(str(tmp_path))
    assert not any(isinstance(m, AuxiliaryTrainingWrapper) for m in loaded.modules())
    assert loaded.get_output_embeddings().weight is loaded.get_input_embeddings().weight
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=IDS).logits, trained, atol=1e-4,
                                   rtol=1e-4)
    with pytest.raises(ValueError, match="lora-rank"):
        TrainConfig(model="tiny", lora_embeddings=True)


def test_the_embeddings_train_at_their_own_rate_where_one_is_given():
    """``--embeddings-lr``: Adam's first step moves each entry by about its rate, so the
    trained embedding moves by 1e-5 where the adapters move by 1e-3."""
    import pytest

    from gagpo.logprobs import reply_logprobs
    from gagpo.train_config import TrainConfig
    from gagpo.trainer import build_model, make_optimizer

    cfg = TrainConfig(model="tiny", lora_rank=4, lora_embeddings=True, lr=1e-3,
                      embeddings_lr=1e-5)
    model, _ = build_model(cfg, torch.device("cpu"))
    trained = {n: p for n, p in model.named_parameters() if p.requires_grad}
    before = {n: p.detach().clone() for n, p in trained.items()}
    logp, mask, _ = reply_logprobs(model, [[5, 6, 7]], [[8, 9]], pad_id=0)
    (logp * mask).sum().backward()
    make_optimizer(model, cfg).step()
    moved = {n: (p.detach() - before[n]).abs().max().item() for n, p in trained.items()}
    embedding = [v for n, v in moved.items() if ".modules_to_save." in n]
    adapters = [v for n, v in moved.items() if "lora_B" in n]
    assert len(embedding) == 1 and 0 < embedding[0] <= 1.01e-5
    assert adapters and max(adapters) > 0.9e-3
    with pytest.raises(ValueError, match="--embeddings-lr"):
        TrainConfig(model="tiny", lora_rank=4, embeddings_lr=1e-5)


# -- the update's LoRA contexts give the model back as it was, whatever happens inside -------


def _frozen(model) -> dict[str, torch.Tensor]:
    return {n: p for n, p in model.named_parameters() if not p.requires_grad}


def _assert_frozen_as_before(model, frozen: dict, before: dict) -> None:
    """Every frozen weight the very tensor it was, bit for bit, still frozen."""
    now = _frozen(model)
    assert now.keys() == frozen.keys()
    for n, p in frozen.items():
        assert now[n] is p and p.dtype == before[n].dtype and torch.equal(p, before[n]), n


def _with_steps(model, fold: bool, epochs: int = 2) -> None:
    """Two updates of two optimizer steps each, each update in its own context (as the
    trainer's iterations run them). AdamW with weight decay over every parameter: a frozen
    weight that got a gradient (even a zero one) would move."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    adapters = set(_adapters(model))
    for _ in range(epochs):
        with folded_lora_update(model) if fold else contextlib.nullcontext():
            for _ in range(2):
                optimizer.zero_grad(set_to_none=True)
                _loss(model).backward()
                # only the adapters' gradients: nothing reaches the frozen weights
                assert {n for n, p in model.named_parameters() if p.grad is not None} \
                    == adapters
                optimizer.step()


def test_a_folded_lora_update_never_touches_the_frozen_weights_and_moves_as_peft():
    """The fold is a copy: after folded updates (each in its own context, optimizer steps
    inside), every frozen weight is the very tensor it was, bit for bit, no gradient ever
    reached one, the layers are peft's again, and the adapters are where unfolded updates
    take them (up to rounding)."""
    torch.manual_seed(0)
    model = _lora_model()
    frozen = _frozen(model)
    before = {n: p.detach().clone() for n, p in frozen.items()}
    start = {n: p.detach().clone() for n, p in _adapters(model).items()}
    _with_steps(model, fold=True)
    _assert_frozen_as_before(model, frozen, before)
    assert not any("forward" in vars(m) for m in model.modules() if hasattr(m, "lora_A"))
    torch.manual_seed(0)
    plain = _lora_model()
    _with_steps(plain, fold=False)
    got, want = _adapters(model), _adapters(plain)
    assert any(not torch.equal(got[n], start[n]) for n in got)  # the updates moved them
    for n in want:
        torch.testing.assert_close(got[n], want[n], rtol=1e-4, atol=1e-5, msg=n)


def test_a_folded_lora_update_gives_peft_s_layers_back_when_its_pass_fails():
    """An exception inside (a pass that runs out of memory, a bad batch) still gives every
    layer its own forward back, and the model computes what it computed before."""
    torch.manual_seed(0)
    model = _lora_model()
    frozen = _frozen(model)
    before = {n: p.detach().clone() for n, p in frozen.items()}
    with torch.no_grad():
        want = model(input_ids=IDS).logits
    layers = [m for m in model.modules() if hasattr(m, "lora_A")]
    with pytest.raises(RuntimeError, match="a pass failed"), folded_lora_update(model):
        _loss(model).backward()
        assert all("forward" in vars(m) for m in layers)
        raise RuntimeError("a pass failed")
    assert not any("forward" in vars(m) for m in layers)
    _assert_frozen_as_before(model, frozen, before)
    with torch.no_grad():
        assert torch.equal(model(input_ids=IDS).logits, want)


def test_a_folded_lora_update_inside_another_is_safe():
    """Nested (an update's pass inside another's context): the inner context's exit leaves
    the outer one's layers folded, the outer one's exit gives peft's layers back, and the
    adapters' gradients are peft's."""
    torch.manual_seed(0)
    model = _lora_model()
    layers = [m for m in model.modules() if hasattr(m, "lora_A")]
    _loss(model).backward()
    want = {n: p.grad.clone() for n, p in _adapters(model).items()}
    model.zero_grad(set_to_none=True)
    with folded_lora_update(model):
        with folded_lora_update(model):
            _loss(model).backward()
        assert all("forward" in vars(m) for m in layers)  # the outer fold still on
    assert not any("forward" in vars(m) for m in layers)
    for n, g in want.items():
        torch.testing.assert_close(_adapters(model)[n].grad, g, rtol=1e-4,
                                   atol=1e-5 * float(g.abs().max()), msg=n)


def _casting(model) -> list[bool]:
    return [m.cast_input_dtype_enabled for m in model.modules() if hasattr(m, "lora_A")]


def test_lora_passes_in_gives_the_model_back_after_an_exception_and_when_nested():
    """Inside, the frozen LoRA weights are held in the autocast dtype and only the adapters
    train (a gradient reaches nothing else; the optimizer's parameters, read inside, are the
    adapters); a nested use changes nothing; on exit, even through an exception, every frozen
    weight is the very float32 tensor it was, bit for bit, and peft casts its inputs again."""
    from gagpo.common.lora import lora_passes_in
    from gagpo.logprobs import reply_logprobs

    torch.manual_seed(0)
    model = _lora_model()
    frozen = _frozen(model)
    before = {n: p.detach().clone() for n, p in frozen.items()}
    adapters = set(_adapters(model))
    bases = [m.get_base_layer() for m in model.modules() if hasattr(m, "lora_A")]
    with torch.no_grad():
        want = model(input_ids=IDS).logits
    assert all(_casting(model))
    with pytest.raises(RuntimeError, match="a pass failed"), \
            lora_passes_in(model, torch.bfloat16):
        assert all(b.weight.dtype == torch.bfloat16 for b in bases) and not any(_casting(model))
        with lora_passes_in(model, torch.bfloat16):
            held = [b.weight for b in bases]
        assert [b.weight for b in bases] == held and not any(_casting(model))
        assert {n for n, p in model.named_parameters() if p.requires_grad} == adapters
        logp, mask, _ = reply_logprobs(model, [[5, 6, 7]], [[8, 9, 10]], pad_id=0,
                                       autocast_dtype=torch.bfloat16)
        (logp * mask).sum().backward()
        assert {n for n, p in model.named_parameters() if p.grad is not None} == adapters
        raise RuntimeError("a pass failed")
    _assert_frozen_as_before(model, frozen, before)
    assert all(_casting(model))
    with torch.no_grad():
        assert torch.equal(model(input_ids=IDS).logits, want)


def test_lora_passes_under_autocast_see_each_optimizer_step():
    """The casts held for the update's passes are the frozen weights' only: after an
    optimizer step between passes, the next pass runs the stepped adapters, not a stale
    low-precision copy of them; each pass's log-probs and the adapters after are those of
    passes without the held casts, bit for bit."""
    from gagpo.common.lora import lora_passes_in
    from gagpo.logprobs import reply_logprobs

    prompts, replies = [[5, 6, 7, 8], [5, 6, 7, 8]], [[9, 10, 11], [12, 13]]

    def passes(hold: bool) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
        torch.manual_seed(0)
        model = _lora_model()
        optimizer = torch.optim.SGD(_adapters(model).values(), lr=0.5)
        seen = []
        with lora_passes_in(model, torch.bfloat16) if hold else contextlib.nullcontext():
            for _ in range(3):
                optimizer.zero_grad()
                logp, mask, _ = reply_logprobs(model, prompts, replies, pad_id=0,
                                               autocast_dtype=torch.bfloat16)
                (logp * mask).sum().backward()
                optimizer.step()
                seen.append(logp.detach())
        return seen, {n: p.detach().clone() for n, p in _adapters(model).items()}

    (held, held_adapters), (cast, cast_adapters) = passes(True), passes(False)
    assert not torch.equal(cast[0], cast[-1])  # the steps move the log-probs
    for k, (a, b) in enumerate(zip(held, cast, strict=True)):
        assert torch.equal(a, b), k
    for n in cast_adapters:
        assert torch.equal(held_adapters[n], cast_adapters[n]), n


def test_folded_sampling_gives_the_model_back_after_an_exception_and_when_nested():
    """A rollout that fails inside the fold (an env error, an interrupt) still gives back the
    frozen weights (the very tensors, frozen again) and the adapters (on again); a fold
    inside a fold changes nothing, and the inner one's exit leaves the outer one folded."""
    torch.manual_seed(0)
    model = _lora_model()
    frozen = _frozen(model)
    before = {n: p.detach().clone() for n, p in frozen.items()}
    trainable = set(_adapters(model))
    layers = [m for m in model.modules() if hasattr(m, "lora_A")]
    with torch.no_grad():
        want = model(input_ids=IDS).logits
        with pytest.raises(KeyboardInterrupt), folded_for_sampling(model):
            folded = model(input_ids=IDS).logits
            with folded_for_sampling(model):
                assert torch.equal(model(input_ids=IDS).logits, folded)
            assert all(m._disable_adapters for m in layers)  # the outer fold still on
            assert torch.equal(model(input_ids=IDS).logits, folded)
            raise KeyboardInterrupt
        assert not any(m._disable_adapters for m in layers)
        assert torch.equal(model(input_ids=IDS).logits, want)
    _assert_frozen_as_before(model, frozen, before)
    assert set(_adapters(model)) == trainable
