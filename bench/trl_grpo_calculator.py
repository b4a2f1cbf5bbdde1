"""TRL's side of ``bench/trl_comparison.py --tasks calculator``: GRPOTrainer's own multi-turn tool loop
(``tools=``) on the calculator task, run by TRL's own Python (``scripts/setup_trl_bench.sh``).

    python trl_grpo_calculator.py --model DIR --task TASK.json --out DIR --steps 20 ...

``TASK.json`` is written by ``trl_comparison.py`` from atroposlib's task (``envkit.calculator_task``): the
system prompt our env sends (SmolLM2's chat template ignores ``tools=``, so the prompt lists the tool),
the training questions in the env's draw order, the turn limit and the token budget. ``--model`` is the
warm-up's merged model our row starts from. What is the same and what is not:

* **The tool.** ``calculator`` runs atroposlib's own function and response text
  (``atroposlib/envkit/offline_tools.py``, loaded by its path: nothing else of atroposlib is imported
  here), so a call gets the same ``<tool_response>{"result": ...}</tool_response>`` as in our env, and a
  failing call the same ``{"error": ...}`` text (caught here: TRL would send ``str(dict)`` unwrapped).
  A call of an unknown tool gets TRL's own error text (ours names the tools offered).
* **The conversation's tokens.** TRL renders the prompt with the model's template, parses replies with a
  response template (SmolLM2's chat format is ChatML with Hermes ``<tool_call>`` JSON, which is Qwen3's
  ``qwen3_template`` in TRL), keeps the generated ids as generated and appends each tool turn's template
  tokens: the same sequence our managed server builds.
* **The turn limit.** Ours: ``max_turns`` assistant turns; one that still calls a tool on the last turn
  scores 0. TRL: ``max_tool_calling_iterations = max_turns - 1`` rounds of tools, so the same number of
  assistant turns; the reward below scores a last turn that still calls a tool 0.
* **The reply budget.** Ours: ``max_tokens_per_turn`` per turn, and no turn that could pass
  ``max_token_length`` in all. TRL has one budget for the whole completion (turns and tool responses):
  ``max_completion_length`` = ``max_token_length`` minus the longest prompt; one turn may use more than
  ours allows.
* **The reward** (``episode_reward``): our ``Episode`` rules on TRL's message list: the final reply (no
  call) scores 1 when its last integer is ``a * b``; a reply with a ``<tool_call>`` that did not parse (TRL
  then keeps it as text) is a malformed call, 0; still calling on the last turn, 0. Where one reply holds a
  valid and a malformed call, ours goes on with the valid one and TRL's parser drops the whole reply to
  text (0).

Writes ``OUT/result.json`` (per-step reward, tool-call frequency and end time, the trainer's start, peak
RSS) and the adapter in ``OUT/adapter``; the held-out episodes are played afterwards in atroposlib's
environment by the same code as our row's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any, Optional

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import trl_grpo_chat as chat  # noqa: E402  (the settings both TRL rows share)

TOOLS_FILE = BENCH.parent / "atroposlib" / "envkit" / "offline_tools.py"
TOOL_CALL_OPEN = "<tool_call>"
# SmolLM2-135M-Instruct's own chat template, plus an assistant turn's ``tool_calls`` rendered as the Hermes
# text the model writes. GRPOTrainer refuses a template that drops tool calls; it never re-renders a
# generated turn (it keeps the generated ids) and renders a tool turn only to take its suffix, so the
# tokens of a conversation are the model template's (checked in ``smollm2_template_with_calls``)
SMOLLM2_WITH_CALLS = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + (message['content'] or '') }}"
    "{% for call in message.get('tool_calls') or [] %}"
    "{{ '<tool_call>' + (call['function'] | tojson) + '</tool_call>' }}{% endfor %}"
    "{{ '<|im_end|>' + '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * /.

    Args:
        expression: The arithmetic expression, for example "12 * 34".
    """
    tools = sys.modules.get("offline_tools") or chat.load_file("offline_tools", TOOLS_FILE)
    text, _kind = tools.call_response(tools.calculator, {"expression": expression})
    return tools.wrapped_response(text)


def episode_outcome(completion: list[dict[str, Any]], answer: int) -> str:
    """What our ``Episode`` would call this TRL completion (its messages after the prompt): one of
    ``correct``, ``wrong answer``, ``malformed tool call``, ``past max_turns``, ``empty``."""
    task = sys.modules.get("chat_arithmetic_task") or chat.load_task()
    replies = [m for m in completion if m.get("role") == "assistant"]
    if not replies:
        return "empty"
    last = replies[-1]
    if last.get("tool_calls"):
        return "past max_turns"
    text = str(last.get("content") or "")
    if TOOL_CALL_OPEN in text:
        return "malformed tool call"
    return "correct" if task.last_integer(text) == answer else "wrong answer"


OUTCOME_COUNTS: dict[str, int] = {}


def episode_reward(completions: list[Any], a: list[int], b: list[int], **_: Any) -> list[float]:
    """1.0 for an episode our env would score right (``episode_outcome``), else 0.0."""
    out = []
    for completion, x, y in zip(completions, a, b, strict=True):
        messages = (
            completion
            if isinstance(completion, list)
            else [{"role": "assistant", "content": str(completion)}]
        )
        outcome = episode_outcome(messages, x * y)
        OUTCOME_COUNTS[outcome] = OUTCOME_COUNTS.get(outcome, 0) + 1
        out.append(1.0 if outcome == "correct" else 0.0)
    return out


