"""An env file whose ``setup()`` refuses its configuration (as a dataset env does when the dataset
named in its config is missing): ``process`` must exit with one line and leave no output file."""

from atroposlib.errors import ConfigError
from tests.envs.example_env import AdditionEnv


class SetupFailsEnv(AdditionEnv):
    name = "setup_fails_test"

    async def setup(self) -> None:
        raise ConfigError("--env.dataset_name 'no-such-dataset' is not available on this machine")


if __name__ == "__main__":
    SetupFailsEnv.cli()
