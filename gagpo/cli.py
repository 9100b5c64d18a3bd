"""The ``gagpo`` command line: ``gagpo serve webshop``, ``gagpo eval``, ``gagpo train``,
``gagpo demo``, ``gagpo view``, ``gagpo export``, ``gagpo compare``, ``gagpo verl-data``."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

from gagpo.common.flags import json_object


def _serve(args: argparse.Namespace) -> int:
    from gagpo.servers.webshop.web.serve import main as serve_webshop

    return serve_webshop(args.extra)


def _serve_env(args: argparse.Namespace) -> int:
    from gagpo.integrations.openenv.cli import main as serve_env

    return serve_env(args.extra)


def _verl_data(args: argparse.Namespace) -> int:
    from gagpo.integrations.verl.dataset import main as verl_data

    return verl_data(args.extra)


def _demo(args: argparse.Namespace) -> int:
    from gagpo.demo import run_demo

    run_demo(episodes=args.episodes, out_dir=args.out_dir, quick=args.quick)
    return 0


def _train(args: argparse.Namespace) -> int:
    from gagpo.evaluate import held_out_lines
    from gagpo.train_config import config_from_args
    from gagpo.trainer import train

    cfg = config_from_args(args)
    lines = held_out_lines(train(cfg))
    if lines and int(os.environ.get("RANK", "0")) == 0:
        print(f"\nHeld-out success (95% Wilson interval), {cfg.eval_episodes} episodes each "
              f"(also in {cfg.out_dir}/evals.json):")
        print("\n".join(lines))
    return 0


def _export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from gagpo.export import export_checkpoint

    record = export_checkpoint(Path(args.run), Path(args.out))
    print(f"{args.out}: {args.run}'s model after iteration {record['iteration']} "
          f"(parameters sha256 {record['parameters_sha256'][:16]}...)")
    return 0


def _view(args: argparse.Namespace) -> int:
    from gagpo.viewer import main as view

    return view(args=args)


def _compare(args: argparse.Namespace) -> int:
    from gagpo.compare import run_compare

    labels = None if args.labels is None else args.labels.split(",")
    run_compare(args.eval_a, args.eval_b, out=args.out, seed=args.seed, n_boot=args.bootstrap,
                labels=labels)
    return 0


def _missing_extras(error: ImportError):
    def fail(args: argparse.Namespace) -> int:
        raise ImportError(f"gagpo {args.command} needs the trainer's extras: "
                          f"pip install 'gagpo[agents,train]' ({error})")
    return fail


def _eval(args: argparse.Namespace) -> int:
    from gagpo.agents.policies.factory import PolicySpec
    from gagpo.evaluate import evaluate

    spec = PolicySpec(
        name=args.policy, mode=args.mode, temperature=args.temperature, top_p=args.top_p,
        max_new_tokens=args.max_new_tokens, server_model=args.server_model, seed=args.seed,
    )
    env_kwargs = {}
    for item in args.env_arg or []:
        key, _, value = item.partition("=")
        if not key or not _:
            raise ValueError(f"--env-arg takes KEY=VALUE, not {item!r}")
        env_kwargs[key] = _parse_value(value)
    evaluate(
        args.env, spec, split=args.split, episodes=args.episodes, batch=args.batch,
        batch_tokens=args.batch_tokens,
        backend=args.backend, env_kwargs=env_kwargs, out=args.out,
        history_length=args.history_length, max_prompt_tokens=args.max_prompt_tokens,
        bf16=args.bf16, engine_kwargs=args.vllm_kwargs,
    )
    return 0


def _parse_value(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def build_parser() -> argparse.ArgumentParser:
    from gagpo.agents.policies.base import MODES
    from gagpo.envs.vector import BACKENDS

    parser = argparse.ArgumentParser(prog="gagpo", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="serve an environment for people and programs")
    serve_sub = serve.add_subparsers(dest="env", required=True)
    shop = serve_sub.add_parser(
        "webshop", add_help=False,
        help="the WebShop shop (HTML pages and a JSON API); --help lists its options",
    )
    # The shop's own parser (gagpo.servers.webshop.web.serve) owns its options: main() forwards
    # them.
    shop.set_defaults(func=_serve)
    served = serve_sub.add_parser(
        "env", add_help=False,
        help="any registered env over OpenEnv (WebSocket sessions, task API) for other "
             "trainers: gagpo serve env --env WebShop-v0; --help lists its options "
             "(needs gagpo[openenv])",
    )
    served.set_defaults(func=_serve_env, extra_ok=True)  # its own parser owns its options

    ev = sub.add_parser("eval", help="evaluate a policy: success and score per task type")
    ev.add_argument("--env", required=True, help="a registered env id, e.g. WebShop-v0")
    ev.add_argument("--policy", required=True,
                    help="expert | rule | rule_options (WebShop's rule baseline; rule_options "
                         "also picks named options, on text_rich pages) | random | tiny | "
                         "smollm2-135m | a Hugging Face id or local path | vllm:<one of those "
                         "models> (a vLLM engine) | openai:<base url> (an OpenAI-compatible "
                         "chat server)")
    ev.add_argument("--server-model", default=None, help="model name for an openai: policy")
    ev.add_argument("--mode", choices=list(MODES), default="generate",
                    help="model policies: generate replies, or score the admissible actions")
    ev.add_argument("--split", default=None, help="test/eval/train (WebShop), "
                    "valid_seen/valid_unseen/train (ALFWorld); default: the env's")
    ev.add_argument("--episodes", type=int, default=100, help="the split's first N tasks")
    ev.add_argument("--batch", type=int, default=16, help="episodes played together")
    ev.add_argument("--batch-tokens", type=int, default=None,
                    help="a transformers model's cache positions per generation pass: rows x "
                         "(longest prompt + --max-new-tokens); bounds its memory (default: "
                         "--batch rows)")
    ev.add_argument("--backend", choices=list(BACKENDS), default="inprocess")
    ev.add_argument("--temperature", type=float, default=0.4,
                    help="sampling temperature (the papers validate at 0.4; 0 = greedy)")
    ev.add_argument("--top-p", type=float, default=1.0)
    ev.add_argument("--max-new-tokens", type=int, default=256)
    ev.add_argument("--history-length", type=int, default=2,
                    help="(observation, action) pairs in the prompt")
    ev.add_argument("--max-prompt-tokens", type=int, default=None,
                    help="model policies: cap on the chat-formatted prompt in tokens (history "
                         "dropped oldest first; the task, the page and its actions stay)")
    ev.add_argument("--bf16", choices=["auto", "on", "off"], default="auto",
                    help="model policies: bf16 autocast (auto: CUDA with bf16, CPUs with AMX "
                         "or AVX512-BF16, for models of 50M+ parameters); a vllm: engine's "
                         "dtype, bf16 or float32, unless --vllm-kwargs names one")
    ev.add_argument("--vllm-kwargs", type=json_object, default=None, metavar="JSON",
                    help="a vllm: policy's further vllm.LLM arguments (a JSON object), e.g. "
                         "'{\"enforce_eager\": true}' (no graph compilation: the engine starts "
                         "in seconds rather than minutes on a CPU)")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--env-arg", action="append", metavar="KEY=VALUE",
                    help="extra gymnasium.make() argument (repeatable), e.g. goals=synthetic")
    ev.add_argument("--out", default=None,
                    help="folder for summary.json and trajectories.jsonl")
    ev.set_defaults(func=_eval)

    tr = sub.add_parser(
        "train", help="train a ReAct agent with GAGPO, GiGPO, GRPO or RLOO",
        description="Train a ReAct agent on an environment. Every hyper-parameter has a flag; "
                    "--config FILE (TOML or JSON, keys as the flag names with underscores) "
                    "sets any of them and flags given here win. Under torchrun the rollouts "
                    "are sharded across ranks.")
    try:
        from gagpo.train_config import add_arguments
    except ImportError as e:  # the base install (no torch): eval and serve still work
        tr.set_defaults(func=_missing_extras(e), extra_ok=True)
    else:
        tr.add_argument("--config", default=None, help="TOML or JSON file of settings")
        add_arguments(tr)
        tr.set_defaults(func=_train)

    export = sub.add_parser(
        "export", help="a training run's latest checkpoint as a model folder (eval, train "
                       "--model and transformers read it), e.g. of a run still going")
    export.add_argument("run", help="the run's folder (its --out-dir, holding checkpoint.pt)")
    export.add_argument("--out", required=True, help="a new or empty folder")
    export.set_defaults(func=_export if importlib.util.find_spec("torch") else
                        _missing_extras(ImportError("No module named 'torch'")))

    verl_data = sub.add_parser(
        "verl-data", add_help=False,
        help="write the task dataset verl reads for an env (train.parquet, test.parquet): "
             "gagpo verl-data --env WebShop-v0 --out data/webshop; --help lists its options "
             "(needs gagpo[verl]; docs/verl.md)")
    verl_data.set_defaults(func=_verl_data, extra_ok=True)  # its own parser owns its options

    demo = sub.add_parser("demo", help="train the tiny model on WebShop on this CPU and print "
                                       "held-out success before and after")
    demo.add_argument("--episodes", type=int, default=300,
                      help="held-out test episodes per evaluation")
    demo.add_argument("--out-dir", default="runs/demo", help="where the run's files go")
    demo.add_argument("--quick", action="store_true", help="a 1-minute smoke version")
    demo.set_defaults(func=_demo)

    cmp = sub.add_parser(
        "compare", help="two evaluations of the same goals, paired: B - A with 95%% intervals",
        description="Pair the episodes of two evaluations by goal and print B - A of success, "
                    "score and the step rates, with 95% intervals (paired t and paired "
                    "bootstrap over goals; step rates' intervals resample whole episodes) and "
                    "an exact sign test, as a markdown table. A side may pool several "
                    "evaluations of the same goals (seeds of one recipe): EVAL,EVAL,... "
                    "averages each goal's plays before the goals are paired.")
    for name in ("eval_a", "eval_b"):
        cmp.add_argument(name, metavar=name.upper(),
                         help="a gagpo eval --out folder, or its trajectories.jsonl or "
                              "summary.json; or several, comma-separated, pooled")
    cmp.add_argument("--out", default=None, metavar="FILE.json",
                     help="also write the comparison as JSON")
    cmp.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    cmp.add_argument("--bootstrap", type=int, default=10_000, metavar="N",
                     help="bootstrap resamples")
    cmp.add_argument("--labels", default=None, metavar="A,B",
                     help="names of the two sides in the table (default: their folders' names)")
    cmp.set_defaults(func=_compare)

    from gagpo.viewer import build_parser as view_parser

    view = sub.add_parser("view", help="see runs in a browser: curves, rollouts, step credit")
    view_parser(view).set_defaults(func=_view)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.func is not _serve and not getattr(args, "extra_ok", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except (FileNotFoundError, ValueError, ImportError) as e:  # files, values, extras missing
        print(f"gagpo: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
