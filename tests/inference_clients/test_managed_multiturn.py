"""Token-exact multi-turn episodes through ``managed_server`` (a real fake server over loopback HTTP):
extension by the new turn's tokens only, drift counted by kind and handled as ``on_token_drift``
says, edited histories counted, tool calls that do not parse returned to the env, overlong marked.

The same episode against the real vLLM build is ``tests/real_vllm/test_vllm_multiturn.py``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging

import pytest
from transformers import AutoTokenizer

from atroposlib.errors import TokenDrift
from atroposlib.inference_clients.config import APIServerConfig
from atroposlib.inference_clients.server_manager import ServerManager
from atroposlib.inference_clients.turn_tokens import drift_kind, new_turn_text
from atroposlib.testing import FakeOpenAIServer
from atroposlib.type_definitions import MASK_IGNORE

# a Qwen3-thinking-style template: the generation prompt opens a <think> block and earlier
# assistant turns are rendered without their reasoning, so history never re-renders as generated
THINK_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'assistant' %}<|im_start|>assistant\n"
    "{{ m['content'].split('</think>')[-1] | trim }}<|im_end|>\n"
    "{% elif m['role'] == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m['content'] }}\n"
    "</tool_response><|im_end|>\n"
    "{% else %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
)
REPLIES = ["I add them.</think>5", "Sure.</think>Yes, 5", "Easy.</think>8"]
TURN1 = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+3?"}]
TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]


def _manager(url: str, **kw) -> ServerManager:
    config = APIServerConfig(
        base_url=url, model_name="tiny", server_type="vllm", api_key="x", health_check=False
    )
    return ServerManager([config], **kw)


def _scripted(tok, replies):
    """A fake server answering the scripted replies in order, one per request."""
    it = itertools.cycle(replies)
    return FakeOpenAIServer(tokenizer=tok, responder=lambda prompt, body: next(it))


async def _episode(url, tok, mode=None, edit=False):
    """Three turns (answer, tool result, user follow-up) in one managed session."""
    server = _manager(url)
    opts = {"on_token_drift": mode} if mode else {}
    answers = []
    try:
        async with server.managed_server(tokenizer=tok, **opts) as managed:
            msgs = list(TURN1)
            for follow_up in (
                {"role": "tool", "content": '{"sum": 5}'},
                {"role": "user", "content": "Sure? And 4+4?"},
                None,
            ):
                out = await managed.chat_completion(messages=msgs, max_tokens=64)
                answers.append(out)
                content = out.choices[0].message.content
                msgs.append({"role": "assistant", "content": content.upper() if edit else content})
                if follow_up:
                    msgs.append(follow_up)
            return managed.get_state()["nodes"], answers, server.managed_stats
    finally:
        await server.close()


def _trained(node):
    return [i for i, m in enumerate(node.masked_tokens) if m != MASK_IGNORE]


@pytest.fixture
def think_tok(tok_dir):
    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    tok.chat_template = THINK_TEMPLATE
    return tok


def test_a_well_behaved_template_gives_one_exact_node_and_no_drift(tok_dir):
    tok = AutoTokenizer.from_pretrained(str(tok_dir))  # ChatML: history renders as generated
    with _scripted(tok, ["It is 5", "Yes, 5", "8"]) as fake:
        [node], answers, stats = asyncio.run(_episode(fake.base_url, tok))
    assert stats.drift_total == 0 and stats.metrics()["managed/token_drifts"] == 0
    assert stats.summary() == "1 managed session(s), 0 token drift(s)"  # said, also when 0
    msgs = [*TURN1, {"role": "assistant", "content": "It is 5"}]
    msgs += [{"role": "tool", "content": '{"sum": 5}'}, {"role": "assistant", "content": "Yes, 5"}]
    msgs += [{"role": "user", "content": "Sure? And 4+4?"}]
    rendered = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    full = tok.encode(rendered, add_special_tokens=False)
    assert node.tokens[: len(full)] == full  # exactly what a re-rendering gives
    assert node.metadata["turns"] == 3
    # the server saw, at each turn, the previous turn's tokens followed by the new ones
    for before, after in itertools.pairwise(answers):
        seen = before.prompt_token_ids + before.choices[0].token_ids
        assert after.prompt_token_ids[: len(seen)] == seen
    generated = [t for a in answers for t in a.choices[0].token_ids]
    assert [node.tokens[i] for i in _trained(node)] == generated


def test_a_history_rewriting_template_keeps_exact_tokens_and_counts_the_drift(think_tok, caplog):
    with _scripted(think_tok, REPLIES) as fake, caplog.at_level(logging.WARNING):
        [node], answers, stats = asyncio.run(_episode(fake.base_url, think_tok))
    assert dict(stats.drifts) == {"template": 2}
    assert caplog.text.count("token drift (template)") == 1  # logged once per kind
    last = answers[-1]
    assert node.tokens == last.prompt_token_ids + last.choices[0].token_ids
    # every generated token of every turn is trained, nothing else is
    generated = [t for a in answers for t in a.choices[0].token_ids]
    assert [node.tokens[i] for i in _trained(node)] == generated
    assert len(_trained(node)) == len(generated)
    # the reasoning of turn 1, which the template drops from the history, is still there
    assert "<think>\nI add them.</think>5<|im_end|>" in think_tok.decode(node.tokens)


def test_split_is_the_old_behaviour_and_drop_ends_the_episode(think_tok):
    with _scripted(think_tok, REPLIES) as fake:
        nodes, answers, stats = asyncio.run(_episode(fake.base_url, think_tok, mode="split"))
        assert len(nodes) == 3 and dict(stats.drifts) == {"template": 2}
        # in the last node the earlier turns are a re-rendered prompt: none of them is trained
        last = nodes[-1]
        assert [last.tokens[i] for i in _trained(last)] == answers[-1].choices[0].token_ids
        with pytest.raises(TokenDrift, match="on_token_drift is 'drop'"):
            asyncio.run(_episode(fake.base_url, think_tok, mode="drop"))


def test_dropped_episodes_are_counted(think_tok):
    async def go(url):
        server = _manager(url, on_token_drift="drop")
        try:
            async with server.managed_server(tokenizer=think_tok) as managed:
                out = await managed.chat_completion(messages=TURN1, max_tokens=64)
                msgs = [*TURN1, {"role": "assistant", "content": out.choices[0].message.content}]
                with pytest.raises(TokenDrift):
                    await managed.chat_completion(
                        messages=[*msgs, {"role": "user", "content": "?"}]
                    )
            return server.managed_stats, await server.wandb_metrics()
        finally:
            await server.close()

    with _scripted(think_tok, REPLIES) as fake:
        stats, metrics = asyncio.run(go(fake.base_url))
    assert stats.dropped_episodes == 1 and metrics["managed/dropped_episodes"] == 1
    assert metrics["managed/token_drifts_template"] == 1
    assert "1 episode(s) dropped for drift" in stats.summary()


def test_an_edited_assistant_turn_starts_a_new_node_and_is_counted(tok_dir):
    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    with _scripted(tok, ["It is 5", "Yes, 5", "8"]) as fake:
        nodes, _, stats = asyncio.run(_episode(fake.base_url, tok, edit=True))
    assert len(nodes) == 3 and stats.history_edits == 2 and stats.drift_total == 0


def test_new_turn_text_and_drift_kind(think_tok, tok_dir):
    chatml = AutoTokenizer.from_pretrained(str(tok_dir))

    def render_with(tok):
        return lambda msgs, gen: tok.apply_chat_template(
            msgs, tokenize=False, add_generation_prompt=gen
        )

    new = [{"role": "user", "content": "and?"}]
    history = [*TURN1, {"role": "assistant", "content": "5"}]
    # the model wrote its end-of-turn token: only the newline after it is the template's
    assert (
        new_turn_text(render_with(chatml), new, history, "<|im_end|>")
        == "\n<|im_start|>user\nand?<|im_end|>\n<|im_start|>assistant\n"
    )
    # cut at max_tokens (no end-of-turn token): the template closes the turn
    assert new_turn_text(render_with(think_tok), new, history, "").startswith("<|im_end|>\n")
    assert new_turn_text(render_with(think_tok), new, history, "").endswith("assistant\n<think>\n")
    ids = chatml.encode("ab", add_special_tokens=False)
    split = [t for c in "ab" for t in chatml.encode(c, add_special_tokens=False)]
    assert drift_kind(ids, "ab", ids, chatml.decode) is None
    if split != ids:  # the same text, other ids
        assert drift_kind(split, "ab", ids, chatml.decode) == "retokenization"
    assert drift_kind(ids, "abc", chatml.encode("abc"), chatml.decode) == "template"


def test_tool_calls_that_do_not_parse_come_back_to_the_env(tok_dir, caplog):
    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    good = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
    bad = "<tool_call>{'name': 'add'}</tool_call>"
    replies = [f"{good}\n{bad}", bad, '<tool_call>{"name": "add", "arguments": [2, 3]}']

    async def go(url):
        server = _manager(url, tool_parser="hermes")
        try:
            async with server.managed_server(tokenizer=tok) as managed:
                outs = []
                for _ in replies:
                    out = await managed.chat_completion(messages=TURN1, tools=TOOLS, max_tokens=400)
                    outs.append(out.choices[0])
            return outs, server.managed_stats
        finally:
            await server.close()

    with _scripted(tok, replies) as fake, caplog.at_level(logging.WARNING):
        (both, only_bad, unclosed), stats = asyncio.run(go(fake.base_url))
    # one call parsed, one not: the call is a tool call, the other block an error with its text
    assert both.finish_reason == "tool_calls"
    assert [c.function.name for c in both.message.tool_calls] == ["add"]
    [err] = both.message.tool_call_errors
    assert err["kind"] == "invalid JSON" and err.raw == bad and err.index == 1
    assert err.error.startswith("tool call 1: invalid JSON (")
    # nothing parsed: no tool calls, the whole reply as content, the error listed
    assert only_bad.message.tool_calls is None and only_bad.message.content == bad
    assert only_bad.finish_reason == "stop" and only_bad.message.tool_call_errors[0].raw == bad
    # an unclosed tag is an error too, holding the text from the tag on
    kinds = [e.kind for e in unclosed.message.tool_call_errors]
    assert kinds == ["unclosed tag"]
    assert unclosed.message.tool_call_errors[0].raw.startswith('<tool_call>{"name": "add"')
    assert dict(stats.tool_parse_errors) == {"invalid JSON": 2, "unclosed tag": 1}
    assert caplog.text.count("a tool call did not parse (invalid JSON)") == 1
    assert "3 tool call(s) that did not parse" in stats.summary()


def test_a_tool_schema_the_template_cannot_take_is_one_clear_error(tok_dir):
    tok = AutoTokenizer.from_pretrained(str(tok_dir))

    async def ask(url, tools):
        server = _manager(url, tool_parser="hermes")
        try:
            async with server.managed_server(tokenizer=tok) as managed:
                await managed.chat_completion(messages=TURN1, tools=tools, max_tokens=8)
        finally:
            await server.close()

    with _scripted(tok, ["x"]) as fake:
        with pytest.raises(ValueError, match=r"tools\[1\] is not a function spec"):
            asyncio.run(ask(fake.base_url, [TOOLS[0], {"name": "add"}]))
        with pytest.raises(ValueError, match=r"tools\[0\] \(add\): parameters must be"):
            bad = [{"type": "function", "function": {"name": "add", "parameters": "x"}}]
            asyncio.run(ask(fake.base_url, bad))
        assert fake.requests == []  # nothing was sent


def test_overlong_replies_are_marked_and_text_only_sessions_said_once(tok_dir, monkeypatch, caplog):
    tok = AutoTokenizer.from_pretrained(str(tok_dir))

    async def go(url, server_type):
        config = APIServerConfig(base_url=url, model_name="tiny", server_type=server_type)
        server = ServerManager([config])
        try:
            nodes = []
            for _ in range(2):
                async with server.managed_server(tokenizer=tok) as managed:
                    await managed.chat_completion(messages=TURN1, max_tokens=4, n=2)
                    nodes += managed.get_state()["nodes"]
            return nodes, server.managed_stats
        finally:
            await server.close()

    with _scripted(tok, ["a long answer that does not fit", "ok"]) as fake:
        nodes, _ = asyncio.run(go(fake.base_url, "vllm"))
        assert [n.overlong for n in nodes[:2]] == [True, False]
        assert nodes[0].metadata["finish_reason"] == "length"
        monkeypatch.setenv("ATROPOS_ALLOW_DUMMY_MANAGED_SERVER", "1")
        with caplog.at_level(logging.WARNING):
            nodes, stats = asyncio.run(go(fake.base_url, "openai"))
    assert stats.text_only_sessions == 2
    assert caplog.text.count("cannot take or return token ids") == 1
    assert nodes[0].overlong and json.dumps(stats.metrics())
