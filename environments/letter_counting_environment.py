"""Letter counting: "How many times does the letter "r" appear in "strawberry"?" — procedural, no data.

Phrases of 1-3 words come from reasoning-gym's bundled word list (random pronounceable strings if it is
missing); half the questions ask for a letter that occurs, the rest for any letter (answer may be 0).
The model answers inside ``<answer></answer>`` after an optional thinking block.

Reward: 1.0 for the exact count, 0.0 otherwise (a missing tag is 0.0 too).

Prompting, sampling, scoring and evaluation are those of every procedural text env (the base class
``atroposlib.envkit.text_task_env.TextTaskEnv``, also under ``text_reversal_environment.py``); this file
says what is letter counting's: its items and instruction.

    python environments/letter_counting_environment.py process --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:9001/v1 --env.total_steps 2
"""

import random

from atroposlib.envkit.servers import local_defaults
from atroposlib.envkit.text_task_env import TextTaskEnv
from atroposlib.envkit.text_tasks import letter_counting_item
from atroposlib.type_definitions import Item


class LetterCountingEnv(TextTaskEnv):
    name = "letter_counting"
    instruction = "Count carefully, then give only the number inside <answer></answer> tags."
    config_init = local_defaults(group_size=8, max_token_length=1024, batch_size=16)

    def make_item(self, rng: random.Random) -> Item:
        return letter_counting_item(rng, self.config.max_words)


if __name__ == "__main__":
    LetterCountingEnv.cli()
