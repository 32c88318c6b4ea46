"""``elastic.command`` is checked when the cluster is made, not at each start."""

from __future__ import annotations

import pytest

from clusterdeck.core.client.localcluster import _check_command
from clusterdeck.core.config.settings import ConfigError


def test_a_command_with_the_known_placeholders_and_doubled_braces_passes() -> None:
    _check_command("ssh worker-{index} clusterdeck taskmanager --credentials - "
                   "| awk '{{print}}' # {name} of {cluster}")


@pytest.mark.parametrize(("template", "complaint"), [
    ("", "needs elastic.command"),
    ("ssh {host} clusterdeck taskmanager", "only {name}, {index} and {cluster}"),
    ("awk '{print}'", "only {name}"),
    ("echo {0}", "only {name}"),
])
def test_a_command_that_could_never_run_is_refused(template: str, complaint: str) -> None:
    with pytest.raises(ConfigError, match=complaint.replace("{", r"\{").replace("}", r"\}")):
        _check_command(template)
