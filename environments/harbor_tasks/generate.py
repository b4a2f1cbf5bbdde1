"""Writes the shipped Harbor tasks (``warmup/``, ``train/`` and ``heldout/`` next to this file) from one seed.

    python environments/harbor_tasks/generate.py [--out DIR]

Five families of file and text chores a shell one-liner solves, 16 tasks each, in three splits: 4
for a supervised warm-up (``warmup/``), 8 that RL trains on (``train/``) and 4 held out
(``heldout/``), each task with its own files, words and numbers (the key words of a family's tasks
never repeat):

* ``count``: count the lines of a file (``wc -l``);
* ``find``: name the one file of a folder that contains a word (``grep -l``);
* ``rename``: rename a file (``mv``);
* ``extract``: write one field of a CSV row (``grep`` + ``cut``);
* ``fix``: fix a misspelt word in a one-line script (``sed -i``).

Every task is a Harbor task folder: ``task.toml``, ``instruction.md``, ``environment/Dockerfile``
(``FROM debian:bookworm-slim``, the files under ``environment/app/`` copied to ``/app``),
``tests/test.sh`` (writes 1 or 0 to ``/logs/verifier/reward.txt``; the expected answer lives only
there, which the agent never sees) and ``solution/solve.sh`` (the reference one-liner). The
answer the task checks is not in anything the agent is shown: it must run a command to find it.
``[metadata.warmup].recall_command`` is the other way to finish a task: writing down its answer,
known to whoever wrote the task (what the demo's warm-up mixes in; a model cannot know it for a task
it has not seen, so on ``train/`` and ``heldout/`` only computing pays). The
tracked folders are this script's output (``tests/interop/harbor/test_tasks.py`` regenerates and
compares them).
"""

from __future__ import annotations

import argparse
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 43
SPLITS = (("warmup", 4), ("train", 8), ("heldout", 4))
"""Each family's tasks, in this order: (split, how many)."""
WORDS = (
    "apple anchor badge basket beacon bottle bridge button candle canyon carpet castle cedar "
    "chalk cherry circle cloud comet copper cotton crayon dragon engine falcon feather fiddle "
    "forest fossil garden ginger glacier granite harbor helmet hollow island jacket jungle kettle "
    "ladder lantern lemon magnet maple marble meadow mirror monkey needle nickel orange orchid "
    "oyster paddle parrot pencil pepper pillow planet pocket puzzle rabbit ribbon river rocket "
    "saddle salmon silver spider spring statue summer tablet teapot thunder timber tomato tunnel "
    "turtle velvet violet walnut window winter wizard yellow zipper"
).split()
NAMES = (
    "alice bruno carla dmitri elena felix greta hassan irene jonas kira lukas mila nadia oscar "
    "paula quinn rosa samir tina umar vera walter xenia yusuf zoe"
).split()
COLUMNS = ("city", "color", "fruit", "metal", "animal", "tool")


@dataclass(frozen=True)
class Task:
    """One generated task: its family, instruction, files, reference and recall commands, and the
    shell test that decides it."""

    family: str
    instruction: str
    files: dict[str, str]
    solution: str
    recall: str
    check: str


def _pick(rng: random.Random, pool: list[str], used: set[str]) -> str:
    word = rng.choice([w for w in pool if w not in used])
    used.add(word)
    return word


def _lines(rng: random.Random, n: int, avoid: str = "") -> str:
    return "".join(
        " ".join(rng.choice([w for w in WORDS if w != avoid]) for _ in range(3)) + "\n"
        for _ in range(n)
    )


def _count(rng: random.Random, used: set[str]) -> Task:
    name, n = _pick(rng, WORDS, used), rng.randint(12, 40)
    path = f"/app/{name}.txt"
    return Task(
        "count",
        f"Count the lines of {path} and write the number to /app/answer.txt.",
        {f"{name}.txt": _lines(rng, n)},
        f"wc -l < {path} > /app/answer.txt",
        f"echo {n} > /app/answer.txt",
        f'[ "$(tr -d "[:space:]" < /app/answer.txt 2>/dev/null)" = "{n}" ]',
    )


def _find(rng: random.Random, used: set[str]) -> Task:
    folder, word = _pick(rng, WORDS, used), _pick(rng, WORDS, used)
    files = rng.sample([w for w in WORDS if w not in used], 6)  # may repeat across tasks
    target = rng.choice(files)
    content = {f"{folder}/{f}.txt": _lines(rng, 4, avoid=word) for f in files}
    lines = content[f"{folder}/{target}.txt"].split("\n")
    lines[1] = f"{lines[1]} {word}"
    content[f"{folder}/{target}.txt"] = "\n".join(lines)
    return Task(
        "find",
        f"One file in /app/{folder} contains the word {word}. "
        "Write the name of that file to /app/answer.txt.",
        content,
        f"cd /app/{folder} && grep -l {word} * > /app/answer.txt",
        f"echo {target}.txt > /app/answer.txt",
        f'[ "$(basename "$(tr -d "[:space:]" < /app/answer.txt 2>/dev/null)")" = "{target}.txt" ]',
    )


