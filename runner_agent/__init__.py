"""The Podium runner agent: pulls reproduction jobs from a Podium server and runs them on this host.

Standard library only, and nothing from the rest of the repository: it is copied onto GPU hosts that
have a Python and a training stack, not Django. `python -m runner_agent --help` says how to run it.

Layout: `cli` (arguments), `agent` (the claim loop), `attempt` (one attempt, from claim to complete),
`process` (the job's process group), `output` (its lines), `hardware` (what this host has),
`client` (HTTP with retries), `container` (jobs in Docker or Podman), `leftovers` (what an agent
killed outright left behind, cleaned up by the next), `verdict` (reading what the server judged).
"""

__version__ = "0.1.0"