def smollm2_template_with_calls(tokenizer: Any, system: str) -> Optional[str]:
    """Give ``tokenizer`` ``SMOLLM2_WITH_CALLS``; None when it renders a conversation without calls
    (system, user, assistant, tool) to the same text as the model's own template, else why not."""
    probe = [
        {"role": "system", "content": system},
        {"role": "user", "content": "What is 12 * 34?"},
        {"role": "assistant", "content": "It is 408."},
        {"role": "tool", "content": "<tool_response>{}</tool_response>"},
    ]
    own = tokenizer.apply_chat_template(probe, tokenize=False, add_generation_prompt=True)
    tokenizer.chat_template = SMOLLM2_WITH_CALLS
    mine = tokenizer.apply_chat_template(probe, tokenize=False, add_generation_prompt=True)
    if mine != own:
        return f"the model's chat template is not SmolLM2's: it renders {own[:80]!r}"
    return None


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--task", type=Path, required=True, help="TASK.json (see the docstring)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prompts-per-step", type=int, default=4)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument(
        "--save-every",
        type=int,
        default=0,
        help="save the adapter every N steps to OUT/adapters/step_NNNNNNN (0: only at the end); "
        "the saving is left out of the step times",
    )
    args = p.parse_args(argv)
    if args.save_every < 0 or args.steps < 1:
        p.error("--save-every must be >= 0 and --steps >= 1")
    return args


def needs_tools_support() -> Optional[str]:
    """None when this TRL's GRPOTrainer takes ``tools=`` (multi-turn tool calls), else one line."""
    import inspect

    import trl
    from trl import GRPOConfig, GRPOTrainer

    has = "tools" in inspect.signature(GRPOTrainer.__init__).parameters
    has = has and "max_tool_calling_iterations" in GRPOConfig.__dataclass_fields__
    if has:
        return None
    return (
        f"TRL {trl.__version__} has no multi-turn tool support in GRPOTrainer (tools= and "
        "max_tool_calling_iterations): it needs TRL 1.0 or newer (this bench pins 1.16.0)"
    )


def main() -> int:
    args = parse_args()
    missing = needs_tools_support()
    if missing:
        print(f"trl_grpo_calculator: {missing}", file=sys.stderr)
        return 3
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_template

    torch.set_num_threads(args.threads)
    task = json.loads(args.task.read_text())
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    # SmolLM2's template is ChatML and its calls are Hermes JSON in <tool_call> tags: Qwen3's response
    # template parses exactly that (TRL knows no template of SmolLM2's own)
    tokenizer.response_template = qwen3_template
    problem = smollm2_template_with_calls(tokenizer, task["system"])
    if problem:
        print(f"trl_grpo_calculator: {problem}", file=sys.stderr)
        return 4
    prompts = [
        [{"role": "system", "content": task["system"]}, {"role": "user", "content": q}]
        for q in task["questions"]
    ]
    first = tokenizer.apply_chat_template(
        prompts[0], tokenize=True, add_generation_prompt=True, return_dict=False
    )
    if list(first) != task["first_prompt_ids"]:
        print(
            "trl_grpo_calculator: the first prompt's tokens differ from our env's", file=sys.stderr
        )
        return 4
    longest = max(
        len(
            tokenizer.apply_chat_template(
                p, tokenize=True, add_generation_prompt=True, return_dict=False
            )
        )
        for p in prompts
    )
    dataset = Dataset.from_dict({"prompt": prompts, "a": task["a"], "b": task["b"]})
    common = chat.common_settings(
        argparse.Namespace(**vars(args), max_tokens=task["max_token_length"] - longest)
    )
    config = GRPOConfig(
        **common,
        **chat.SYNC_SETTINGS,
        per_device_train_batch_size=args.prompts_per_step * args.group_size,
        max_tool_calling_iterations=task["max_turns"] - 1,
    )
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    rows: list[dict[str, Any]] = []
    marks: dict[str, float] = {}
    lora = LoraConfig(
        r=args.lora_rank,
        lora_alpha=2 * args.lora_rank,
        lora_dropout=0.0,
        target_modules=chat.LORA_MODULES,
        task_type="CAUSAL_LM",
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=episode_reward,
        args=config,
        train_dataset=dataset,
        peft_config=lora,
        tools=[calculator],
        callbacks=[
            chat.step_clock(
                rows,
                marks,
                reward_key="rewards/episode_reward/mean",
                extra_keys=("tools/call_frequency", "tools/failure_frequency"),
                save_every=args.save_every,
                save_root=args.out / "adapters",
            )
        ],
    )
    trainer.train()
    args.out.mkdir(parents=True, exist_ok=True)
    trainer.model.save_pretrained(str(args.out / "adapter"))
    result = {
        "trainer": "sync",
        "train_begin": marks.get("train_begin"),
        "rows": rows,
        "outcomes": OUTCOME_COUNTS,
        "max_completion_length": task["max_token_length"] - longest,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "trl_version": __import__("trl").__version__,
        "threads": args.threads,
        "save_s": marks.get("save_s", 0.0),
        "pid": os.getpid(),
        "end": time.time(),
    }
    (args.out / "result.json").write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