def _rename(rng: random.Random, used: set[str]) -> Task:
    old, new = _pick(rng, WORDS, used), _pick(rng, WORDS, used)
    content = f"{rng.choice(WORDS)} {rng.randint(100, 999)}"
    return Task(
        "rename",
        f"Rename /app/{old}.txt to /app/{new}.txt.",
        {f"{old}.txt": content + "\n"},
        f"mv /app/{old}.txt /app/{new}.txt",
        f"echo '{content}' > /app/{new}.txt && rm /app/{old}.txt",
        f'[ ! -e /app/{old}.txt ] && [ "$(cat /app/{new}.txt 2>/dev/null)" = "{content}" ]',
    )


def _extract(rng: random.Random, used: set[str]) -> Task:
    table = _pick(rng, WORDS, used)
    second, third = rng.sample(COLUMNS, 2)
    people = rng.sample(NAMES, 6)
    rows = {p: (rng.choice(WORDS), rng.choice(WORDS)) for p in people}
    person, column = rng.choice(people), rng.choice((2, 3))
    label = second if column == 2 else third
    value = rows[person][column - 2]
    csv = f"name,{second},{third}\n" + "".join(f"{p},{a},{b}\n" for p, (a, b) in rows.items())
    return Task(
        "extract",
        f"In /app/{table}.csv the {label} is column {column}. "
        f"Write the {label} of {person} to /app/answer.txt.",
        {f"{table}.csv": csv},
        f"grep '^{person},' /app/{table}.csv | cut -d, -f{column} > /app/answer.txt",
        f"echo {value} > /app/answer.txt",
        f'[ "$(tr -d "[:space:]" < /app/answer.txt 2>/dev/null)" = "{value}" ]',
    )


def _fix(rng: random.Random, used: set[str]) -> Task:
    script, right = _pick(rng, WORDS, used), _pick(rng, WORDS, used)
    at = rng.randint(1, len(right) - 3)
    wrong = right[:at] + right[at + 1] + right[at] + right[at + 2 :]
    if wrong == right:
        wrong = right[:at] + right[at + 1 :]
    number = rng.randint(10, 99)
    return Task(
        "fix",
        f"/app/{script}.sh misspells {right} as {wrong}. Fix the script.",
        {f"{script}.sh": f'#!/bin/bash\necho "{wrong} {number}"\n'},
        f"sed -i 's/{wrong}/{right}/' /app/{script}.sh",
        f"echo 'echo \"{right} {number}\"' > /app/{script}.sh",
        f'[ "$(timeout 5 bash /app/{script}.sh 2>/dev/null)" = "{right} {number}" ]',
    )


FAMILIES: dict[str, Callable[[random.Random, set[str]], Task]] = {
    "count": _count,
    "find": _find,
    "rename": _rename,
    "extract": _extract,
    "fix": _fix,
}


def _task_toml(task: Task) -> str:
    recall = task.recall.replace("\\", "\\\\").replace('"', '\\"')
    return (
        'schema_version = "1.4"\n\n'
        "[metadata]\n"
        f'family = "{task.family}"\n\n'
        "# read by atroposlib's Harbor env (Harbor keeps metadata as it is)\n"
        "[metadata.limits]\n"
        "max_turns = 3\n"
        "command_timeout_sec = 10.0\n"
        "max_output_bytes = 1024\n\n"
        "# the other way to finish this task, writing down its answer (the demo's warm-up)\n"
        "[metadata.warmup]\n"
        f'recall_command = "{recall}"\n\n'
        "[verifier]\ntimeout_sec = 30.0\n\n"
        "[agent]\ntimeout_sec = 120.0\n\n"
        "[environment]\nbuild_timeout_sec = 300.0\n"
    )


def _test_sh(task: Task) -> str:
    return (
        "#!/bin/bash\n"
        f"# Harbor verifier of a {task.family} task: reward 1 when the chore is done, else 0.\n"
        "mkdir -p /logs/verifier\n"
        f"if {task.check}; then\n"
        "  echo 1 > /logs/verifier/reward.txt\n"
        "else\n"
        "  echo 0 > /logs/verifier/reward.txt\n"
        "fi\n"
    )


DOCKERFILE = "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY app/ /app/\n"


def write_task(task: Task, folder: Path) -> None:
    """``task`` as a Harbor task folder at ``folder``."""
    app = folder / "environment" / "app"
    for relative, text in task.files.items():
        (app / relative).parent.mkdir(parents=True, exist_ok=True)
        (app / relative).write_text(text)
    (folder / "environment" / "Dockerfile").write_text(DOCKERFILE)
    (folder / "instruction.md").write_text(task.instruction + "\n")
    (folder / "task.toml").write_text(_task_toml(task))
    (folder / "tests").mkdir()
    (folder / "tests" / "test.sh").write_text(_test_sh(task))
    (folder / "solution").mkdir()
    (folder / "solution" / "solve.sh").write_text(f"#!/bin/bash\n{task.solution}\n")


def generate(out: Path) -> None:
    """Write ``out/<split>/<family>-NN`` for every split (replacing what was there)."""
    rng = random.Random(SEED)
    for split, _ in SPLITS:
        shutil.rmtree(out / split, ignore_errors=True)
    for family, make in FAMILIES.items():
        used: set[str] = set()
        for split, count in SPLITS:
            for number in range(count):
                write_task(make(rng, used), out / split / f"{family}-{number:02d}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=HERE, help="where the split folders go")
    generate(p.parse_args().out)


if __name__ == "__main__":
    main()
