"""Text reversal: reverse a short phrase character by character — procedural, no data needed.

The same machinery as letter counting (the base class ``atroposlib.envkit.text_task_env.TextTaskEnv``):
phrases of 1-3 words from reasoning-gym's word list, the answer inside ``<answer></answer>``; reward
1.0 for the exact reversed text, 0.0 otherwise.

    python environments/text_reversal_environment.py process --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:9001/v1 --env.total_steps 2
"""

import random

from atroposlib.envkit.servers import local_defaults
from atroposlib.envkit.text_task_env import TextTaskEnv
from atroposlib.envkit.text_tasks import text_reversal_item
from atroposlib.type_definitions import Item


class TextReversalEnv(TextTaskEnv):
    name = "text_reversal"
    instruction = "Write the reversed text, and nothing else, inside <answer></answer> tags."
    config_init = local_defaults(group_size=8, max_token_length=1024, batch_size=16)

    def make_item(self, rng: random.Random) -> Item:
        return text_reversal_item(rng, self.config.max_words)


__all__ = ["TextReversalEnv"]

if __name__ == "__main__":
    TextReversalEnv.cli()
