"""Build a tiny Llama-architecture model and byte-level BPE tokenizer from nothing, offline, in seconds.

The result is a standard ``save_pretrained`` folder (``LlamaForCausalLM`` + ``PreTrainedTokenizerFast``
with a ChatML chat template) that ``AutoModelForCausalLM`` / ``AutoTokenizer`` reload with identical token
ids. Weights are randomly initialised from ``seed``; the tokenizer is trained with the ``tokenizers``
library on a generated corpus (arithmetic, words, chat turns) or on a text file the caller gives.
Digits are split one per token so arithmetic tokenizes the same way whatever the number.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Optional, TypedDict, Union

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
END_OF_TEXT = "<|endoftext|>"
SPECIAL_TOKENS: list[str] = [END_OF_TEXT, IM_START, IM_END]
# The role each special token plays for transformers: a ChatML turn ends generation, padding uses
# <|endoftext|>, and there is no BOS or unknown token (byte-level BPE can spell anything).
_TOKEN_ROLES: dict[str, Optional[str]] = {
    "eos_token": IM_END,
    "pad_token": END_OF_TEXT,
    "bos_token": None,
    "unk_token": None,
}

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

_WORDS = (
    "the a an and or but if then else is are was were be been have has had do does did not no yes "
    "what which who whom whose when where why how answer question number sum total difference product "
    "plus minus times divided by equals result solve compute calculate think step first second third "
    "next finally therefore so because value count letters word words letter spell backward reverse "
    "sort list item items true false correct wrong right left up down game move action state reward "
    "you me we they he she it I my your our their this that these those here there please thank hello "
    "user assistant system helpful model language learn learning train training policy good bad small "
    "large big little one two three four five six seven eight nine ten hundred thousand apple banana "
    "cat dog house tree water fire earth air book code function return print def class import python "
    "test check score point points final boxed"
).split()

_SYSTEM_PROMPTS = (
    "You are a helpful assistant.",
    "You are a careful math tutor. Think step by step.",
    "Answer with just the number.",
    "You are a deep thinking AI. Put the final answer in <answer></answer> tags.",
)


def default_corpus(seed: int = 0, n_lines: int = 3000) -> list[str]:
    """A deterministic generated corpus: arithmetic questions and answers, word sentences, ChatML turns."""
    rng = random.Random(seed)
    lines: list[str] = []
    ops = [("+", lambda a, b: a + b), ("-", lambda a, b: a - b), ("*", lambda a, b: a * b)]
    for i in range(n_lines):
        kind = i % 4
        a, b = rng.randint(0, 999), rng.randint(0, 99)
        sym, fn = ops[rng.randrange(len(ops))]
        if kind == 0:
            lines.append(f"What is {a} {sym} {b}? The answer is {fn(a, b)}.")
        elif kind == 1:
            words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 14)))
            lines.append(words.capitalize() + rng.choice([".", "?", "!", ","]))
        elif kind == 2:
            system = rng.choice(_SYSTEM_PROMPTS)
            lines.append(
                f"{IM_START}system\n{system}{IM_END}\n{IM_START}user\nWhat is {a} {sym} {b}?{IM_END}\n"
                f"{IM_START}assistant\n<answer>{fn(a, b)}</answer>{IM_END}\n"
            )
        else:
            word = rng.choice(_WORDS)
            lines.append(
                f"Spell '{word}' backward: {word[::-1]}. Count the letters in {word}: {len(word)}. "
                f"Sum: {a} + {b} = {a + b}; \\boxed{{{a + b}}} (x, y) [1, 2] {{'k': 3}} #"
            )
    return lines


def build_tokenizer(
    corpus: Iterable[str], vocab_size: int = 512, model_max_length: Optional[int] = None
) -> Any:
    """Train a byte-level BPE tokenizer (digits split individually) and wrap it for transformers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        **_TOKEN_ROLES,
        chat_template=CHATML_TEMPLATE,
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
    )


def _read_corpus(corpus: Union[None, str, Path, Sequence[str]], seed: int) -> list[str]:
    if corpus is None:
        return default_corpus(seed)
    if isinstance(corpus, (str, Path)):
        path = Path(corpus)
        if not path.is_file():
            from atroposlib.errors import ConfigError

            raise ConfigError(f"corpus file not found: {path}")
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    else:
        lines = [str(x) for x in corpus]
    if not lines:
        from atroposlib.errors import ConfigError

        raise ConfigError("corpus is empty: give at least one non-empty line")
    return lines


# Where a random-initialised "tiny" model stops being tiny: built in memory, float32, at once.
MAX_PARAMETERS = 1_000_000_000
_SIZE_ARGS = (
    "seed",
    "hidden_size",
    "num_layers",
    "num_heads",
    "vocab_size",
    "max_position_embeddings",
    "intermediate_size",
)


