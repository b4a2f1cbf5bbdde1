"""The BFCL worker: a process in bfcl-eval's own environment that loads BFCL's test entries and scores
answers with BFCL's official decoder and AST checker, speaking JSON lines over stdin/stdout.

It imports nothing from atroposlib (it runs with the Python that has ``bfcl_eval``: the light install of
``scripts/setup_bfcl.sh``, or a user's own), only the standard library and ``bfcl_eval``. Before the first
import of the checker it puts a small ``bfcl_eval.constants.model_config`` in ``sys.modules``: the real
one imports every vendor SDK of the leaderboard, and the checker reads one field from it
(``underscore_to_dot``, for function names with a dot). Two names are registered: ``atropos/prompt``
(prompt mode: the model writes the names as documented) and ``atropos/fc`` (function-calling mode: tool
names carry ``_`` for ``.``, as BFCL's own FC handlers send them). ``$BFCL_PROJECT_ROOT`` (where importing
bfcl_eval creates ``result/`` and ``score/``) is a temporary folder unless set.

One request a line, one reply a line, in order; each reply carries the request's ``seq``:

* ``{"op": "hello"}`` -> ``{"version", "categories"}`` (the single-turn categories it scores);
* ``{"op": "load", "categories": [...]}`` -> ``{"entries": {category: [entry, ...]}}``; an entry is
  ``{"id", "category", "messages"`` (BFCL's prompt-mode conversation: its system prompt with the function
  docs, then the question's turns), ``"question"`` (the user text), ``"functions"`` (the docs as the
  model sees them), ``"tools"`` (the same as OpenAI tools, as BFCL's FC handlers compile them),
  ``"ground_truth"`` (null for the relevance categories)}``. The entries stay here, by id, for ``check``;
* ``{"op": "compose", "items": [{"id", "parts": [id, ...], "category"}]}`` -> ``{"entries": [...]}``:
  new items made of loaded single-call entries (their questions asked together, their functions
  offered together, every part's call expected; ``parallel`` or ``parallel_multiple``), kept for
  ``check`` like loaded ones; each entry also lists its ``parts``;
* ``{"op": "add", "items": [{"id", "category", "question", "functions", "ground_truth"}]}`` ->
  ``{"entries": [...]}``: items made outside BFCL (their own function docs, in BFCL's format, and
  BFCL-style ground truth), given BFCL's prompt and language hint as its own entries are, and kept for
  ``check``; the category's words pick the checker's rules as for BFCL's (``parallel``, ``multiple``,
  else simple). The same item again is taken as it is; another one under a loaded id is refused;
* ``{"op": "check", "items": [...]}`` -> ``{"results": [...]}``; an item is ``{"id", "mode": "prompt" |
  "fc", "text"`` (prompt mode: the model's reply) or ``"calls"`` (fc: ``[{"name", "arguments"}]``)``}``
  for a loaded, composed or added id. A result is ``{"id", "valid", "error_type",
  "errors", "decoded"}``, exactly what BFCL's evaluator decides for the entry; for a composed item also
  ``"parts"`` (how many) and ``"parts_accepted"``: how many of its parts the same checker accepts one of
  the answer's calls for, as an answer to that part's own entry (each call used for one part at most).

A request it cannot serve gets ``{"ok": false, "error": "one line"}`` and the worker goes on.
``--self-check`` loads one category, scores a gold answer and exits 0 (the install's verification).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import tempfile
import types
from typing import Any

PROMPT_MODEL = "atropos/prompt"
FC_MODEL = "atropos/fc"


def _stub_model_config() -> None:
    """The one module of bfcl_eval the checker needs but whose real version imports every vendor SDK."""
    name = "bfcl_eval.constants.model_config"
    if name in sys.modules:
        return
    stub = types.ModuleType(name)
    stub.MODEL_CONFIG_MAPPING = {  # type: ignore[attr-defined]
        PROMPT_MODEL: types.SimpleNamespace(underscore_to_dot=False, is_fc_model=False),
        FC_MODEL: types.SimpleNamespace(underscore_to_dot=True, is_fc_model=True),
    }
    sys.modules[name] = stub


class Bfcl:
    """bfcl_eval's loader, prompt builder, decoder and checker, imported once."""

    def __init__(self) -> None:
        os.environ.setdefault("BFCL_PROJECT_ROOT", tempfile.mkdtemp(prefix="bfcl-root-"))
        _stub_model_config()
        self.utils = importlib.import_module("bfcl_eval.utils")
        self.handler_utils = importlib.import_module("bfcl_eval.model_handler.utils")
        self.checker = importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")
        self.enums = importlib.import_module("bfcl_eval.constants.enums")
        self.categories = importlib.import_module("bfcl_eval.constants.category_mapping")
        self.types = importlib.import_module("bfcl_eval.constants.type_mappings")
        self.entries: dict[str, dict[str, Any]] = {}

    def single_turn(self) -> list[str]:
        return list(self.categories.SINGLE_TURN_CATEGORY)

    def version(self) -> str:
        from importlib import metadata

        try:
            return metadata.version("bfcl-eval")
        except metadata.PackageNotFoundError:
            return "unknown"

    def load(self, category: str) -> list[dict[str, Any]]:
        if category not in self.single_turn():
            raise ValueError(
                f"unknown category {category!r}; valid: {', '.join(self.single_turn())}"
            )
        # the official evaluator's entries (no hints) are what the checker compares with; the
        # generator's (hinted function docs) are what the model is shown
        plain = self.utils.load_dataset_entry(
            category, include_prereq=False, include_language_specific_hint=False
        )
        shown = self.utils.load_dataset_entry(category, include_prereq=False)
        truth: dict[str, Any] = {}
        if not self.utils.is_relevance_or_irrelevance(category):
            truth = {
                e["id"]: e["ground_truth"] for e in self.utils.load_ground_truth_entry(category)
            }
        out = []
        for check_entry, shown_entry in zip(plain, shown, strict=True):
            entry = self._entry(category, check_entry, shown_entry, truth.get(check_entry["id"]))
            self.entries[entry["id"]] = {
                "category": category,
                "functions": check_entry["function"],
                "shown": shown_entry["function"],
                "question": entry["question"],
                "ground_truth": entry["ground_truth"],
            }
            out.append(entry)
        return out

    def compose(self, new_id: str, parts: list[str], category: str) -> dict[str, Any]:
        """A new item made of loaded single-call entries: their questions asked together, their
        functions offered together (each name once), every part's call expected; scored as
        ``category`` (``parallel`` or ``parallel_multiple``: calls in any order)."""
        if category not in ("parallel", "parallel_multiple"):
            raise ValueError(f"a composed item is parallel or parallel_multiple, not {category!r}")
        missing = [p for p in parts if p not in self.entries]
        if missing or len(parts) < 2:
            raise ValueError(f"compose needs two or more loaded entries; not loaded: {missing}")
        refs = [self.entries[p] for p in parts]
        truth: list[Any] = []
        for ref in refs:
            if ref["ground_truth"] is None:
                raise ValueError("a relevance entry has no call to compose")
            truth += ref["ground_truth"]
        check_functions = _unique_by_name(f for ref in refs for f in ref["functions"])
        shown = _unique_by_name(f for ref in refs for f in ref["shown"])
        question = " ".join(str(ref["question"]).strip() for ref in refs)
        turns = [{"role": "user", "content": question}]
        entry = self._entry(
            category,
            {"id": new_id, "function": check_functions},
            {"id": new_id, "question": [turns], "function": shown},
            truth,
        )
        self.entries[new_id] = {
            "category": category,
            "functions": check_functions,
            "shown": shown,
            "question": question,
            "ground_truth": truth,
            "parts": list(parts),
        }
        return {**entry, "parts": parts}

    def add(self, item: dict[str, Any]) -> dict[str, Any]:
        """An item made outside BFCL (see the module docstring), kept for ``check``."""
        new_id, category = str(item["id"]), str(item["category"])
        if "relevance" in category or not item.get("ground_truth"):
            raise ValueError("an added item needs a category of calls and a ground truth")
        functions = [dict(f) for f in item["functions"]]
        shown = self.utils._func_doc_language_specific_pre_processing(
            json.loads(json.dumps(functions)), category
        )
        turns = [{"role": "user", "content": str(item["question"])}]
        entry = self._entry(
            category,
            {"id": new_id, "function": functions},
            {"id": new_id, "question": [turns], "function": shown},
            list(item["ground_truth"]),
        )
        known = self.entries.get(new_id)
        if known is not None and (known["category"], known["question"], known["functions"]) != (
            category,
            entry["question"],
            functions,
        ):
            raise ValueError(f"entry {new_id!r} is already loaded with other content")
        self.entries[new_id] = {
            "category": category,
            "functions": functions,
            "shown": shown,
            "question": entry["question"],
            "ground_truth": entry["ground_truth"],
        }
        return entry

    def _entry(
        self, category: str, check_entry: dict, shown_entry: dict, truth: Any
    ) -> dict[str, Any]:
        turns = [dict(m) for m in shown_entry["question"][0]]
        messages = self.handler_utils.system_prompt_pre_processing_chat_model(
            [dict(m) for m in turns], shown_entry["function"], shown_entry["id"]
        )
        tools = self.handler_utils.convert_to_tool(
            shown_entry["function"],
            self.types.GORILLA_TO_OPENAPI,
            self.enums.ModelStyle.OPENAI_COMPLETIONS,
        )
        question = "\n".join(str(m["content"]) for m in turns if m["role"] == "user")
        return {
            "id": check_entry["id"],
            "category": category,
            "messages": messages,
            "question": question,
            "functions": shown_entry["function"],
            "tools": tools,
            "ground_truth": truth,
        }

    def language(self, category: str) -> tuple[Any, Any]:
        enums = self.enums
        if self.utils.is_java(category):
            return enums.Language.JAVA, enums.ReturnFormat.JAVA
        if self.utils.is_js(category):
            return enums.Language.JAVASCRIPT, enums.ReturnFormat.JAVASCRIPT
        return enums.Language.PYTHON, enums.ReturnFormat.PYTHON

    def decode(self, item: dict[str, Any], return_format: Any) -> Any:
        """What BFCL's handler makes of the answer: prompt mode through its Python-call decoder, FC
        mode as ``[{name: arguments}]`` (arguments given as JSON text are parsed, as its FC handlers do;
        a reply without calls does not decode, as there)."""
        if item.get("mode", "prompt") == "fc":
            if not item.get("calls"):
                # BFCL's FC handlers decode a reply without tool calls as a failure (no call made)
                raise ValueError("the reply holds no tool call")
            decoded = []
            for call in item.get("calls") or []:
                arguments = call.get("arguments")
                if isinstance(arguments, str):
                    arguments = json.loads(arguments)
                decoded.append({call.get("name"): arguments})
            return decoded
        return self.handler_utils.default_decode_ast_prompting(
            item.get("text") or "", return_format, False
        )

    def check(self, item: dict[str, Any]) -> dict[str, Any]:
        ref = self.entries.get(str(item.get("id")))
        if ref is None:
            raise ValueError(f"entry {item.get('id')!r} is not loaded (load its category first)")
        category = str(ref["category"])
        model = FC_MODEL if item.get("mode", "prompt") == "fc" else PROMPT_MODEL
        if self.utils.is_relevance_or_irrelevance(category):
            return self._relevance(item, category)
        language, return_format = self.language(category)
        result: dict[str, Any] = {"id": item.get("id"), "decoded": None}
        parts = ref.get("parts")
        if parts:
            result.update(parts=len(parts), parts_accepted=0)
        try:
            decoded = self.decode(item, return_format)
        except Exception as exc:  # noqa: BLE001  the evaluator's own rule: any failure is this verdict
            return {
                **result,
                "valid": False,
                "error_type": "ast_decoder:decoder_failed",
                "errors": [f"Invalid syntax. Failed to decode AST. {exc}"],
            }
        result["decoded"] = _jsonable(decoded)
        if not self.utils.is_function_calling_format_output(decoded):
            return {
                **result,
                "valid": False,
                "error_type": "ast_decoder:decoder_wrong_output_format",
                "errors": ["Did not output in the specified format."],
            }
        verdict = self.checker.ast_checker(
            ref["functions"], decoded, ref["ground_truth"], language, category, model
        )
        valid = bool(verdict["valid"])
        result = {  # the checker leaves its initial "...:unclear" error type on a valid verdict
            **result,
            "valid": valid,
            "error_type": None if valid else verdict.get("error_type"),
            "errors": [] if valid else [str(e) for e in verdict.get("error", [])],
        }
        if parts:
            unread: list[str] = []
            accepted = len(parts) if valid else self._parts_accepted(parts, decoded, model, unread)
            result["parts_accepted"] = accepted
            result["errors"] += unread  # a part the checker could not read is kept as an error
        return result

    def _parts_accepted(
        self, parts: list[str], decoded: list[Any], model: str, unread: list[str]
    ) -> int:
        """How many ``parts`` (loaded single-call entries) get a call of ``decoded`` that the checker
        accepts as the answer to that part alone; a call counts for one part at most (the largest such
        matching: a composed item has two or three parts)."""
        fits: list[set[int]] = []
        for part in parts:
            ref = self.entries[part]
            language, _ = self.language(str(ref["category"]))
            fits.append(
                {
                    i
                    for i, call in enumerate(decoded)
                    if self._accepts(ref, call, language, model, unread)
                }
            )
        return _largest_matching(fits)

    def _accepts(
        self, ref: dict[str, Any], call: Any, language: Any, model: str, unread: list[str]
    ) -> bool:
        """The checker's verdict on ``[call]`` as the answer to the loaded entry ``ref``; a call it
        cannot read is not accepted, and why goes to ``unread``."""
        try:
            verdict = self.checker.ast_checker(
                ref["functions"], [call], ref["ground_truth"], language, ref["category"], model
            )
        except Exception as exc:  # noqa: BLE001  kept in the verdict's errors, not dropped
            unread.append(f"part check failed on {call!r:.80}: {type(exc).__name__}: {exc}")
            return False
        return bool(verdict["valid"])

    def _relevance(self, item: dict[str, Any], category: str) -> dict[str, Any]:
        """BFCL's relevance rule: a call is expected (relevance) or must be absent (irrelevance)."""
        called = False
        decoded = None
        error = ""
        try:
            decoded = self.decode(item, self.enums.ReturnFormat.PYTHON)
            called = not self.utils.is_empty_output(decoded)
        except Exception as exc:  # noqa: BLE001  a reply that does not decode holds no call
            error = str(exc)
        wanted = "irrelevance" not in category
        valid = called == wanted
        error_type = None
        errors: list[str] = []
        if not valid and not wanted:
            error_type = "irrelevance_error:decoder_success"
            errors = ["Valid syntax. Successfully decode AST when it should not."]
        elif not valid:
            error_type = "relevance_error:decoder_failed"
            errors = [f"Invalid syntax. Failed to decode AST when it should have. {error}"]
        return {
            "id": item.get("id"),
            "valid": valid,
            "error_type": error_type,
            "errors": errors,
            "decoded": _jsonable(decoded),
        }


