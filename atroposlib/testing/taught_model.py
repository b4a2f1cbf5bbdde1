"""A tiny model taught to give chosen replies, so a real server samples known text (tool calls, ...).

``build_taught_model(out_dir, replies)`` builds the tiny Llama of ``atroposlib.inference.tiny_model``
with a chat template that renders ``tools`` the way Hermes/Qwen templates do (``HERMES_TOOLS_TEMPLATE``),
then trains it on each (prompt messages, reply text) pair until greedy decoding of the rendered prompt
gives exactly the reply's tokens and the end-of-turn token. Any server that loads the folder (our CPU
engine, vLLM) then answers those prompts with those replies at temperature 0, token for token.
``teach`` does the training on a folder that already holds a model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional, Union

HERMES_TOOLS_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call functions. Signatures in <tools></tools>:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}"
    '{{- \'\\n</tools>\\nReturn each call as <tool_call>{"name": ..., "arguments": ...}</tool_call>'
    "<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'system' %}"
    "{%- if not tools %}{{- '<|im_start|>system\\n' + message['content'] + '<|im_end|>\\n' }}{%- endif %}"
    "{%- elif message['role'] == 'tool' %}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + message['content'] + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""ChatML with Hermes-style tools: the tool signatures in the system turn, tool results as user turns."""

Reply = tuple[list[int], list[int]]


def _greedy(model: Any, prompt: list[int], n: int) -> list[int]:
    import torch

    with torch.no_grad():
        out = model.generate(
            torch.tensor([prompt]),
            max_new_tokens=n,
            do_sample=False,
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
        )
    return [int(t) for t in out[0, len(prompt) :]]


def teach(model_dir: Union[str, Path], pairs: Sequence[Reply], max_steps: int = 2000) -> int:
    """Train the model in ``model_dir`` until greedy decoding after each prompt (token ids) gives its
    reply (token ids, ending with the end-of-turn token); save it back; return the steps taken.
    Raises ``RuntimeError`` when ``max_steps`` are not enough."""
    import torch
    from transformers import AutoModelForCausalLM

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: more threads only contend (many times slower)
    try:
        return _teach(AutoModelForCausalLM, model_dir, pairs, max_steps)
    finally:
        torch.set_num_threads(threads)


def _teach(
    auto_model: Any, model_dir: Union[str, Path], pairs: Sequence[Reply], max_steps: int
) -> int:
    import torch

    torch.manual_seed(0)
    model = auto_model.from_pretrained(str(model_dir), dtype=torch.float32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    batch = [(torch.tensor([p + r]), torch.tensor([[-100] * len(p) + r])) for p, r in pairs]
    for step in range(1, max_steps + 1):
        model.train()
        optimizer.zero_grad()
        loss = sum(model(input_ids=ids, labels=labels).loss for ids, labels in batch)
        loss.backward()  # type: ignore[union-attr]
        optimizer.step()
        if step % 25 == 0 and float(loss.detach()) < 0.05 * len(batch):  # type: ignore[union-attr]
            model.eval()
            if all(_greedy(model, p, len(r)) == r for p, r in pairs):
                model.save_pretrained(str(model_dir))
                return step
    raise RuntimeError(f"the model did not learn its {len(pairs)} replies in {max_steps} steps")


def build_taught_model(
    out_dir: Union[str, Path],
    replies: Sequence[tuple[list[dict[str, Any]], str]],
    tools: Optional[list[dict[str, Any]]] = None,
    seed: int = 0,
    chat_template: str = HERMES_TOOLS_TEMPLATE,
) -> Path:
    """A tiny model (folder) that answers each ``(messages, reply)`` with ``reply`` at temperature 0,
    the messages rendered with ``chat_template`` (and ``tools``) and a generation prompt; the folder's
    tokenizer keeps that template."""
    from transformers import AutoTokenizer

    from atroposlib.inference.tiny_model import build_tiny_model

    out = Path(build_tiny_model(out_dir, seed=seed, hidden_size=64, num_layers=2, num_heads=2))
    tok = AutoTokenizer.from_pretrained(str(out))
    tok.chat_template = chat_template
    tok.save_pretrained(str(out))
    config_path = out / "tokenizer_config.json"  # keep the class every loader knows, as built
    config = json.loads(config_path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_path.write_text(json.dumps(config, indent=2))
    pairs = []
    for messages, reply in replies:
        prompt = tok.apply_chat_template(
            messages, tools=tools, tokenize=False, add_generation_prompt=True
        )
        pairs.append(
            (
                list(tok.encode(prompt, add_special_tokens=False)),
                list(tok.encode(reply, add_special_tokens=False)) + [tok.eos_token_id],
            )
        )
    teach(out, pairs)
    return out


__all__ = ["HERMES_TOOLS_TEMPLATE", "build_taught_model", "teach"]