def _default_intermediate(hidden_size: int) -> int:
    return ((hidden_size * 8 // 3) + 7) // 8 * 8


class _Sizes(TypedDict):
    """The seed and sizes that are both checked (``tiny_model_problem``) and built (``_build_into``)."""

    seed: int
    hidden_size: int
    num_layers: int
    num_heads: int
    vocab_size: int
    max_position_embeddings: int


def tiny_model_problem(
    *,
    seed: int = 0,
    hidden_size: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    vocab_size: int = 512,
    max_position_embeddings: int = 512,
    intermediate_size: Optional[int] = None,
    names: Optional[dict[str, str]] = None,
) -> Optional[str]:
    """What is wrong with these sizes (one sentence naming the argument, by ``names`` when given:
    the CLI passes its flags), or None. Checked before anything is created."""
    name = {key: (names or {}).get(key, key) for key in _SIZE_ARGS}
    sizes = {
        "hidden_size": hidden_size,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "max_position_embeddings": max_position_embeddings,
    }
    if intermediate_size is not None:
        sizes["intermediate_size"] = intermediate_size
    for key, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return f"{name[key]} must be a positive integer, got {value!r}"
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 260:
        return (
            f"{name['vocab_size']} must be at least 260 (256 bytes + specials), got {vocab_size!r}"
        )
    if not isinstance(seed, int) or not 0 <= seed < 2**64:
        return f"{name['seed']} must be an integer from 0 to 2**64 - 1, got {seed!r}"
    if hidden_size % num_heads != 0:
        return (
            f"{name['hidden_size']} ({hidden_size}) must be divisible by "
            f"{name['num_heads']} ({num_heads})"
        )
    if (hidden_size // num_heads) % 2:
        return (
            f"{name['hidden_size']} / {name['num_heads']} (the head size, "
            f"{hidden_size // num_heads}) must be even for rotary position embeddings"
        )
    inter = intermediate_size or _default_intermediate(hidden_size)
    params = vocab_size * hidden_size + num_layers * (4 * hidden_size**2 + 3 * hidden_size * inter)
    if params > MAX_PARAMETERS:
        return (
            f"that is about {params:,} parameters; this tool builds tiny models (at most "
            f"{MAX_PARAMETERS:,}): lower {name['hidden_size']}, {name['num_layers']} or "
            f"{name['vocab_size']}"
        )
    return None


def _first_missing(path: Path) -> Optional[Path]:
    """The outermost folder of ``path`` that does not exist yet (what ``mkdir(parents=True)``
    creates and a failed build removes), or None when ``path`` exists."""
    missing = None
    for p in (path, *path.parents):
        if p.exists():
            break
        missing = p
    return missing


def build_tiny_model(
    out_dir: Union[str, Path],
    *,
    seed: int = 0,
    hidden_size: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    vocab_size: int = 512,
    corpus: Union[None, str, Path, Sequence[str]] = None,
    max_position_embeddings: int = 512,
    intermediate_size: Optional[int] = None,
) -> Path:
    """Build and save a tiny randomly initialised Llama model + tokenizer to ``out_dir``; return the path.

    Deterministic for a given ``seed`` and arguments. ``corpus`` is a list of lines or a text file (one
    document per line); by default a generated arithmetic/words/chat corpus is used. Bad sizes
    (``tiny_model_problem``) or corpus raise ``ConfigError`` before anything is created; a build that
    fails later removes the folders it created.
    """
    from atroposlib.errors import ConfigError

    sizes: _Sizes = {
        "seed": seed,
        "hidden_size": hidden_size,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "vocab_size": vocab_size,
        "max_position_embeddings": max_position_embeddings,
    }
    problem = tiny_model_problem(intermediate_size=intermediate_size, **sizes)
    if problem:
        raise ConfigError(problem)
    lines = _read_corpus(corpus, seed)
    out = Path(out_dir)
    created = _first_missing(out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        _build_into(
            out,
            lines,
            intermediate_size=intermediate_size or _default_intermediate(hidden_size),
            **sizes,
        )
    except BaseException:
        if created is not None:  # leave nothing behind: the folders this call made go again
            shutil.rmtree(created, ignore_errors=True)
        raise
    return out


def _build_into(
    out: Path,
    lines: list[str],
    *,
    seed: int,
    hidden_size: int,
    num_layers: int,
    num_heads: int,
    vocab_size: int,
    max_position_embeddings: int,
    intermediate_size: int,
) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    tokenizer = build_tokenizer(
        lines, vocab_size=vocab_size, model_max_length=max_position_embeddings
    )
    pad_id = tokenizer.convert_tokens_to_ids(END_OF_TEXT)
    eos_id = tokenizer.convert_tokens_to_ids(IM_END)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=pad_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        initializer_range=0.02,
    )
    saved_rng_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    finally:
        torch.random.set_rng_state(saved_rng_state)
    model.generation_config = GenerationConfig(
        bos_token_id=pad_id, eos_token_id=[eos_id, pad_id], pad_token_id=pad_id
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    # Pin the tokenizer class so AutoTokenizer loads the saved tokenizer.json as is.
    cfg_path = out / "tokenizer_config.json"
    tok_cfg = json.loads(cfg_path.read_text())
    tok_cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_path.write_text(json.dumps(tok_cfg, indent=2))


__all__ = [
    "CHATML_TEMPLATE",
    "SPECIAL_TOKENS",
    "build_tiny_model",
    "build_tokenizer",
    "default_corpus",
    "tiny_model_problem",
]