def _largest_matching(fits: list[set[int]]) -> int:
    """The most parts that can each have a call of their own, where part ``k`` accepts the calls
    ``fits[k]`` (augmenting paths; a few parts, a few calls)."""
    owner: dict[int, int] = {}

    def place(part: int, tried: set[int]) -> bool:
        for call in fits[part]:
            if call in tried:
                continue
            tried.add(call)
            if call not in owner or place(owner[call], tried):
                owner[call] = part
                return True
        return False

    return sum(place(k, set()) for k in range(len(fits)))


def _unique_by_name(functions: Any) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for f in functions:
        seen.setdefault(f["name"], f)
    return list(seen.values())


def _jsonable(value: Any) -> Any:
    """``value`` as JSON can carry it (a decoded call may hold tuples or other Python values)."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return repr(value)


def serve(bfcl: Bfcl, stdin: Any, stdout: Any) -> None:
    """Answer requests until stdin closes."""
    for line in stdin:
        if not line.strip():
            continue
        seq = None
        try:
            request = json.loads(line)
            seq = request.get("seq")
            reply = {"seq": seq, "ok": True, **handle(bfcl, request)}
        except Exception as exc:  # noqa: BLE001  one bad request never ends the worker
            reply = {"seq": seq, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()


def handle(bfcl: Bfcl, request: dict[str, Any]) -> dict[str, Any]:
    op = request.get("op")
    if op == "hello":
        return {"version": bfcl.version(), "categories": bfcl.single_turn()}
    if op == "load":
        return {"entries": {c: bfcl.load(c) for c in request.get("categories") or []}}
    if op == "check":
        return {"results": [bfcl.check(item) for item in request.get("items") or []]}
    if op == "add":
        return {"entries": [bfcl.add(dict(i)) for i in request.get("items") or []]}
    if op == "compose":
        return {
            "entries": [
                bfcl.compose(str(i["id"]), list(i["parts"]), str(i["category"]))
                for i in request.get("items") or []
            ]
        }
    raise ValueError(f"unknown op {op!r} (hello, load, compose, add, check)")


def self_check(bfcl: Bfcl) -> int:
    entry = bfcl.load("simple_python")[0]
    (gold,) = entry["ground_truth"]
    ((name, params),) = gold.items()
    args = ", ".join(f"{k}={v[0]!r}" for k, v in params.items() if v and v[0] != "")
    verdict = bfcl.check({"id": entry["id"], "text": f"[{name}({args})]"})
    print(json.dumps({"version": bfcl.version(), "gold_valid": verdict["valid"]}))
    return 0 if verdict["valid"] else 1


def main(argv: list[str]) -> int:
    if "--self-check" in argv:
        return self_check(Bfcl())
    # the protocol owns stdout: anything bfcl_eval prints goes to stderr
    protocol_out = sys.stdout
    sys.stdout = sys.stderr
    serve(Bfcl(), sys.stdin, protocol_out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
