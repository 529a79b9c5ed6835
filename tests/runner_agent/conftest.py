"""The fake Podium server, the recording clock and the job host of test_agent.py, for every agent test module."""

from tests.runner_agent.test_agent import clock, job_host, podium  # noqa: F401
