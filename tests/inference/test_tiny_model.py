"""The tiny model builder: reloadable by Auto* classes with identical ids, deterministic, sensible tokens."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from atroposlib.cli.make_tiny_model import main as make_tiny_main
from atroposlib.errors import ConfigError
from atroposlib.inference.tiny_model import (
    IM_END,
    IM_START,
    build_tiny_model,
    build_tokenizer,
    default_corpus,
)

SAMPLES = [
    "What is 123 + 45? The answer is 168.",
    "Spell 'apple' backward: elppa. <answer>42</answer> \\boxed{7}",
    "héllo wörld 🙂 tabs\tand\nnewlines",
]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_auto_classes_reload_with_identical_ids(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    built = build_tokenizer(default_corpus(0), vocab_size=512)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    for s in SAMPLES:
        ids = tok(s)["input_ids"]
        assert ids == built(s)["input_ids"]
        assert tok.decode(ids) == s
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert isinstance(model, LlamaForCausalLM)
    n_params = sum(p.numel() for p in model.parameters())
    assert 0.5e6 < n_params < 1.5e6
    assert model.config.vocab_size == len(tok)


def test_digits_are_single_tokens_and_specials_exist(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    pieces = [tok.decode([i]) for i in tok("9876543210")["input_ids"]]
    assert pieces == list("9876543210")
    assert tok.eos_token == IM_END
    assert tok.convert_tokens_to_ids(IM_START) != tok.unk_token_id
    assert len(tok("<|im_start|>user")["input_ids"]) == 2  # special token + "user"


def test_chat_template_renders_chatml(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert (
        text
        == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"
    )
    no_gen = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=False)
    assert not no_gen.endswith("assistant\n")


def test_build_is_deterministic_and_seed_changes_weights(tmp_path):
    a = build_tiny_model(
        tmp_path / "a", seed=3, hidden_size=32, num_layers=1, num_heads=2, vocab_size=300
    )
    b = build_tiny_model(
        tmp_path / "b", seed=3, hidden_size=32, num_layers=1, num_heads=2, vocab_size=300
    )
    c = build_tiny_model(
        tmp_path / "c", seed=4, hidden_size=32, num_layers=1, num_heads=2, vocab_size=300
    )
    assert _digest(a / "tokenizer.json") == _digest(b / "tokenizer.json")
    assert _digest(a / "model.safetensors") == _digest(b / "model.safetensors")
    assert _digest(a / "model.safetensors") != _digest(c / "model.safetensors")


def test_custom_corpus_and_bad_arguments(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("zebra zebra zebra quokka quokka\n" * 50)
    out = build_tiny_model(
        tmp_path / "m", corpus=corpus, hidden_size=32, num_layers=1, num_heads=2, vocab_size=300
    )
    from transformers import AutoTokenizer

    assert len(AutoTokenizer.from_pretrained(out)(" zebra")["input_ids"]) == 1
    with pytest.raises(ConfigError, match="divisible"):
        build_tiny_model(tmp_path / "x", hidden_size=30, num_heads=4)
    with pytest.raises(ConfigError, match="corpus file not found"):
        build_tiny_model(tmp_path / "y", corpus=tmp_path / "missing.txt")


def test_cli_builds_and_reports_bad_corpus(tmp_path, capsys):
    assert (
        make_tiny_main(
            [str(tmp_path / "cli"), "--hidden-size", "32", "--layers", "1", "--heads", "2"]
        )
        == 0
    )
    assert (tmp_path / "cli" / "config.json").is_file()
    assert make_tiny_main([str(tmp_path / "bad"), "--corpus", str(tmp_path / "nope.txt")]) == 2
    err = capsys.readouterr().err
    assert "corpus file not found" in err and "Traceback" not in err


def test_cli_out_dir_that_is_a_file_is_a_one_line_error(tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    assert make_tiny_main([str(taken), "--hidden-size", "32", "--layers", "1", "--heads", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("atropos-make-tiny-model: error:") and str(taken) in err
    assert err.strip().count("\n") == 0 and taken.read_text() == "not a folder"


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--hidden-size", "-8"], "argument --hidden-size: must be at least 1, got -8"),
        (["--heads", "0"], "argument --heads: must be at least 1, got 0"),
        (["--max-positions", "-1"], "argument --max-positions: must be at least 1, got -1"),
        (["--layers", "0"], "argument --layers: must be at least 1, got 0"),
        (["--hidden-size", "abc"], "argument --hidden-size: must be an integer, got 'abc'"),
        (["--hidden-size", "30"], "--hidden-size (30) must be divisible by --heads (4)"),
        (["--hidden-size", "12"], "(the head size, 3) must be even"),
        (["--vocab-size", "100"], "--vocab-size must be at least 260"),
        (["--hidden-size", "65536"], "this tool builds tiny models"),
        (["--seed", "-1"], "argument --seed: must be 0 or more"),
    ],
)
def test_cli_bad_sizes_are_one_line_and_create_nothing(tmp_path, flags, message):
    from tests.cli_checks import one_line_error, run_module

    out = tmp_path / "new" / "model"
    proc = run_module("atroposlib.cli.make_tiny_model", str(out), *flags)
    line = one_line_error(proc, 2, message)
    assert line.startswith("atropos-make-tiny-model: error:")
    assert not (tmp_path / "new").exists()


def test_a_build_that_fails_removes_the_folders_it_made(tmp_path, monkeypatch):
    import atroposlib.inference.tiny_model as tiny

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tiny, "_build_into", broken)
    with pytest.raises(OSError):
        build_tiny_model(tmp_path / "a" / "b" / "m", hidden_size=32, num_layers=1, num_heads=2)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "kept").mkdir()  # a folder that was there before is left in place
    with pytest.raises(OSError):
        build_tiny_model(tmp_path / "kept", hidden_size=32, num_layers=1, num_heads=2)
    assert (tmp_path / "kept").is_dir()
